/* C emitters of Gemm and MatMul (runtime/sgemm.c, runtime/matmul.c; contract in
 * codegen/cg.h). Float32 only. Broadcasting is resolved here: Gemm's C becomes
 * two strides, MatMul's batch broadcasting becomes per-batch offsets, and a MatMul
 * whose B is one matrix folds A's batch dims into M for a single SGEMM call. */
#include "c_nn_util.h"

#include <stdlib.h>
#include <string.h>

/* The fused activation (if any) over y's `count` floats. */
static void emit_act(cg_ctx *c, const mg_node *n, const mg_value *y, int64_t count) {
  cg_act act;
  char fa[40], fb[40];
  cg_fused_act(c, n, &act);
  if (!strcmp(act.act, "MG_ACT_NONE")) return;
  cg_line(c, "mg_bias_act(%s, 1, %lld, %lld, NULL, %s, %s, %s);", cg_out(c, y), (long long)count,
          (long long)count, act.act, nn_flit(fa, act.a), nn_flit(fb, act.b));
}

/* The product y = A * B (+ y when accumulate) with B read prepared from wp (pnr
 * columns a panel): mg_sgemm_prepb. */
static void emit_prepb(cg_ctx *c, const mg_node *n, const char *wp, int pnr, int accumulate) {
  int64_t M, N, K;
  int tB;
  cg_gemm_prep_shape(c, n, &M, &N, &K, &tB);
  cg_kernel(c, 1, "mg_sgemm_prepb", "%lld, %lld, %lld, %s, %lld, %s, %d, %s, %s, %lld, %s", (long long)M,
          (long long)N, (long long)K, cg_in(c, n->in[0]), (long long)K, wp, pnr,
          accumulate ? "1.0f" : "0.0f", cg_out(c, n->out[0]), (long long)N,
          cg_scratch(c, "mg_sgemm_packed_scratch(%lld, %lld, %lld)", (long long)M, (long long)N,
                     (long long)K));
}

int cg_emit_Gemm(cg_ctx *c, const mg_node *n) {
  const mg_value *A = n->in[0], *B = n->in[1], *C = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  int64_t ad[MG_MAX_RANK], bd[MG_MAX_RANK], cd[MG_MAX_RANK], yd[MG_MAX_RANK];
  const int tA = mg_attr_int(n, "transA", 0) != 0, tB = mg_attr_int(n, "transB", 0) != 0;
  const float alpha = mg_attr_float(n, "alpha", 1.0f), beta = mg_attr_float(n, "beta", 1.0f);
  int64_t M, N, K, sm = 0, sn = 0;
  char fa[40], fb[40];
  if (!nn_is_f32(A) || !nn_is_f32(B) || !nn_is_f32(y) || (C && !nn_is_f32(C)))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(A->dtype));
  if (cg_dims(A, ad) != 2 || cg_dims(B, bd) != 2) return cg_unsupported(c, n, "A and B must be 2-D");
  M = tA ? ad[1] : ad[0], K = tA ? ad[0] : ad[1];
  N = tB ? bd[0] : bd[1];
  if ((tB ? bd[1] : bd[0]) != K) return cg_unsupported(c, n, "inner dimensions differ");
  if (cg_dims(y, yd) != 2 || yd[0] != M || yd[1] != N)
    return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(A)) || !nn_fits_int(cg_numel(B)) || !nn_fits_int(cg_numel(y)))
    return cg_unsupported(c, n, "tensor too large");
  if (C) {
    int cr = cg_dims(C, cd);
    /* C broadcasts to M x N (unidirectional): its own strides, 0 where it is 1 */
    if (cr > 2) return cg_unsupported(c, n, "C has rank %d", cr);
    if (cr == 2) {
      if ((cd[0] != 1 && cd[0] != M) || (cd[1] != 1 && cd[1] != N))
        return cg_unsupported(c, n, "C does not broadcast to M x N");
      sm = cd[0] == 1 ? 0 : cd[1];
      sn = cd[1] == 1 ? 0 : 1;
    } else if (cr == 1) {
      if (cd[0] != 1 && cd[0] != N) return cg_unsupported(c, n, "C does not broadcast to M x N");
      sn = cd[0] == 1 ? 0 : 1;
    }
  }
  nn_need(c, "matmul.c");
  if (C)
    cg_line(c, "mg_fill_broadcast2d(%lld, %lld, %s, %lld, %lld, %s, %s);", (long long)M,
            (long long)N, cg_in(c, C), (long long)sm, (long long)sn, nn_flit(fb, beta),
            cg_out(c, y));
  {
    int kind, pnr;
    const char *wp = cg_prepared(c, n, &kind, &pnr);
    if (wp)
      emit_prepb(c, n, wp, pnr, C != NULL);
    else
      cg_kernel(c, 1, "mg_sgemm", "%lld, %lld, %lld, %s, %s, %lld, %d, %s, %lld, %d, %s, %s, %lld, %s",
              (long long)M, (long long)N, (long long)K, nn_flit(fa, alpha), cg_in(c, A),
              (long long)ad[1], tA, cg_in(c, B), (long long)bd[1], tB, C ? "1.0f" : "0.0f",
              cg_out(c, y), (long long)N,
              cg_scratch(c, "mg_sgemm_scratch(%lld, %lld, %lld)", (long long)M, (long long)N,
                         (long long)K));
  }
  emit_act(c, n, y, M * N);
  return 0;
}

int cg_emit_MatMul(cg_ctx *c, const mg_node *n) {
  const mg_value *A = n->in[0], *B = n->in[1], *y = n->out[0];
  int64_t ad[MG_MAX_RANK], bd[MG_MAX_RANK], yd[MG_MAX_RANK];
  int64_t ab[MG_MAX_RANK], bb[MG_MAX_RANK], ob[MG_MAX_RANK]; /* batch dims, right-aligned */
  int ar, br, yr, nb, i;
  int64_t M, N, K, batch = 1, a_batch = 1, b_batch = 1;
  if (!nn_is_f32(A) || !nn_is_f32(B) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(A->dtype));
  ar = cg_dims(A, ad);
  br = cg_dims(B, bd);
  yr = cg_dims(y, yd);
  if (ar < 1 || br < 1) return cg_unsupported(c, n, "scalar operand");
  /* numpy: a 1-D A is a row vector, a 1-D B a column vector; the unit dim is dropped */
  M = ar == 1 ? 1 : ad[ar - 2];
  K = ad[ar - 1];
  N = br == 1 ? 1 : bd[br - 1];
  if ((br == 1 ? bd[0] : bd[br - 2]) != K) return cg_unsupported(c, n, "inner dimensions differ");
  nb = 0;
  {
    const int na = ar > 2 ? ar - 2 : 0, nbb = br > 2 ? br - 2 : 0;
    nb = na > nbb ? na : nbb;
    for (i = 0; i < nb; i++) {
      const int ia = i - (nb - na), ib = i - (nb - nbb);
      ab[i] = ia >= 0 ? ad[ia] : 1;
      bb[i] = ib >= 0 ? bd[ib] : 1;
      if (ab[i] != bb[i] && ab[i] != 1 && bb[i] != 1)
        return cg_unsupported(c, n, "batch dims do not broadcast");
      ob[i] = ab[i] == 1 ? bb[i] : ab[i];
      batch *= ob[i], a_batch *= ab[i], b_batch *= bb[i];
    }
  }
  if (cg_numel(y) != batch * M * N || yr < 1)
    return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(A)) || !nn_fits_int(cg_numel(B)) || !nn_fits_int(cg_numel(y)))
    return cg_unsupported(c, n, "tensor too large");
  nn_need(c, "matmul.c");
  {
    int kind, pnr;
    const char *wp = cg_prepared(c, n, &kind, &pnr);
    if (wp) { /* B constant and 2-D: b_batch == 1, a_batch == batch */
      emit_prepb(c, n, wp, pnr, 0);
      emit_act(c, n, y, batch * M * N);
      return 0;
    }
  }
  if (b_batch == 1 && a_batch == batch) {
    /* one B for all: A's batch rows are consecutive M-row blocks */
    cg_kernel(c, 1, "mg_sgemm", "%lld, %lld, %lld, 1.0f, %s, %lld, 0, %s, %lld, 0, 0.0f, %s, %lld, %s",
            (long long)(batch * M), (long long)N, (long long)K, cg_in(c, A), (long long)K,
            cg_in(c, B), (long long)N, cg_out(c, y), (long long)N,
            cg_scratch(c, "mg_sgemm_scratch(%lld, %lld, %lld)", (long long)(batch * M),
                       (long long)N, (long long)K));
  } else {
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(2 * batch + 1)), idx[MG_MAX_RANK] = {0};
    int64_t b;
    if (!off) return cg_unsupported(c, n, "out of memory");
    for (b = 0; b < batch; b++) { /* walk the output batch in C order */
      int64_t ao = 0, bo = 0, as = M * K, bs = K * N;
      for (i = nb - 1; i >= 0; i--) {
        if (ab[i] != 1) ao += idx[i] * as;
        if (bb[i] != 1) bo += idx[i] * bs;
        as *= ab[i], bs *= bb[i];
      }
      off[b] = ao, off[batch + b] = bo;
      for (i = nb - 1; i >= 0; i--) {
        if (++idx[i] < ob[i]) break;
        idx[i] = 0;
      }
    }
    cg_kernel(c, 1, "mg_matmul_batched", "%lld, %lld, %lld, %lld, %s, %s, %s, %s, %s, %s",
            (long long)batch, (long long)M, (long long)N, (long long)K, cg_in(c, A),
            cg_i64s(c, off, (int)batch), cg_in(c, B), cg_i64s(c, off + batch, (int)batch),
            cg_out(c, y),
            cg_scratch(c, "mg_sgemm_scratch(%lld, %lld, %lld)", (long long)M, (long long)N,
                       (long long)K));
    free(off);
  }
  emit_act(c, n, y, batch * M * N);
  return 0;
}
