// docs/data/issue13/s15/products_pad.cpp — the four products of one GLA chunk (C = 64, K = V = 128; gemm.hpp, one thread, operands in
// cache) with the state H and the scratch matrices at row strides 128 (as before session 15) or 144 floats (padded), the
// four layouts alternated 40 times; medians of thread CPU per product.
//   g++ -std=c++20 -O3 -march=native -DNDEBUG -Iinclude docs/data/issue13/s15/products_pad.cpp -o products_pad
#include <linstate/backend/cpu/gemm.hpp>
#include <vector>
#include <cstdio>
#include <random>
#include <algorithm>
#include <time.h>
static double tc(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
using namespace linstate::cpu_detail;
using linstate::index_t;
struct cfg{int padH,pad; std::vector<double> s[4];};
int main(){
  const index_t C=64,K=128,V=128;
  std::vector<cfg> cs={{0,0},{0,16},{16,0},{16,16}};
  std::mt19937 r(1); std::uniform_real_distribution<float> u(-1,1);
  struct bufs{std::vector<float> Q,Kd,KT,Vc,H,O,A,es;};
  std::vector<bufs> B(cs.size());
  for(size_t c=0;c<cs.size();c++){auto&b=B[c];index_t lk=K+cs[c].pad,lv=V+cs[c].pad,lh=V+cs[c].padH;
    b.Q.resize(C*lk);b.Kd.resize(C*lk);b.KT.resize(K*(C+cs[c].pad));b.Vc.resize(C*lv);b.H.resize(K*lh);b.O.resize(C*lv);b.A.resize(C*(C+cs[c].pad));b.es.assign(K,0.99f);
    for(auto*v:{&b.Q,&b.Kd,&b.KT,&b.Vc,&b.H,&b.A}) for(auto&x:*v) x=u(r)*0.1f;}
  for(int smp=0;smp<40;smp++) for(size_t c=0;c<cs.size();c++){auto&b=B[c];index_t lk=K+cs[c].pad,lv=V+cs[c].pad,lh=V+cs[c].padH,la=C+cs[c].pad;
    double t0=tc(); for(int i=0;i<50;i++) gemm::product<gemm::set>(C,V,K,b.Q.data(),lk,1,b.H.data(),lh,b.O.data(),lv);
    double t1=tc(); for(int i=0;i<50;i++) gemm::product<gemm::set,gemm::c_lower>(C,C,K,b.Q.data(),lk,1,b.KT.data(),la,b.A.data(),la);
    double t2=tc(); for(int i=0;i<50;i++) gemm::product<gemm::add,gemm::a_lower>(C,V,C,b.A.data(),la,1,b.Vc.data(),lv,b.O.data(),lv);
    double t3=tc(); for(int i=0;i<50;i++) gemm::product<gemm::scale_add>(K,V,C,b.Kd.data(),1,lk,b.Vc.data(),lv,b.H.data(),lh,b.es.data());
    double t4=tc(); cs[c].s[0].push_back((t1-t0)/50e-6);cs[c].s[1].push_back((t2-t1)/50e-6);cs[c].s[2].push_back((t3-t2)/50e-6);cs[c].s[3].push_back((t4-t3)/50e-6);}
  for(auto&c:cs){printf("padH %2d pad %2d:",c.padH,c.pad); double sum=0; for(int k=0;k<4;k++){auto v=c.s[k];std::sort(v.begin(),v.end());printf(" %6.1f",v[v.size()/2]);sum+=v[v.size()/2];} printf("  sum %.1f us (QH, A, AV, Hupd medians)\n",sum);}
}
