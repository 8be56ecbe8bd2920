#include <linstate/backend/cpu/gemm.hpp>
#include <Eigen/Core>
#include <cstdio>
#include <vector>
#include <time.h>
using namespace linstate;
namespace G = linstate::cpu_detail::gemm;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
static double tcpu(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){
  const index_t C=64,K=128,V=128;
  RowMat Qg=RowMat::Random(C,K),EinvT=RowMat::Random(K,C),A=RowMat::Zero(C,C),Vc=RowMat::Random(C,V),O(C,V),Kd=RowMat::Random(C,K)*0.01f;
  std::vector<RowMat> Hs(8, RowMat::Random(K,V));
  RowMat eg=RowMat::Constant(1,K,0.99f);
  for(int nh: {1,8,1,8,1,8}){
    double t0=tcpu(); long n=0;
    do{ for(int h=0;h<nh;h++){ float* H=Hs[h].data();
      G::product<G::set>(C,V,K,Qg.data(),K,1,H,V,O.data(),V);
      G::product<G::set,G::c_lower>(C,C,K,Qg.data(),K,1,EinvT.data(),C,A.data(),C);
      G::product<G::add,G::a_lower>(C,V,C,A.data(),C,1,Vc.data(),V,O.data(),V);
      G::product<G::scale_add>(K,V,C,Kd.data(),1,K,Vc.data(),V,H,V,eg.data()); n++;} }while(tcpu()-t0<0.3);
    printf("heads %d: %.2f us per chunk-head\n", nh, (tcpu()-t0)/n*1e6);
  }
}
