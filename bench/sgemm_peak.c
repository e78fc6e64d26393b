/* Single-core FP32 peak and mg_sgemm / mg_conv2d throughput.
 *
 * Build and run (one thread; pin it for steadier numbers):
 *   cc -O3 -march=native -Iruntime bench/sgemm_peak.c runtime/sgemm.c runtime/conv.c runtime/common.c -lm \
 *      -o /tmp/sgemm_peak && taskset -c 1 /tmp/sgemm_peak [all|sgemm|resnet50]
 * (resnet50: the peak, 512^3 and every resnet50 convolution with prepared weights;
 * bench/run.sh runs that). Without -mavx2 -mfma it measures the portable path (and
 * the peak line is skipped).
 *
 * Peak: twelve independent chains of FMAs, more than latency x throughput (4
 * cycles x 2 pipes on current x86) needs, so the loop runs at the FMA issue rate:
 * 256-bit (16 flops per FMA) and, where AVX-512F is compiled in, 512-bit (32); the
 * widest is the one the figures are shares of, since the micro-kernel then uses
 * it. Every figure is the median of 5 samples; a sample repeats the call until it
 * has run at least 50 ms of thread CPU time. GFLOP/s counts 2*M*N*K per product
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
/* fma_loop_W(n): n iterations of 12 independent FMAs on W-bit vectors; returns a
 * value so the loop is not removed. Distinct starting values: equal chains would
 * be merged into one by the compiler. */
#define FMA_LOOP(name, V, set1, fmadd, add, store, lanes)                                        \
  static float name(long n) {                                                                    \
    V a[12];                                                                                     \
    const V m = set1(0.999999f), c = set1(1e-6f);                                                \
    float out[lanes];                                                                            \
    long i;                                                                                      \
    int j;                                                                                       \
    for (j = 0; j < 12; j++) a[j] = set1(0.10f + 0.01f * (float)j);                              \
    for (i = 0; i < n; i++) {                                                                    \
      a[0] = fmadd(a[0], m, c); a[1] = fmadd(a[1], m, c); a[2] = fmadd(a[2], m, c);              \
      a[3] = fmadd(a[3], m, c); a[4] = fmadd(a[4], m, c); a[5] = fmadd(a[5], m, c);              \
      a[6] = fmadd(a[6], m, c); a[7] = fmadd(a[7], m, c); a[8] = fmadd(a[8], m, c);              \
      a[9] = fmadd(a[9], m, c); a[10] = fmadd(a[10], m, c); a[11] = fmadd(a[11], m, c);          \
    }                                                                                            \
    for (j = 1; j < 12; j++) a[0] = add(a[0], a[j]);                                             \
    store(out, a[0]);                                                                            \
    return out[0];                                                                               \
  }
FMA_LOOP(fma_loop_256, __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps, 8)
#if defined(__AVX512F__)
FMA_LOOP(fma_loop_512, __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps, 16)
#endif

/* Median GFLOP/s of loop, whose FMAs are `lanes` floats wide (2 flops a lane). */
static double peak_gflops(float (*loop)(long), int lanes) {
  double s[SAMPLES];
  int i;
  volatile float sink = 0;
  long n = 50000000L;
  for (i = 0; i < SAMPLES; i++) {
    double t[2];
    sample_start(t);
    sink += loop(n);
    s[i] = (double)n * 12 * 2 * lanes / sample_stop(t) * 1e-9;
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

/* Median GFLOP/s of one convolution layer (batch 1, with bias and relu), FLOPs
 * counted as the direct product (2 * M * OH*OW * C/group*kh*kw), whatever the
 * kernel. prepared: its weights laid out at "conversion" as migc's generated code
 * has them (mg_conv2d_prep_kind, this runtime's MR). *kernel: the path it took. */
static double conv_gflops(int C, int H, int M, int k, int stride, int group, int prepared,
                          mg_conv_kernel *kernel) {
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
  if (prepared && (p.prepared = (int)mg_conv2d_prep_kind(&p)) != MG_CONV_PREP_NONE) {
    float *wp;
    p.prepared_mr = mg_sgemm_mr(); /* before the size: it depends on the panel height */
    wp = rnd_array(mg_conv2d_prepared_floats(&p) + 1);
    mg_conv2d_prepare(&p, w, wp);
    free(w);
    w = wp;
  }
  if (kernel) *kernel = mg_conv2d_kernel(&p);
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

/* Every convolution of torchvision's resnet50 (v1.5: the stride on the 3x3), as
 * the generated code runs it: prepared weights, bias + ReLU fused. Prints each
 * distinct layer (count, path, GFLOP/s, share of peak; W marks Winograd, counted
 * at its direct FLOPs) and the median share over all 53 layers. */
static void resnet50_layers(double peak) {
  static const int L[][6] = { /* C, H, M, k, stride, how many */
      {3, 224, 64, 7, 2, 1},
      {64, 56, 64, 1, 1, 1},     {256, 56, 64, 1, 1, 2},   {64, 56, 64, 3, 1, 3},
      {64, 56, 256, 1, 1, 4}, /* 3 expands + the downsample */
      {256, 56, 128, 1, 1, 1},   {128, 56, 128, 3, 2, 1},  {256, 56, 512, 1, 2, 1},
      {128, 28, 512, 1, 1, 4},   {512, 28, 128, 1, 1, 3},  {128, 28, 128, 3, 1, 3},
      {512, 28, 256, 1, 1, 1},   {256, 28, 256, 3, 2, 1},  {512, 28, 1024, 1, 2, 1},
      {256, 14, 1024, 1, 1, 6},  {1024, 14, 256, 1, 1, 5}, {256, 14, 256, 3, 1, 5},
      {1024, 14, 512, 1, 1, 1},  {512, 14, 512, 3, 2, 1},  {1024, 14, 2048, 1, 2, 1},
      {512, 7, 2048, 1, 1, 3},   {2048, 7, 512, 1, 1, 2},  {512, 7, 512, 3, 1, 2}};
  static const char *const path[] = {"depthwise", "W", "pointwise", "im2col"};
  double share[64];
  int n = 0;
  size_t i;
  printf("%-30s %5s %-9s %9s %8s\n", "resnet50 conv C,HxW -> M, k, s", "count", "path", "GFLOP/s",
         "of peak");
  for (i = 0; i < sizeof L / sizeof L[0]; i++) {
    mg_conv_kernel kind;
    double g = conv_gflops(L[i][0], L[i][1], L[i][2], L[i][3], L[i][4], 1, 1, &kind);
    int r;
    printf("%4d,%3dx%-3d -> %4d, %dx%d, s%d  %5d %-9s %9.1f %7.0f%%\n", L[i][0], L[i][1], L[i][1],
           L[i][2], L[i][3], L[i][3], L[i][4], L[i][5], path[kind], g, peak > 0 ? 100 * g / peak : 0);
    for (r = 0; r < L[i][5] && n < 64; r++) share[n++] = peak > 0 ? 100 * g / peak : 0;
  }
  printf("median over the %d layers: %.0f%% of peak\n", n, median(share, n));
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
  const char *mode = argc > 1 ? argv[1] : "all";
  double peak = 0, g;
  size_t i;
  if (strcmp(mode, "all") && strcmp(mode, "sgemm") && strcmp(mode, "resnet50")) {
    fprintf(stderr, "usage: sgemm_peak [all|sgemm|resnet50]\n");
    return 2;
  }
  printf("path: %s\n", mg_runtime_path());
#if defined(__AVX2__) && defined(__FMA__)
  peak = peak_gflops(fma_loop_256, 8);
  printf("peak (12 chains of 256-bit FMA): %.1f GFLOP/s\n", peak);
#if defined(__AVX512F__)
  /* the micro-kernel is 512 bits wide here, so this is the peak it is held to */
  peak = peak_gflops(fma_loop_512, 16);
  printf("peak (12 chains of 512-bit FMA): %.1f GFLOP/s\n", peak);
#endif
#endif
  printf("%-28s %9s %8s\n", "sgemm M x N x K", "GFLOP/s", "of peak");
  for (i = 0; i < sizeof sq / sizeof sq[0]; i++) {
    if (!strcmp(mode, "resnet50") && sq[i] != 512) continue;
    g = sgemm_gflops(sq[i], sq[i], sq[i]);
    printf("%5d x %5d x %5d          %9.1f %7.0f%%\n", sq[i], sq[i], sq[i], g,
           peak > 0 ? 100 * g / peak : 0);
  }
  if (!strcmp(mode, "resnet50")) {
    resnet50_layers(peak);
    printf("wall/cpu time %.2f (1.00: the core was ours alone)\n", wall_total / cpu_total);
    return 0;
  }
  for (i = 0; i < sizeof rn / sizeof rn[0]; i++) {
    g = sgemm_gflops(rn[i][0], rn[i][1], rn[i][2]);
    printf("%5d x %5d x %5d          %9.1f %7.0f%%\n", rn[i][0], rn[i][1], rn[i][2], g,
           peak > 0 ? 100 * g / peak : 0);
  }
  if (!strcmp(mode, "sgemm")) {
    printf("wall/cpu time %.2f\n", wall_total / cpu_total);
    return 0;
  }
  printf("%-28s %9s %8s\n", "conv2d C,HxW -> M, k, s", "GFLOP/s", "of peak");
  for (i = 0; i < sizeof cv / sizeof cv[0]; i++) {
    g = conv_gflops(cv[i][0], cv[i][1], cv[i][2], cv[i][3], cv[i][4], 1, 0, NULL);
    printf("%4d,%3dx%-3d -> %4d, %dx%d, s%d %9.1f %7.0f%%\n", cv[i][0], cv[i][1], cv[i][1],
           cv[i][2], cv[i][3], cv[i][3], cv[i][4], g, peak > 0 ? 100 * g / peak : 0);
  }
  g = conv_gflops(144, 56, 144, 3, 1, 144, 0, NULL);
  printf("depthwise 144,56x56 3x3 s1  %9.1f\n", g);
  g = conv_gflops(144, 56, 144, 3, 2, 144, 0, NULL);
  printf("depthwise 144,56x56 3x3 s2  %9.1f\n", g);
  printf("wall/cpu time %.2f (1.00: the core was ours alone)\n", wall_total / cpu_total);
  return 0;
}
