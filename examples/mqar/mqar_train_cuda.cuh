// examples/mqar/mqar_train_cuda.cuh — the GPU side of the mqar command (--device cuda): the model of
// <linstate/layers/cuda_model.cuh> (cuBLAS fp32 products without TF32, linstate::cuda state kernels)
// with cuda_adamw and cuda_clip_grad_norm, behind the members train_variant drives (cpu_trainer<V>'s,
// mqar_train.hpp). The same model_config gives the same initial parameters as on the CPU; checkpoints
// are the CPU's format (parameters and AdamW state go through a host model and a host adamw), so a run
// saved on one device loads on the other. Included by the variant_*_cuda.cu translation units.
#pragma once

#include <cuda_runtime.h>

#include <linstate/layers/cuda_model.cuh>

#include "mqar_train.hpp"

namespace mqar_cmd {

//! Throws linstate::error unless a CUDA device answers (the command turns it into its one-line error).
inline void require_cuda_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1)
    throw linstate::error(std::string("--device cuda: no usable CUDA device (") +
                          (e != cudaSuccess ? cudaGetErrorString(e) : "none found") + ")");
}

template <class V>
class cuda_trainer {
 public:
  static constexpr const char* device = "cuda";
  cuda_trainer(const linstate::layers::model_config& mc, double weight_decay)
      : base_(baseline()), cfg_(mc), m_(mc), ps_(m_.parameters()), opt_(ps_, {.weight_decay = weight_decay}), host_(mc) {}
  std::int64_t parameters() const { return linstate::layers::count(ps_); }
  std::int64_t steps() const { return opt_.steps(); }
  void load(const std::string& path) {
    auto hps = host_.parameters();
    linstate::layers::adamw<float> hopt(hps, {});
    linstate::layers::load_checkpoint(path, hps, hopt);  // checks everything before it writes anything
    m_.copy_from(host_);
    opt_.load_state(hopt);
  }
  void save(const std::string& path, const std::string& meta) {
    m_.copy_to(host_);
    auto hps = host_.parameters();
    linstate::layers::adamw<float> hopt(hps, {});
    opt_.store_state(hopt);
    linstate::layers::save_checkpoint(path, hps, hopt, meta);
  }
  linstate::layers::loss_result loss(const mqar::batch& b) {
    m_.zero_grad();
    const auto r = m_.loss(b.inputs, b.targets, b.B, b.T);
    fresh_ = false;
    return r;
  }
  void backward() { m_.backward(); }
  double clip(double max_norm) { return linstate::layers::cuda_clip_grad_norm(ps_, max_norm); }
  void step(double lr) { opt_.step(lr); }
  void sync() { linstate::cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "mqar --device cuda"); }
  std::span<const float> logits() {
    if (!fresh_) m_.logits(logits_), fresh_ = true;
    return {logits_.data(), logits_.size()};
  }
  //! cuda_model has no forward without targets: the loss is computed too (its gradient is not used)
  void evaluate(const mqar::batch& b) {
    m_.loss(b.inputs, b.targets, b.B, b.T);
    fresh_ = false;
  }
  double mixer_seconds() const { return -1; }
  double kernel_seconds() const { return -1; }
  //! device memory in use now less what was in use before the model was built (cudaMemGetInfo)
  double device_bytes() const { return static_cast<double>(in_use() - base_); }
  linstate::layers::model<V>& host_model() {
    m_.copy_to(host_);
    return host_;
  }

 private:
  static std::size_t in_use() {
    std::size_t free = 0, total = 0;
    linstate::cuda_detail::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", "mqar --device cuda");
    return total - free;
  }
  static std::size_t baseline() {
    require_cuda_device();
    return in_use();
  }
  std::size_t base_;
  linstate::layers::model_config cfg_;
  linstate::layers::cuda_model<V> m_;
  std::vector<linstate::layers::parameter_ref<float>> ps_;
  linstate::layers::cuda_adamw opt_;
  linstate::layers::model<V> host_;  //!< checkpoints and diagnostics go through it
  std::vector<float> logits_;
  bool fresh_ = false;
};

}  // namespace mqar_cmd
