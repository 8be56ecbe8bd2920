// docs/data/issue13/s12/prefill_ab.cpp — alternates the prefill calls of several builds of prefill_so.cpp in one
// process, call by call (the order of the builds reversed every other round), and prints each build's medians of
// process CPU and wall per call, the per-round ratios to the first build, the load average, and o's hash.
//   g++ -std=c++20 -O2 docs/data/issue13/s12/prefill_ab.cpp -o prefill_ab -ldl
//   OMP_WAIT_POLICY=passive ./prefill_ab --T=4096 --threads=1 --rounds=20 [--all-pairs] A.so B.so ...
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
static double loadavg() {
  double l = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = 0;
    std::fclose(f);
  }
  return l;
}

int main(int argc, char** argv) {
  long T = 4096, H = 8;
  int threads = 1, rounds = 10, reps = 1;
  bool all_pairs = false;
  std::vector<std::string> libs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--T=", 4)) T = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--H=", 4)) H = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--threads=", 10)) threads = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--rounds=", 9)) rounds = std::atoi(argv[i] + 9);
    else if (!std::strncmp(argv[i], "--reps=", 7)) reps = std::atoi(argv[i] + 7);
    else if (!std::strcmp(argv[i], "--all-pairs")) all_pairs = true;
    else libs.push_back(argv[i]);
  }
  struct lib {
    std::string name;
    void (*init)(long, long, int);
    double (*call)(double*);
    unsigned long long (*hash)();
    std::vector<double> c, w;
  };
  std::vector<lib> L;
  for (auto& s : libs) {
    void* h = dlopen(s.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) { std::fprintf(stderr, "%s\n", dlerror()); return 1; }
    L.push_back({s, reinterpret_cast<void (*)(long, long, int)>(dlsym(h, "so_init")),
                 reinterpret_cast<double (*)(double*)>(dlsym(h, "so_call")),
                 reinterpret_cast<unsigned long long (*)()>(dlsym(h, "so_hash"))});
    L.back().init(T, H, threads);
  }
  const double l0 = loadavg();
  for (int r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < L.size(); ++j) {
      lib& x = L[r % 2 ? L.size() - 1 - j : j];
      double c = 0, w = 0;
      for (int k = 0; k < reps; ++k) {
        double wk;
        c += x.call(&wk), w += wk;
      }
      x.c.push_back(c / reps), x.w.push_back(w / reps);
    }
  std::printf("prefill chunked<64>, T = %ld, H = %ld, K = V = 128, threads = %d, %d rounds x %d calls; load %.2f -> %.2f\n", T,
              H, threads, rounds, reps, l0, loadavg());
  for (auto& x : L)
    std::printf("%s: process CPU %.2f ms, wall %.2f ms per call (medians), hash %016llx\n", x.name.c_str(), 1e3 * median(x.c),
                1e3 * median(x.w), x.hash());
  for (std::size_t i = 0; i < L.size(); ++i)  // every pair (with --all-pairs; else each build against the first)
    for (std::size_t j = i + 1; j < L.size(); ++j) {
      if (i > 0 && !all_pairs) continue;
      std::vector<double> rc, rw;
      for (int r = 0; r < rounds; ++r) rc.push_back(L[j].c[r] / L[i].c[r]), rw.push_back(L[j].w[r] / L[i].w[r]);
      std::printf("%s / %s: CPU %.3f (per-round ratios, median; range %.3f-%.3f), wall %.3f\n", L[j].name.c_str(),
                  L[i].name.c_str(), median(rc), *std::min_element(rc.begin(), rc.end()), *std::max_element(rc.begin(), rc.end()),
                  median(rw));
    }
}
