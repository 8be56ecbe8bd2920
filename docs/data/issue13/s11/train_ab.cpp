// docs/data/issue13/s11/train_ab.cpp — alternates the forward and backward calls of several builds of train_so.cpp
// in one process, call by call (the order of the builds reversed every other round), and prints the medians of
// each build's process CPU per call, backward / forward, the backward's phases and the gradients' hash.
//   g++ -std=c++20 -O2 docs/data/issue13/s11/train_ab.cpp -o train_ab -ldl
//   OMP_WAIT_POLICY=passive ./train_ab --T=4096 --threads=1 --rounds=10 A.so B.so ...
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
    double (*call)(int, double*);
    unsigned long long (*hash)();
    std::vector<double> f, b, ratio;
    std::vector<std::vector<double>> ph = std::vector<std::vector<double>>(7);
  };
  std::vector<lib> L;
  for (auto& s : libs) {
    void* h = dlopen(s.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    L.push_back({s, reinterpret_cast<void (*)(long, long, int)>(dlsym(h, "so_init")),
                 reinterpret_cast<double (*)(int, double*)>(dlsym(h, "so_call")),
                 reinterpret_cast<unsigned long long (*)()>(dlsym(h, "so_hash"))});
    L.back().init(T, H, threads);
  }
  double ph[7];
  for (int r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < L.size(); ++j) {
      lib& x = L[r % 2 ? L.size() - 1 - j : j];
      const double f = x.call(0, ph), b = x.call(1, ph);
      x.f.push_back(f), x.b.push_back(b), x.ratio.push_back(b / f);
      for (int p = 0; p < 7; ++p) x.ph[p].push_back(ph[p]);
    }
  std::printf("GLA chunked<64>, T = %ld, H = %ld, K = V = 128, threads = %d, %d rounds; process CPU per call, medians\n", T, H,
              threads, rounds);
  for (auto& x : L) {
    std::printf("%s: forward %.2f ms, backward %.2f ms, backward / forward %.3f (median of the rounds' ratios %.3f), hash %016llx\n",
                x.name.c_str(), 1e3 * median(x.f), 1e3 * median(x.b), median(x.b) / median(x.f), median(x.ratio), x.hash());
    std::printf("   backward phases:");
    for (int p = 0; p < 7; ++p)
      if (median(x.ph[p]) > 0) std::printf(" %s %.2f ms;", names[p], 1e3 * median(x.ph[p]));
    std::printf("\n");
  }
  if (L.size() >= 2)
    for (std::size_t j = 1; j < L.size(); ++j) {
      std::vector<double> rb;
      for (int r = 0; r < rounds; ++r) rb.push_back(L[j].b[r] / L[0].b[r]);
      std::printf("%s / %s backward: %.3f (per-round ratios, median; range %.3f–%.3f)\n", L[j].name.c_str(), L[0].name.c_str(),
                  median(rb), *std::min_element(rb.begin(), rb.end()), *std::max_element(rb.begin(), rb.end()));
    }
}
