#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <cstdio>
#include <cstdint>
struct gla : linstate::spec<> {};
struct glas : linstate::spec<> { using decay = linstate::decay::scalar; };
template<class T> uint64_t h(const T* p, long n){uint64_t x=1469598103934665603ull; const unsigned char* c=(const unsigned char*)p; for(long i=0;i<n*(long)sizeof(T);i++){x^=c[i];x*=1099511628211ull;} return x;}
template<class S> void go(const char* nm, long B, long K, long V, long T, int th){
  namespace lb=linstate::bench;
  lb::workload<S,float> w(lb::mode::decode, lb::options{.B=B,.T=T,.H=4,.K=K,.V=V});
  for(int i=0;i<5;i++) w.decode(linstate::cpu{.threads=th}, linstate::recurrent{});
  printf("%s B=%ld K=%ld V=%ld T=%ld th=%d o %016lx state %016lx\n",nm,B,K,V,T,th,(unsigned long)h(w.o.data(),w.o.numel()),(unsigned long)h(w.state.data(),w.state.numel()));
}
int main(){ for(long B:{1L,16L}) for(long V:{64L,128L,40L}) for(long T:{1L,7L}) for(int th:{1,2}) { go<gla>("gla",B,128,V,T,th); go<glas>("glas",B,64,V,T,th);} }
