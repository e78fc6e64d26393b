/* Gemm and MatMul helpers around mg_sgemm for the migc CPU runtime (contracts in
 * mg_rt_nn.h). The code generator computes the broadcasting (strides, per-batch
 * offsets); these loops only apply it. */
#include "mg_runtime.h"

#include <stddef.h>
#include <string.h>

void mg_fill_broadcast2d(int M, int N, const float *c, int stride_m, int stride_n,
                         float beta, float *y) {
  int i, j;
  for (i = 0; i < M; i++) {
    const float *cr = c + (size_t)i * stride_m;
    float *yr = y + (size_t)i * N;
    if (stride_n == 1 && beta == 1.0f)
      memcpy(yr, cr, (size_t)N * sizeof(float));
    else if (stride_n == 1)
      for (j = 0; j < N; j++) yr[j] = beta * cr[j];
    else
      for (j = 0; j < N; j++) yr[j] = beta * cr[(size_t)j * stride_n];
  }
}

void mg_matmul_batched(int batch, int M, int N, int K, const float *A,
                       const int64_t *a_off, const float *B, const int64_t *b_off,
                       float *y, float *scratch) {
  int b;
  for (b = 0; b < batch; b++)
    mg_sgemm(M, N, K, 1.0f, A + a_off[b], K, 0, B + b_off[b], N, 0, 0.0f,
             y + (size_t)b * M * N, N, scratch);
}
