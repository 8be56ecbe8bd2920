// docs/data/issue13/s13/train_ab.cpp — session 11's train_ab.cpp with wall time: alternates the forward and backward
// calls of several builds of train_so.cpp in one process, call by call (the order of the builds reversed every other
// round), and prints per build the medians of process CPU and wall per call, backward / forward, tokens per second of a
// forward + backward, the backward's phases and the hashes of the gradients and of the forward's o and final state;
// then each build's per-round ratios against the first build's. Prints the load average before and after.
//   g++ -std=c++20 -O2 docs/data/issue13/s13/train_ab.cpp -o train_ab -ldl
//   OMP_WAIT_POLICY=passive ./train_ab --T=4096 --threads=2 --rounds=16 A.so B.so ...
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static const char* names[7] = {"staging", "exp + scaling", "GEMM", "triangular solve", "output rows", "other", "bf16 packing"};
static void uptime() {
  std::fflush(stdout);
  if (std::system("uptime") != 0) std::printf("(uptime failed)\n");
}

int main(int argc, char** argv) {
  long T = 4096, H = 8;
  int threads = 1, rounds = 10;
  std::vector<std::string> libs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--T=", 4)) T = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--H=", 4)) H = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--threads=", 10)) threads = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--rounds=", 9)) rounds = std::atoi(argv[i] + 9);
    else libs.push_back(argv[i]);
  }
  struct lib {
    std::string name;
    void (*init)(long, long, int);
    double (*call)(int, double*, double*);
    unsigned long long (*hash)();
    unsigned long long (*hash_fwd)();
    std::vector<double> f, b, fw, bw, ratio;
    std::vector<std::vector<double>> ph = std::vector<std::vector<double>>(7);
  };
  uptime();
  std::vector<lib> L;
  for (auto& s : libs) {
    void* h = dlopen(s.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    L.push_back({s, reinterpret_cast<void (*)(long, long, int)>(dlsym(h, "so_init")),
                 reinterpret_cast<double (*)(int, double*, double*)>(dlsym(h, "so_call")),
                 reinterpret_cast<unsigned long long (*)()>(dlsym(h, "so_hash")),
                 reinterpret_cast<unsigned long long (*)()>(dlsym(h, "so_hash_fwd"))});
    L.back().init(T, H, threads);
  }
  double ph[7], wall;
  for (int r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < L.size(); ++j) {
      lib& x = L[r % 2 ? L.size() - 1 - j : j];
      const double f = x.call(0, ph, &wall);
      x.fw.push_back(wall);
      const double b = x.call(1, ph, &wall);
      x.bw.push_back(wall);
      x.f.push_back(f), x.b.push_back(b), x.ratio.push_back(b / f);
      for (int p = 0; p < 7; ++p) x.ph[p].push_back(ph[p]);
    }
  std::printf("GLA chunked<64>, B = 1, T = %ld, H = %ld, K = V = 128, threads = %d, %d rounds; medians per call\n", T, H, threads,
              rounds);
  for (auto& x : L) {
    const double f = median(x.f), b = median(x.b), fw = median(x.fw), bw = median(x.bw);
    std::printf("%s: process CPU forward %.2f ms, backward %.2f ms, backward / forward %.3f (median of the rounds' ratios %.3f); "
                "wall forward %.2f ms, backward %.2f ms, forward + backward %.2f ms = %.1f k tokens/s (%.1f k tokens per CPU "
                "second); hashes: gradients %016llx, o + final state %016llx\n",
                x.name.c_str(), 1e3 * f, 1e3 * b, b / f, median(x.ratio), 1e3 * fw, 1e3 * bw, 1e3 * (fw + bw), T / (fw + bw) / 1e3,
                T / (f + b) / 1e3, x.hash(), x.hash_fwd ? x.hash_fwd() : 0ull);
    std::printf("   backward phases (thread CPU):");
    for (int p = 0; p < 7; ++p)
      if (median(x.ph[p]) > 0) std::printf(" %s %.2f ms;", names[p], 1e3 * median(x.ph[p]));
    std::printf("\n");
  }
  for (std::size_t j = 1; j < L.size(); ++j) {
    auto ratio = [&](const std::vector<double>& a, const std::vector<double>& b, const char* what) {
      std::vector<double> r;
      for (int i = 0; i < rounds; ++i) r.push_back(a[i] / b[i]);
      std::printf("%s / %s %s: %.3f (per-round ratios, median; range %.3f–%.3f)\n", L[j].name.c_str(), L[0].name.c_str(), what,
                  median(r), *std::min_element(r.begin(), r.end()), *std::max_element(r.begin(), r.end()));
    };
    ratio(L[j].f, L[0].f, "forward CPU");
    ratio(L[j].b, L[0].b, "backward CPU");
    std::vector<double> s1, s0;
    for (int i = 0; i < rounds; ++i) s1.push_back(L[j].fw[i] + L[j].bw[i]), s0.push_back(L[0].fw[i] + L[0].bw[i]);
    ratio(s1, s0, "forward + backward wall");
  }
  uptime();
}
