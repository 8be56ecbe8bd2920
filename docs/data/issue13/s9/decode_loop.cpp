#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <ctime>
struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<false>; };
static double pcpu(){timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
template<class S> void go(int n,int th,long B){
  namespace lb=linstate::bench;
  lb::workload<S,float> w(lb::mode::decode, lb::options{.B=B,.T=1,.H=8,.K=128,.V=128});
  const linstate::cpu be{.threads=th};
  for(int i=0;i<10;i++) w.decode(be, linstate::recurrent{});
  double c0=pcpu(); auto t0=std::chrono::steady_clock::now();
  for(int i=0;i<n;i++) w.decode(be, linstate::recurrent{});
  printf("wall %.4f ms/call cpu %.4f ms/call\n", std::chrono::duration<double>(std::chrono::steady_clock::now()-t0).count()/n*1e3,(pcpu()-c0)/n*1e3);
}
int main(int argc,char**argv){
  int n=atoi(argv[1]); int th=atoi(argv[2]); long B=atol(argv[3]);
  if(argc>4&&!strcmp(argv[4],"gdn")) go<gdn>(n,th,B); else go<gla>(n,th,B);
}
