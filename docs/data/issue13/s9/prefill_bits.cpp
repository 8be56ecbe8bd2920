#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <cstdio>
#include <cstring>
#include <cstdint>
struct gla : linstate::spec<> {};
struct glah : linstate::spec<> { using decay = linstate::decay::scalar; };
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };
template<class T> uint64_t h(const T* p, long n){uint64_t x=1469598103934665603ull; const unsigned char* c=(const unsigned char*)p; for(long i=0;i<n*(long)sizeof(T);i++){x^=c[i];x*=1099511628211ull;} return x;}
template<class S, class A> void go(const char* nm, long T, long K, int th, A alg){
  namespace lb=linstate::bench;
  lb::workload<S,float> w(lb::mode::prefill, lb::options{.B=1,.T=T,.H=4,.K=K,.V=K});
  w.prefill(linstate::cpu{.threads=th}, alg);
  printf("%s T=%ld K=%ld th=%d o %016lx state %016lx\n",nm,T,K,th,(unsigned long)h(w.o.data(),w.o.numel()),(unsigned long)h(w.final_state.data(),w.final_state.numel()));
}
int main(){
  for(long T: {100L,1024L}) for(long K:{64L,128L,36L}) for(int th:{1,2}){
    go<gla>("gla c64",T,K,th,linstate::chunked<64>{});
    go<gla>("gla c32",T,K,th,linstate::chunked<32>{});
    go<glah>("glah c64",T,K,th,linstate::chunked<64>{});
    go<gdn>("gdn c64",T,K,th,linstate::chunked<64>{});
  }
}
