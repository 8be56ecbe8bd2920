#include <linstate/backend/cpu/gemm.hpp>
#include <Eigen/Core>
#include <cstdio>
#include <functional>
#include <time.h>
using namespace linstate;
namespace G = linstate::cpu_detail::gemm;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
static double tcpu(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){
  const index_t C=64,K=128,V=128;
  RowMat Qg=RowMat::Random(C,K),H=RowMat::Random(K,V)*0.001f,EinvT=RowMat::Random(K,C),A=RowMat::Zero(C,C),Vc=RowMat::Random(C,V),O(C,V),Kd=RowMat::Random(C,K);
  std::function<void()> f[4]={
    [&]{G::product<G::set>(C,V,K,Qg.data(),K,1,H.data(),V,O.data(),V);},
    [&]{G::product<G::set,G::c_lower>(C,C,K,Qg.data(),K,1,EinvT.data(),C,A.data(),C);},
    [&]{G::product<G::add,G::a_lower>(C,V,C,A.data(),C,1,Vc.data(),V,O.data(),V);},
    [&]{G::product<G::add>(K,V,C,Kd.data(),1,K,Vc.data(),V,H.data(),V);}};
  const char* nm[4]={"O=QgH","A=QgEt","O+=AV","H+=KdtV"};
  double fma[4]={1.0*C*V*K,1.0*C*C*K,1.0*C*V*C,1.0*K*V*C};
  for(int r=0;r<3;r++) for(int i=0;i<4;i++){
    double t0=tcpu();int n=0; do{f[i]();n++;}while(tcpu()-t0<0.1);
    double t=(tcpu()-t0)/n; printf("%-8s %6.2f us  %.1f GFLOP/s nominal\n",nm[i],t*1e6,2*fma[i]/t/1e9);
  }
}
