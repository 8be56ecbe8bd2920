// docs/data/issue13/s15/fma_threads.cpp — 12 chains of 8-lane FMAs on one thread, then on two at once: whether the two vCPUs share
// a core (thread CPU time, best of 7 per thread; the absolute rate is this loop's, not the kernels' peak).
//   g++ -O2 -mavx2 -mfma -fopenmp docs/data/issue13/s15/fma_threads.cpp -o fma_threads
#include <immintrin.h>
#include <cstdio>
#include <omp.h>
#include <time.h>
static double tc(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){
  for(int nt=1;nt<=2;nt++){
    double g[2]={0,0};
    #pragma omp parallel num_threads(nt)
    {
      __m256 a0=_mm256_set1_ps(1),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0,a8=a0,a9=a0,a10=a0,a11=a0;
      const __m256 m=_mm256_set1_ps(0.999999f),c=_mm256_set1_ps(1e-7f);
      double best=0;
      for(int r=0;r<7;r++){
        double t0=tc();
        for(long i=0;i<20000000;i++){
          a0=_mm256_fmadd_ps(a0,m,c);a1=_mm256_fmadd_ps(a1,m,c);a2=_mm256_fmadd_ps(a2,m,c);a3=_mm256_fmadd_ps(a3,m,c);
          a4=_mm256_fmadd_ps(a4,m,c);a5=_mm256_fmadd_ps(a5,m,c);a6=_mm256_fmadd_ps(a6,m,c);a7=_mm256_fmadd_ps(a7,m,c);
          a8=_mm256_fmadd_ps(a8,m,c);a9=_mm256_fmadd_ps(a9,m,c);a10=_mm256_fmadd_ps(a10,m,c);a11=_mm256_fmadd_ps(a11,m,c);
        }
        double t=tc()-t0; double gf=20e6*12*16/t/1e9; if(gf>best)best=gf;
      }
      __m256 s=_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0,a1),_mm256_add_ps(a2,a3)),_mm256_add_ps(_mm256_add_ps(a4,a5),_mm256_add_ps(a6,a7)));
      s=_mm256_add_ps(s,_mm256_add_ps(_mm256_add_ps(a8,a9),_mm256_add_ps(a10,a11)));
      float o[8];_mm256_storeu_ps(o,s);
      g[omp_get_thread_num()]=best+o[0]*1e-30;
    }
    printf("threads %d: per-thread best GFLOP/s %.1f %.1f\n",nt,g[0],g[1]);
  }
}
