/* VJPs of MatMul (batched, broadcasting, 1-D operands) and Gemm, through the
 * interpreter's double GEMM: gA = gY B^T and gB = A^T gY per matrix. */
#include "vjp.h"
#include "interp_nn.h"
#include <string.h>

/* The transpose of the rows x cols matrix src, as a new array (NULL after a
 * diagnostic). */
static double *transposed(const vjp_args *a, const double *src, int64_t rows, int64_t cols);

/* dst[cols x rows] = the transpose of src[rows x cols], in 32x32 tiles so that
 * neither side strides through memory a cache line per element. */
static void transpose_into(double *dst, const double *src, int64_t rows, int64_t cols) {
  for (int64_t i0 = 0; i0 < rows; i0 += 32)
    for (int64_t j0 = 0; j0 < cols; j0 += 32) {
      int64_t i1 = i0 + 32 < rows ? i0 + 32 : rows, j1 = j0 + 32 < cols ? j0 + 32 : cols;
      for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) dst[j * rows + i] = src[i * cols + j];
    }
}

static double *transposed(const vjp_args *a, const double *src, int64_t rows, int64_t cols) {
  double *t = vjp_zeros(a, rows * cols);
  if (t) transpose_into(t, src, rows, cols);
  return t;
}

static int gemm_oom(const vjp_args *a) {
  mg_error(a->d, OOM, a->n->name, a->n->op_type, "out of memory");
  return -1;
}

static int matmul(const vjp_args *a) {
  if (!a->gy[0] || (!a->gx[0] && !a->gx[1])) return 0;
  const mg_array *A = a->x[0], *B = a->x[1];
  if (A->rank < 1 || B->rank < 1) return vjp_fail(a, "operands must have rank >= 1");
  int64_t M = A->rank == 1 ? 1 : A->dims[A->rank - 2], K = A->dims[A->rank - 1];
  int64_t N = B->rank == 1 ? 1 : B->dims[B->rank - 1];
  /* batch dims of A, B and their broadcast */
  mg_array ab = {.rank = A->rank > 2 ? A->rank - 2 : 0}, bb = {.rank = B->rank > 2 ? B->rank - 2 : 0};
  memcpy(ab.dims, A->dims, sizeof(int64_t) * (size_t)ab.rank);
  memcpy(bb.dims, B->dims, sizeof(int64_t) * (size_t)bb.rank);
  const mg_array *both[2] = {&ab, &bb};
  int yr;
  int64_t yb[MG_ARRAY_MAX_RANK], sa[MG_ARRAY_MAX_RANK], sb[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0};
  if (it_broadcast(both, 2, &yr, yb)) return vjp_fail(a, "batch dims do not broadcast");
  it_bcast_strides(&ab, yr, yb, sa);
  it_bcast_strides(&bb, yr, yb, sb);
  int64_t nb = 1, na = 1, nbb = 1;
  for (int d = 0; d < yr; d++) nb *= yb[d];
  for (int d = 0; d < ab.rank; d++) na *= ab.dims[d];
  for (int d = 0; d < bb.rank; d++) nbb *= bb.dims[d];
  if (nbb == 1 && na == nb && nb > 1) { /* one B for every batch: stack A's rows into one product */
    M *= nb;
    nb = 1, yr = 0;
  }
  double *av = vjp_f64(a, A), *bv = av ? vjp_f64(a, B) : NULL;
  double *at = bv ? vjp_zeros(a, K * M) : NULL, *bt = at ? vjp_zeros(a, N * K) : NULL;
  int rc = bt ? 0 : -1;
  int64_t oa = 0, ob = 0, at_of = -1, bt_of = -1; /* which batch at/bt hold */
  for (int64_t i = 0; i < nb && !rc; i++) {
    const double *Ai = av + oa * M * K, *Bi = bv + ob * K * N, *G = a->gy[0] + i * M * N;
    if (a->gx[0]) { /* gA[M,K] += G[M,N] B^T[N,K] */
      if (bt_of != ob) transpose_into(bt, Bi, K, N), bt_of = ob;
      if (nn_gemm(M, K, N, G, N, bt, K, a->gx[0] + oa * M * K, K)) rc = gemm_oom(a);
    }
    if (a->gx[1] && !rc) { /* gB[K,N] += A^T[K,M] G[M,N] */
      if (at_of != oa) transpose_into(at, Ai, M, K), at_of = oa;
      if (nn_gemm(K, N, M, at, M, G, N, a->gx[1] + ob * K * N, N)) rc = gemm_oom(a);
    }
    for (int d = yr - 1; d >= 0; d--) {
      coord[d]++, oa += sa[d], ob += sb[d];
      if (coord[d] < yb[d]) break;
      oa -= sa[d] * yb[d], ob -= sb[d] * yb[d], coord[d] = 0;
    }
  }
  mg_free(av), mg_free(bv), mg_free(at), mg_free(bt);
  return rc;
}

/* Gemm: Y = alpha op(A) op(B) + beta C, op a transpose when transA/transB. */
static int gemm(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  const mg_array *A = a->x[0], *B = a->x[1], *C = a->n->n_in > 2 ? a->x[2] : NULL;
  if (A->rank != 2 || B->rank != 2) return vjp_fail(a, "A and B must be 2-D");
  int ta = (int)mg_attr_int(a->n, "transA", 0), tb = (int)mg_attr_int(a->n, "transB", 0);
  double alpha = mg_attr_float(a->n, "alpha", 1.0f), beta = mg_attr_float(a->n, "beta", 1.0f);
  int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
  int64_t N = tb ? B->dims[0] : B->dims[1];
  const double *G = a->gy[0];
  int rc = 0;
  double *gs = NULL, *av = NULL, *bv = NULL, *op = NULL, *res = NULL;
  if (alpha != 1) { /* fold alpha into a scaled copy of the cotangent */
    if (!(gs = vjp_zeros(a, M * N))) return -1;
    for (int64_t i = 0; i < M * N; i++) gs[i] = G[i] * alpha;
    G = gs;
  }
  if (a->gx[0]) { /* g op(A) [M,K] = G op(B)^T; op(B)^T is B itself when transB */
    if (!(bv = vjp_f64(a, B))) rc = -1;
    if (!rc && !tb && !(op = transposed(a, bv, K, N))) rc = -1;
    if (!rc && !(res = vjp_zeros(a, M * K))) rc = -1;
    if (!rc && nn_gemm(M, K, N, G, N, tb ? bv : op, K, res, K)) rc = gemm_oom(a);
    for (int64_t i = 0; !rc && i < M; i++)
      for (int64_t p = 0; p < K; p++) a->gx[0][ta ? p * M + i : i * K + p] += res[i * K + p];
    mg_free(op), mg_free(res);
    op = res = NULL;
  }
  if (a->gx[1] && !rc) { /* g op(B) [K,N] = op(A)^T G; op(A)^T is A itself when transA */
    if (!(av = vjp_f64(a, A))) rc = -1;
    if (!rc && !ta && !(op = transposed(a, av, M, K))) rc = -1;
    if (!rc && !(res = vjp_zeros(a, K * N))) rc = -1;
    if (!rc && nn_gemm(K, N, M, ta ? av : op, M, G, N, res, N)) rc = gemm_oom(a);
    for (int64_t p = 0; !rc && p < K; p++)
      for (int64_t j = 0; j < N; j++) a->gx[1][tb ? j * K + p : p * N + j] += res[p * N + j];
  }
  if (C && a->gx[2] && !rc) {
    double *gc = vjp_zeros(a, M * N);
    if (!gc) rc = -1;
    for (int64_t i = 0; !rc && i < M * N; i++) gc[i] = a->gy[0][i] * beta;
    mg_array yshape = {.rank = 2, .dims = {M, N}};
    if (!rc) vjp_unbroadcast_add(a->gx[2], C, gc, &yshape);
    mg_free(gc);
  }
  mg_free(gs), mg_free(av), mg_free(bv), mg_free(op), mg_free(res);
  return rc;
}

/* The linalg family's entry point (vjp.h). */
int vjp_linalg(const vjp_args *a) {
  return a->n->op == MG_OP_MatMul ? matmul(a) : gemm(a);
}
