/* Single-core FP32 peak and mg_sgemm / mg_conv2d throughput.
 *
 * Build and run (one thread; pin it for steadier numbers):
 *   cc -O2 -mavx2 -mfma -Iruntime bench/sgemm_peak.c runtime/sgemm.c runtime/conv.c -lm \
 *      -o /tmp/sgemm_peak && taskset -c 1 /tmp/sgemm_peak
 * Without -mavx2 -mfma it measures the portable path (and the peak line is skipped).
 *
 * Peak: twelve independent chains of 256-bit FMAs, more than latency x throughput
 * (4 cycles x 2 pipes on current x86) needs, so the loop runs at the FMA issue
 * rate: 16 flops per FMA. Every figure is the median of 5 samples; a sample repeats
 * the call until it has run at least 50 ms of thread CPU time. GFLOP/s counts 2*M*N*K per product
 * (for a convolution, 2 * M * OH*OW * C/group*kh*kw per image). The machine should
 * be otherwise idle: check `uptime` before trusting the numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mg_runtime.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#define SAMPLES 5
#define MIN_SAMPLE_S 0.05

/* Seconds of this thread's CPU time: on a shared machine, time the scheduler gives
 * to other processes does not count (their cache and memory traffic still does).
 * Wall time is summed alongside; wall/cpu well above 1 means the run was shared. */
static double wall_total, cpu_total;
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* Brackets a sample: start returns both clocks, stop adds to the totals. */
static void sample_start(double *t) { t[0] = now(), t[1] = wall(); }
static double sample_stop(const double *t) {
  double c = now() - t[0];
  cpu_total += c;
  wall_total += wall() - t[1];
  return c;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

#if defined(__AVX2__) && defined(__FMA__)
/* Runs n iterations of 12 independent FMAs; returns a value so it is not removed. */
static float fma_loop(long n) {
  /* distinct starting values: equal chains would be merged into one by the compiler */
  __m256 a0 = _mm256_set1_ps(0.10f), a1 = _mm256_set1_ps(0.11f), a2 = _mm256_set1_ps(0.12f),
         a3 = _mm256_set1_ps(0.13f), a4 = _mm256_set1_ps(0.14f), a5 = _mm256_set1_ps(0.15f),
         a6 = _mm256_set1_ps(0.16f), a7 = _mm256_set1_ps(0.17f), a8 = _mm256_set1_ps(0.18f),
         a9 = _mm256_set1_ps(0.19f), a10 = _mm256_set1_ps(0.20f), a11 = _mm256_set1_ps(0.21f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  long i;
  float out[8];
  for (i = 0; i < n; i++) {
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c); a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c); a9 = _mm256_fmadd_ps(a9, m, c);
    a10 = _mm256_fmadd_ps(a10, m, c); a11 = _mm256_fmadd_ps(a11, m, c);
  }
  a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                     _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  a0 = _mm256_add_ps(a0, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  _mm256_storeu_ps(out, a0);
  return out[0];
}

static double peak_gflops(void) {
  double s[SAMPLES];
  int i;
  volatile float sink = 0;
  long n = 50000000L;
  for (i = 0; i < SAMPLES; i++) {
    double t[2];
    sample_start(t);
    sink += fma_loop(n);
    s[i] = (double)n * 12 * 16 / sample_stop(t) * 1e-9;
  }
  (void)sink;
  return median(s, SAMPLES);
}
#endif

static float *rnd_array(size_t n) {
  float *a = malloc(n * sizeof(float));
  size_t i;
  unsigned s = 12345;
  if (!a) { perror("malloc"); exit(1); }
  for (i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    a[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  return a;
}

/* Median GFLOP/s of C = A*B (M x K times K x N, no transposes, beta = 0). */
static double sgemm_gflops(int M, int N, int K) {
  float *A = rnd_array((size_t)M * K), *B = rnd_array((size_t)K * N);
  float *C = rnd_array((size_t)M * N), *S = rnd_array(mg_sgemm_scratch(M, N, K) + 1);
  double s[SAMPLES];
  int i;
  mg_sgemm(M, N, K, 1.0f, A, K, 0, B, N, 0, 0.0f, C, N, S); /* warm up */
  for (i = 0; i < SAMPLES; i++) {
    long reps = 0;
    double t0[2];
    sample_start(t0);
    do {
      mg_sgemm(M, N, K, 1.0f, A, K, 0, B, N, 0, 0.0f, C, N, S);
      reps++;
    } while (now() - t0[0] < MIN_SAMPLE_S);
    s[i] = 2.0 * M * N * K * reps / sample_stop(t0) * 1e-9;
  }
  free(A), free(B), free(C), free(S);
  return median(s, SAMPLES);
}

/* Median GFLOP/s of one convolution layer (batch 1, with bias and relu). */
static double conv_gflops(int C, int H, int M, int k, int stride, int group) {
  mg_conv2d_params p;
  float *x, *w, *b, *y, *S;
  double s[SAMPLES], flops;
  int i;
  memset(&p, 0, sizeof p);
  p.N = 1, p.C = C, p.H = p.W = H, p.M = M, p.kh = p.kw = k, p.group = group;
  p.stride_h = p.stride_w = stride, p.dil_h = p.dil_w = 1;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = k / 2;
  p.OH = mg_conv_out_dim(H, k, stride, 1, k / 2, k / 2);
  p.OW = p.OH;
  p.act = MG_ACT_RELU;
  x = rnd_array((size_t)C * H * H), w = rnd_array((size_t)M * (C / group) * k * k);
  b = rnd_array((size_t)M), y = rnd_array((size_t)M * p.OH * p.OW);
  S = rnd_array(mg_conv2d_scratch(&p) + 1);
  flops = 2.0 * M * p.OH * p.OW * (C / group) * k * k;
  mg_conv2d(&p, x, w, b, y, S);
  for (i = 0; i < SAMPLES; i++) {
    long reps = 0;
    double t0[2];
    sample_start(t0);
    do {
      mg_conv2d(&p, x, w, b, y, S);
      reps++;
    } while (now() - t0[0] < MIN_SAMPLE_S);
    s[i] = flops * reps / sample_stop(t0) * 1e-9;
  }
  free(x), free(w), free(b), free(y), free(S);
  return median(s, SAMPLES);
}

int main(int argc, char **argv) {
  static const int sq[] = {256, 512, 1024};
  /* resnet50 convolutions as GEMMs: M = output channels, N = output pixels,
   * K = input channels * kernel area */
  static const int rn[][3] = {
      {64, 3136, 576},   /* layer1 3x3 */
      {256, 3136, 64},   /* layer1 1x1 expand */
      {128, 784, 1152},  /* layer2 3x3 */
      {512, 784, 128},   /* layer2 1x1 expand */
      {256, 196, 2304},  /* layer3 3x3 */
      {1024, 196, 256},  /* layer3 1x1 expand */
      {512, 49, 4608},   /* layer4 3x3 */
      {2048, 49, 512},   /* layer4 1x1 expand */
  };
  static const int cv[][5] = { /* C, H, M, k, stride (group 1) */
      {3, 224, 64, 7, 2}, {64, 56, 64, 3, 1}, {128, 28, 128, 3, 1},
      {256, 14, 256, 3, 1}, {512, 7, 512, 3, 1}, {256, 56, 64, 1, 1}};
  double peak = 0, g;
  size_t i;
  (void)argv;
  printf("path: %s\n", mg_runtime_path());
#if defined(__AVX2__) && defined(__FMA__)
  peak = peak_gflops();
  printf("peak (12 chains of 256-bit FMA): %.1f GFLOP/s\n", peak);
#endif
  printf("%-28s %9s %8s\n", "sgemm M x N x K", "GFLOP/s", "of peak");
  for (i = 0; i < sizeof sq / sizeof sq[0]; i++) {
    g = sgemm_gflops(sq[i], sq[i], sq[i]);
    printf("%5d x %5d x %5d          %9.1f %7.0f%%\n", sq[i], sq[i], sq[i], g,
           peak > 0 ? 100 * g / peak : 0);
  }
  for (i = 0; i < sizeof rn / sizeof rn[0]; i++) {
    g = sgemm_gflops(rn[i][0], rn[i][1], rn[i][2]);
    printf("%5d x %5d x %5d          %9.1f %7.0f%%\n", rn[i][0], rn[i][1], rn[i][2], g,
           peak > 0 ? 100 * g / peak : 0);
  }
  if (argc > 1) { /* any argument: sgemm only */
    printf("wall/cpu time %.2f\n", wall_total / cpu_total);
    return 0;
  }
  printf("%-28s %9s %8s\n", "conv2d C,HxW -> M, k, s", "GFLOP/s", "of peak");
  for (i = 0; i < sizeof cv / sizeof cv[0]; i++) {
    g = conv_gflops(cv[i][0], cv[i][1], cv[i][2], cv[i][3], cv[i][4], 1);
    printf("%4d,%3dx%-3d -> %4d, %dx%d, s%d %9.1f %7.0f%%\n", cv[i][0], cv[i][1], cv[i][1],
           cv[i][2], cv[i][3], cv[i][3], cv[i][4], g, peak > 0 ? 100 * g / peak : 0);
  }
  g = conv_gflops(144, 56, 144, 3, 1, 144);
  printf("depthwise 144,56x56 3x3 s1  %9.1f\n", g);
  g = conv_gflops(144, 56, 144, 3, 2, 144);
  printf("depthwise 144,56x56 3x3 s2  %9.1f\n", g);
  printf("wall/cpu time %.2f (1.00: the core was ours alone)\n", wall_total / cpu_total);
  return 0;
}
