#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <ctime>
struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };
static double pcpu(){timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
template<class S> void go(int n,int th,long T){
  namespace lb=linstate::bench;
  lb::workload<S,float> w(lb::mode::prefill, lb::options{.B=1,.T=T,.H=8,.K=128,.V=128});
  const linstate::cpu be{.threads=th};
  w.prefill(be, linstate::chunked<64>{});
  double c0=pcpu();
  auto t0=std::chrono::steady_clock::now();
  for(int i=0;i<n;i++) w.prefill(be, linstate::chunked<64>{});
  printf("wall %.2f ms/call cpu %.2f ms/call\n", std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count()/n*1e3,(pcpu()-c0)/n*1e3);
}
int main(int argc,char**argv){
  int n=argc>1?atoi(argv[1]):30; int th=argc>2?atoi(argv[2]):1; long T=argc>3?atol(argv[3]):4096;
  if(argc>4&&!strcmp(argv[4],"gdn")) go<gdn>(n,th,T); else go<gla>(n,th,T);
}
