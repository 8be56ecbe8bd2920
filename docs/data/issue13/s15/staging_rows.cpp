// docs/data/issue13/s15/staging_rows.cpp — the staging loop's memory access alone: 4 tensors [T = 4096, H = 8, 128] fp32, per chunk of
// 64 tokens and per head (the lockstep order), each row copied into a chunk buffer; argument: threads (heads split
// as the driver splits them). Best of 8 calls, process CPU; the second and third figures are variants (a prefetch of
// the next head's rows, a token-major touch of the chunk first) run on one thread only.
//   g++ -O3 -march=native -fopenmp docs/data/issue13/s15/staging_rows.cpp -o staging_rows
// staging access pattern: 4 tensors [T,H,128] fp32; per chunk of 64 tokens, per head (lockstep), copy rows
#include <vector>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <time.h>
#include <immintrin.h>
#include <omp.h>
#include <cstdlib>
static int NT=1;
static double tc(){timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){
  const long T=4096,H=8,K=128,C=64; NT=argc>1?atoi(argv[1]):1;
  std::vector<float> q(T*H*K),k(T*H*K),v(T*H*K),g(T*H*K),o(T*H*K);
  for(auto*x:{&q,&k,&v,&g}) for(size_t i=0;i<x->size();i++) (*x)[i]=i*1e-9f;
  std::vector<float> sq(C*144),sk(C*144),sv(C*144),sg(C*144);
  std::vector<float> big(64<<20); // flush
  double best[4]={1e9,1e9,1e9,1e9};
  for(int rep=0;rep<8;rep++) for(int md=0;md<3;md++){
    for(size_t i=0;i<big.size();i+=16) big[i]+=1;
    double t0=tc(); float acc=0;
    if(md==0){
    #pragma omp parallel num_threads(NT) reduction(+:acc)
    { std::vector<float> sq(C*144),sk(C*144),sv(C*144),sg(C*144); int tid=omp_get_thread_num(); long h0=H*tid/NT,h1=H*(tid+1)/NT;
    for(long c0=0;c0<T;c0+=C){
        for(long h=h0;h<h1;h++){ for(long i=0;i<C;i++){ long t=c0+i; const float*a=&q[(t*H+h)*K],*b=&k[(t*H+h)*K],*cc=&v[(t*H+h)*K],*d=&g[(t*H+h)*K];
          for(int j=0;j<K;j++){sq[i*144+j]=a[j]*0.5f;sk[i*144+j]=b[j]*1.f;sv[i*144+j]=cc[j];sg[i*144+j]=d[j];} }
          acc+=sq[5]+sk[7]+sv[9]+sg[3]; }
    }}} else for(long c0=0;c0<T;c0+=C){
      if(md==1){ // same, but prefetch next head's rows during this head
        for(long h=0;h<H;h++){ for(long i=0;i<C;i++){ long t=c0+i; const float*a=&q[(t*H+h)*K],*b=&k[(t*H+h)*K],*cc=&v[(t*H+h)*K],*d=&g[(t*H+h)*K];
          if(h+1<H) for(int l=0;l<512;l+=64){_mm_prefetch((const char*)(a+K)+l,_MM_HINT_T1);_mm_prefetch((const char*)(b+K)+l,_MM_HINT_T1);_mm_prefetch((const char*)(cc+K)+l,_MM_HINT_T1);_mm_prefetch((const char*)(d+K)+l,_MM_HINT_T1);}
          for(int j=0;j<K;j++){sq[i*144+j]=a[j]*0.5f;sk[i*144+j]=b[j]*1.f;sv[i*144+j]=cc[j];sg[i*144+j]=d[j];} }
          acc+=sq[5]+sk[7]+sv[9]+sg[3]; }
      } else { // token-major: touch all heads' rows of the chunk first (sum), then per head copy
        for(long i=0;i<C;i++){ long t=c0+i; for(const float* base:{&q[t*H*K],&k[t*H*K],&v[t*H*K],&g[t*H*K]}) for(int l=0;l<H*K;l+=16) acc+=base[l]; }
        for(long h=0;h<H;h++){ for(long i=0;i<C;i++){ long t=c0+i; const float*a=&q[(t*H+h)*K],*b=&k[(t*H+h)*K],*cc=&v[(t*H+h)*K],*d=&g[(t*H+h)*K];
          for(int j=0;j<K;j++){sq[i*144+j]=a[j]*0.5f;sk[i*144+j]=b[j]*1.f;sv[i*144+j]=cc[j];sg[i*144+j]=d[j];} }
          acc+=sq[5]+sk[7]+sv[9]+sg[3]; }
      }
    }
    double t=tc()-t0; best[md]=std::min(best[md],t); if(acc==1.2345f)printf("x");
  }
  printf("per call (64 MiB of rows): lockstep %.2f ms, +prefetch next head %.2f ms, token-major touch then copy %.2f ms\n",best[0]*1e3,best[1]*1e3,best[2]*1e3);
}
