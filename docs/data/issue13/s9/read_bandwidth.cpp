#include <vector>
#include <cstdio>
#include <time.h>
#include <immintrin.h>
static double tcpu(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){
  const long n=64l<<20>>2; std::vector<float> a(n,1.f), b(n);
  for(int r=0;r<5;r++){
    double t0=tcpu(); __m256 s=_mm256_setzero_ps();
    for(long i=0;i<n;i+=8) s=_mm256_add_ps(s,_mm256_loadu_ps(&a[i]));
    double t=tcpu()-t0; float x[8]; _mm256_storeu_ps(x,s);
    double t1=tcpu(); for(long i=0;i<n;i++) b[i]=a[i]*2.f; double tc=tcpu()-t1;
    printf("read 64MB: %.2f ms (%.1f GB/s)  scale-copy: %.2f ms (%.1f GB/s r+w) %g\n",t*1e3,64*1.048576/t/1e3,tc*1e3,128*1.048576/tc/1e3,x[0]);
  }
}
