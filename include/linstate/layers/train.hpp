// linstate/layers/train.hpp — what trains a model of <linstate/layers/model.hpp>: AdamW, the
// learning-rate schedule (linear warm-up, cosine decay), global-norm gradient clipping, and
// checkpoints of the parameters and the optimiser state (one file each, written atomically).
//
// \code
//   linstate::layers::model<gla> m(cfg);
//   auto ps = m.parameters();
//   linstate::layers::adamw<float> opt(ps, {.weight_decay = 0.1});
//   linstate::layers::cosine_schedule lr{.peak = 3e-3, .warmup = 50, .total = 1000};
//   for (std::int64_t s = 0; s < 1000; ++s) {
//     linstate::layers::zero_grad(ps);
//     auto r = m.loss(ids, targets, B, T);  m.backward();
//     linstate::layers::clip_grad_norm(ps, 1.0);
//     opt.step(lr(s));
//   }
//   linstate::layers::save_checkpoint("run/step1000.ckpt", ps, opt);    // temp file, fsync, rename
//   linstate::layers::load_checkpoint("run/step1000.ckpt", ps, opt);    // names and shapes checked
// \endcode
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <numbers>
#include <string>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parameter.hpp"

namespace linstate::layers {

//! AdamW's settings (PyTorch's torch.optim.AdamW semantics; betas as nanoGPT's).
struct adamw_config {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  //!< decoupled: θ ← θ(1 − lr·wd), only for parameters with weight_decay = true
};

//! \brief AdamW over a fixed list of parameters (norm weights, biases, A_log, dt_bias carry
//! weight_decay = false and are not decayed). Per parameter i, at step t = 1, 2, …:
//! \verbatim
//!   m ← β₁ m + (1 − β₁) g          v ← β₂ v + (1 − β₂) g²
//!   θ ← θ (1 − lr·wd)               (weight-decayed parameters only)
//!   θ ← θ − lr · (m / (1 − β₁ᵗ)) / (sqrt(v / (1 − β₂ᵗ)) + ε)
//! \endverbatim
//! Moments in fp32 (Real), the update computed in double per element. Elementwise, so it is
//! the same for any thread count.
template <class Real = float>
class adamw {
 public:
  adamw(std::vector<parameter_ref<Real>> ps, const adamw_config& c = {}) : ps_(std::move(ps)), cfg_(c) {
    if (!(c.beta1 >= 0 && c.beta1 < 1) || !(c.beta2 >= 0 && c.beta2 < 1))
      throw error("linstate::layers::adamw: beta1 and beta2 must be in [0, 1)");
    if (!(c.eps > 0)) throw error("linstate::layers::adamw: eps must be > 0");
    if (!(c.weight_decay >= 0)) throw error("linstate::layers::adamw: weight_decay must be >= 0");
    for (const auto& p : ps_) {
      m_.emplace_back(static_cast<std::size_t>(p.value.numel()), Real(0));
      v_.emplace_back(static_cast<std::size_t>(p.value.numel()), Real(0));
    }
  }
  const adamw_config& config() const { return cfg_; }
  const std::vector<parameter_ref<Real>>& params() const { return ps_; }
  //! Steps taken (t of the bias correction).
  std::int64_t steps() const { return t_; }
  std::vector<Real>& first_moment(std::size_t i) { return m_.at(i); }
  std::vector<Real>& second_moment(std::size_t i) { return v_.at(i); }
  const std::vector<Real>& first_moment(std::size_t i) const { return m_.at(i); }
  const std::vector<Real>& second_moment(std::size_t i) const { return v_.at(i); }
  void set_steps(std::int64_t t) { t_ = t; }

  //! One update with learning rate `lr`, from the gradients now in the parameters.
  void step(double lr) {
    ++t_;
    const double b1 = cfg_.beta1, b2 = cfg_.beta2;
    const double c1 = 1.0 - std::pow(b1, static_cast<double>(t_)), c2 = 1.0 - std::pow(b2, static_cast<double>(t_));
    for (std::size_t i = 0; i < ps_.size(); ++i) {
      const auto& p = ps_[i];
      Real *m = m_[i].data(), *v = v_[i].data();
      const double decay = p.weight_decay ? 1.0 - lr * cfg_.weight_decay : 1.0;
      const index_t n = p.value.numel();
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
      for (index_t j = 0; j < n; ++j) {
        const double g = static_cast<double>(p.grad.data[j]);
        const double mj = b1 * static_cast<double>(m[j]) + (1.0 - b1) * g;
        const double vj = b2 * static_cast<double>(v[j]) + (1.0 - b2) * g * g;
        m[j] = static_cast<Real>(mj), v[j] = static_cast<Real>(vj);
        const double th = static_cast<double>(p.value.data[j]) * decay;
        p.value.data[j] = static_cast<Real>(th - lr * (mj / c1) / (std::sqrt(vj / c2) + cfg_.eps));
      }
    }
  }

 private:
  std::vector<parameter_ref<Real>> ps_;
  adamw_config cfg_;
  std::vector<std::vector<Real>> m_, v_;
  std::int64_t t_ = 0;
};

//! \brief Linear warm-up from peak/warmup to peak over `warmup` steps, then a cosine from peak to
//! `floor` at step `total` (and `floor` after it). Step s counts from 0:
//!   s < warmup:  peak · (s + 1) / warmup
//!   else:        floor + (peak − floor) · (1 + cos(π · min(1, (s − warmup) / max(1, total − warmup)))) / 2
struct cosine_schedule {
  double peak = 1e-3;
  std::int64_t warmup = 0;
  std::int64_t total = 1;
  double floor = 0;
  double operator()(std::int64_t s) const {
    if (s < warmup) return peak * static_cast<double>(s + 1) / static_cast<double>(warmup);
    const double span = static_cast<double>(std::max<std::int64_t>(1, total - warmup));
    const double x = std::min(1.0, static_cast<double>(s - warmup) / span);
    return floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * x));
  }
};

//! The global L2 norm of every gradient of `ps` (summed in double, in list order).
template <class Real>
double grad_norm(const std::vector<parameter_ref<Real>>& ps) {
  double ss = 0;
  for (const auto& p : ps)
    for (index_t i = 0; i < p.grad.numel(); ++i) ss += static_cast<double>(p.grad.data[i]) * static_cast<double>(p.grad.data[i]);
  return std::sqrt(ss);
}

//! \brief Scales every gradient by max_norm / norm when the global norm exceeds max_norm (as
//! torch.nn.utils.clip_grad_norm_, without its 1e-6); returns the norm before clipping. A non-finite
//! norm is returned and nothing is scaled (the caller decides whether to skip the step).
template <class Real>
double clip_grad_norm(const std::vector<parameter_ref<Real>>& ps, double max_norm) {
  if (!(max_norm > 0)) throw error("linstate::layers::clip_grad_norm: max_norm must be > 0");
  const double n = grad_norm(ps);
  if (std::isfinite(n) && n > max_norm) {
    const Real s = static_cast<Real>(max_norm / n);
    for (const auto& p : ps)
      for (index_t i = 0; i < p.grad.numel(); ++i) p.grad.data[i] *= s;
  }
  return n;
}

//! What one train_step did.
struct step_result {
  double ce = 0, aux = 0, total = 0;  //!< the loss before the update (model::loss's)
  double grad_norm = 0;               //!< the global gradient norm before clipping
  double lr = 0;                      //!< the learning rate used
  bool skipped = false;               //!< true when the loss or the norm was not finite: no update
};

//! \brief One optimiser step of `m` (a layers::model) on ids / targets `[B,T]`: zero the gradients,
//! loss, backward, clip to `max_norm` (<= 0: no clipping), AdamW with `lr`. A non-finite loss or
//! gradient norm skips the update (reported in `skipped`).
template <class Model, class Real>
step_result train_step(Model& m, const std::vector<parameter_ref<Real>>& ps, adamw<Real>& opt,
                       std::span<const std::int32_t> ids, std::span<const std::int32_t> targets, index_t B, index_t T,
                       double lr, double max_norm) {
  zero_grad(ps);
  const auto l = m.loss(ids, targets, B, T);
  m.backward();
  step_result r;
  r.ce = l.ce, r.aux = l.aux, r.total = l.total, r.lr = lr;
  r.grad_norm = max_norm > 0 ? clip_grad_norm(ps, max_norm) : grad_norm(ps);
  r.skipped = !std::isfinite(r.total) || !std::isfinite(r.grad_norm);
  if (!r.skipped) opt.step(lr);
  return r;
}

// ------------------------------------------------------------------------------------------------
// Checkpoints
// ------------------------------------------------------------------------------------------------
//
// One little-endian binary file:
//   "LSTCKPT\0"  u32 version (1)  u32 element size (4: fp32, 8: fp64)
//   u64 optimiser step t   u64 bytes of `meta`   meta (free text the caller stores: a config)
//   u64 parameter count, then per parameter: u32 name length, name, u32 rank, rank × i64 extents
//   then per parameter: value, AdamW m, AdamW v (numel elements each)
//   u64 FNV-1a 64 of every byte before it
// Load reads the whole file, checks the magic, version, element size, checksum, the parameter
// names and shapes against the live list, and only then writes into the parameters and moments.

inline constexpr char checkpoint_magic[8] = {'L', 'S', 'T', 'C', 'K', 'P', 'T', '\0'};
inline constexpr std::uint32_t checkpoint_version = 1;

namespace layers_detail {
inline std::uint64_t fnv1a64(const unsigned char* p, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
struct byte_writer {
  std::vector<unsigned char> b;
  void raw(const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    b.insert(b.end(), c, c + n);
  }
  template <class T>
  void put(T v) { raw(&v, sizeof v); }
};
struct byte_reader {
  const std::vector<unsigned char>& b;
  std::size_t at = 0;
  std::string path;
  void raw(void* p, std::size_t n, const char* what) {
    if (b.size() - at < n)
      throw error("linstate::layers::load_checkpoint: " + path + " is truncated (it ends inside " + what + ")");
    std::memcpy(p, b.data() + at, n);
    at += n;
  }
  template <class T>
  T get(const char* what) {
    T v;
    raw(&v, sizeof v, what);
    return v;
  }
};
inline std::string errno_text() { return std::strerror(errno); }
}  // namespace layers_detail

//! \brief Writes the parameters of `ps` and the AdamW state to `path` atomically: a temporary file
//! in the same directory, fsync, rename over `path`, fsync of the directory. On any failure the
//! temporary file is removed, `path` is left as it was, and linstate::error names the problem.
template <class Real>
void save_checkpoint(const std::string& path, const std::vector<parameter_ref<Real>>& ps, const adamw<Real>& opt,
                     const std::string& meta = "") {
  const std::string api = "linstate::layers::save_checkpoint";
  if (opt.params().size() != ps.size())
    throw error(api + ": the optimiser holds " + std::to_string(opt.params().size()) + " parameters but the list has " +
                std::to_string(ps.size()));
  layers_detail::byte_writer w;
  w.raw(checkpoint_magic, sizeof checkpoint_magic);
  w.put<std::uint32_t>(checkpoint_version);
  w.put<std::uint32_t>(sizeof(Real));
  w.put<std::uint64_t>(static_cast<std::uint64_t>(opt.steps()));
  w.put<std::uint64_t>(meta.size());
  w.raw(meta.data(), meta.size());
  w.put<std::uint64_t>(ps.size());
  for (const auto& p : ps) {
    w.put<std::uint32_t>(static_cast<std::uint32_t>(p.name.size()));
    w.raw(p.name.data(), p.name.size());
    w.put<std::uint32_t>(static_cast<std::uint32_t>(p.value.rank()));
    for (int d = 0; d < p.value.rank(); ++d) w.put<std::int64_t>(p.value.size(d));
  }
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::size_t n = static_cast<std::size_t>(ps[i].value.numel());
    w.raw(ps[i].value.data, n * sizeof(Real));
    w.raw(opt.first_moment(i).data(), n * sizeof(Real));
    w.raw(opt.second_moment(i).data(), n * sizeof(Real));
  }
  w.put<std::uint64_t>(layers_detail::fnv1a64(w.b.data(), w.b.size()));

  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw error(api + ": cannot create a temporary file beside " + path + ": " + layers_detail::errno_text());
  tmp = name.data();
  auto fail = [&](const std::string& what) {
    const std::string e = layers_detail::errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw error(api + ": " + what + " " + tmp + ": " + e + " (" + path + " is unchanged)");
  };
  std::size_t done = 0;
  while (done < w.b.size()) {
    const ssize_t k = ::write(fd, w.b.data() + done, w.b.size() - done);
    if (k < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    done += static_cast<std::size_t>(k);
  }
  if (::fsync(fd) != 0) fail("cannot fsync");
  if (::close(fd) != 0) {
    const std::string e = layers_detail::errno_text();
    ::unlink(tmp.c_str());
    throw error(api + ": cannot close " + tmp + ": " + e + " (" + path + " is unchanged)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = layers_detail::errno_text();
    ::unlink(tmp.c_str());
    throw error(api + ": cannot rename " + tmp + " to " + path + ": " + e + " (" + path + " is unchanged)");
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself durable; a failure here leaves a complete file in place
    ::close(dfd);
  }
}

//! What load_checkpoint found besides the tensors.
struct checkpoint_info {
  std::int64_t steps = 0;  //!< the optimiser's step count, restored into the adamw
  std::string meta;        //!< the caller's text given to save_checkpoint
};

//! \brief Reads `path` (written by save_checkpoint) into the parameters of `ps` and the AdamW state.
//! Throws linstate::error, before anything is written, when the file is missing, truncated, corrupted
//! (checksum), of another version or element type, or holds other parameter names or shapes.
template <class Real>
checkpoint_info load_checkpoint(const std::string& path, const std::vector<parameter_ref<Real>>& ps, adamw<Real>& opt) {
  const std::string api = "linstate::layers::load_checkpoint";
  if (opt.params().size() != ps.size())
    throw error(api + ": the optimiser holds " + std::to_string(opt.params().size()) + " parameters but the list has " +
                std::to_string(ps.size()));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw error(api + ": cannot open " + path + ": " + layers_detail::errno_text());
  std::vector<unsigned char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  layers_detail::byte_reader r{b, 0, path};
  char magic[8];
  r.raw(magic, sizeof magic, "the magic");
  if (std::memcmp(magic, checkpoint_magic, sizeof magic) != 0)
    throw error(api + ": " + path + " is not a linstate checkpoint (bad magic)");
  const auto version = r.get<std::uint32_t>("the version");
  if (version != checkpoint_version)
    throw error(api + ": " + path + " has format version " + std::to_string(version) + " but this build reads version " +
                std::to_string(checkpoint_version));
  const auto esize = r.get<std::uint32_t>("the element size");
  if (esize != sizeof(Real))
    throw error(api + ": " + path + " holds " + std::to_string(esize * 8) + "-bit parameters but the model's are " +
                std::to_string(sizeof(Real) * 8) + "-bit");
  if (b.size() < r.at + 8) throw error(api + ": " + path + " is truncated (no checksum)");
  std::uint64_t stored;
  std::memcpy(&stored, b.data() + b.size() - 8, 8);
  if (stored != layers_detail::fnv1a64(b.data(), b.size() - 8))
    throw error(api + ": " + path + " is corrupted or truncated (checksum mismatch)");
  checkpoint_info info;
  info.steps = static_cast<std::int64_t>(r.get<std::uint64_t>("the step count"));
  const auto mlen = r.get<std::uint64_t>("the meta length");
  if (mlen > b.size()) throw error(api + ": " + path + " is corrupted (meta length " + std::to_string(mlen) + ")");
  info.meta.resize(static_cast<std::size_t>(mlen));
  r.raw(info.meta.data(), info.meta.size(), "the meta text");
  const auto count = r.get<std::uint64_t>("the parameter count");
  if (count != ps.size())
    throw error(api + ": " + path + " holds " + std::to_string(count) + " parameters but the model has " +
                std::to_string(ps.size()));
  for (const auto& p : ps) {
    const auto nl = r.get<std::uint32_t>("a parameter name");
    if (nl > b.size()) throw error(api + ": " + path + " is corrupted (name length " + std::to_string(nl) + ")");
    std::string name(nl, '\0');
    r.raw(name.data(), nl, "a parameter name");
    if (name != p.name)
      throw error(api + ": " + path + " holds parameter \"" + name + "\" where the model has \"" + p.name + "\"");
    const auto rank = r.get<std::uint32_t>("a parameter shape");
    if (rank > static_cast<std::uint32_t>(shape_t::max_rank))
      throw error(api + ": " + path + " is corrupted (rank " + std::to_string(rank) + " for " + name + ")");
    std::vector<index_t> ext(rank);
    for (auto& e : ext) e = static_cast<index_t>(r.get<std::int64_t>("a parameter shape"));
    const shape_t s = shape_t::from_range(ext.begin(), ext.end());
    if (!(s == p.value.shape))
      throw error(api + ": " + path + ": parameter " + name + " has shape " + s.str() + " but the model's is " +
                  p.value.shape.str());
  }
  std::size_t need = r.at + 8;
  for (const auto& p : ps) need += 3 * static_cast<std::size_t>(p.value.numel()) * sizeof(Real);
  if (b.size() != need)
    throw error(api + ": " + path + " has " + std::to_string(b.size()) + " bytes but these parameters need " +
                std::to_string(need));
  // everything checked: now write
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::size_t n = static_cast<std::size_t>(ps[i].value.numel());
    r.raw(ps[i].value.data, n * sizeof(Real), "the values");
    r.raw(opt.first_moment(i).data(), n * sizeof(Real), "the first moments");
    r.raw(opt.second_moment(i).data(), n * sizeof(Real), "the second moments");
  }
  opt.set_steps(info.steps);
  return info;
}

}  // namespace linstate::layers
