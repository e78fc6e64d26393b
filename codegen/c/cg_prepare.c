/* Weights prepared at conversion time: a convolution's weights are written to the
 * weights payload already in the layout its kernel reads (SGEMM panels, or the
 * Winograd-transformed kernels in panels: runtime mg_conv2d_prepare), and so is
 * the constant B of a MatMul or Gemm (B panels: mg_sgemm_prepb), so model_run
 * never repacks or transforms them. The layout depends on the micro-kernel's panel
 * height MR, chosen here for the machine migc runs on (the generated Makefile
 * builds with -march=native); a runtime built for another MR still computes the
 * same result from it, repacking per call (runtime/sgemm.c, mg_sgemm_packed). */
#include "cg_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The panel height of the micro-kernel the generated code will most likely be
 * built with: that of the host (runtime/sgemm.c's paths: AVX2+FMA 6, other
 * x86-64 4, aarch64 8, else 4). */
static int host_mr(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 6 : 4;
#elif defined(__aarch64__)
  return 8;
#else
  return 4;
#endif
}

int cg_conv_candidate(cg_ctx *c, const mg_node *n, mg_conv2d_params *p) {
  const mg_value *w = n->n_in >= 2 ? n->in[1] : NULL;
  int rc;
  if (n->op != MG_OP_Conv || c->absorbed[n->id] || (c->dyn_node && c->dyn_node[n->id])) return 0;
  if (!w || !cg_is_const(w) || w->dtype != MG_F32 || !mg_shape_is_static(&w->shape)) return 0;
  if ((size_t)cg_numel(w) * sizeof(float) != w->nbytes) return 0;
  c->probing = 1;
  rc = cg_conv_geometry(c, n, p);
  c->probing = 0;
  c->cur_failed = 0;
  return rc == 0;
}

/* A float32 value. */
static int f32(const mg_value *v) { return v && v->dtype == MG_F32; }

/* Fewest rows of A for which a product reads its constant B prepared: below it
 * the product is matrix-vector-like and mg_sgemm streams B as it is. Not for a
 * symbolic sequence, whose code must be one kernel at every length (cg_seq.c). */
#define PREPB_MIN_ROWS 8

int cg_gemm_prep_shape(cg_ctx *c, const mg_node *n, int64_t *M, int64_t *N, int64_t *K, int *tB) {
  const mg_value *A = n->n_in >= 2 ? n->in[0] : NULL, *B = n->n_in >= 2 ? n->in[1] : NULL;
  const mg_value *y = n->n_out >= 1 ? n->out[0] : NULL;
  int64_t ad[MG_MAX_RANK], bd[MG_MAX_RANK];
  int ar, i;
  if ((n->op != MG_OP_MatMul && n->op != MG_OP_Gemm) || !A || !B || !y || c->absorbed[n->id] ||
      (c->dyn_node && c->dyn_node[n->id]))
    return 0;
  if (!f32(A) || !f32(B) || !f32(y) || !cg_is_const(B) ||
      !mg_shape_is_static(&A->shape) || !mg_shape_is_static(&B->shape) || !mg_shape_is_static(&y->shape) ||
      (size_t)cg_numel(B) * sizeof(float) != B->nbytes)
    return 0;
  ar = cg_dims(A, ad);
  if (cg_dims(B, bd) != 2 || ar < 2 || (n->op == MG_OP_Gemm && ar != 2)) return 0;
  *tB = n->op == MG_OP_Gemm && mg_attr_int(n, "transB", 0) != 0;
  if (n->op == MG_OP_Gemm && (mg_attr_int(n, "transA", 0) != 0 || mg_attr_float(n, "alpha", 1.0f) != 1.0f))
    return 0;
  /* A's batch dims fold into M (one B for all) */
  for (*M = 1, i = 0; i < ar - 1; i++) *M *= ad[i];
  *K = ad[ar - 1];
  *N = *tB ? bd[0] : bd[1];
  return (*tB ? bd[1] : bd[0]) == *K && cg_numel(y) == *M * *N && (*M >= PREPB_MIN_ROWS || c->o->seq_symbolic) &&
         cg_numel(A) <= INT_MAX && cg_numel(B) <= INT_MAX && cg_numel(y) <= INT_MAX;
}

/* The micro-kernel's panel width NR on the host (runtime/sgemm.c's paths:
 * AVX-512 32, AVX2+FMA 16, else 8): the prepared B panels of MatMul and Gemm. */
static int host_nr(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 8;
  return __builtin_cpu_supports("avx512f") ? 32 : 16;
#else
  return 8;
#endif
}

/* B of MatMul or Gemm n in the prepared layout with panels nr wide (mg_sgemm_pack
 * of B^T): out holds mg_sgemm_packed_floats(N, K, nr) floats; NULL on OOM. */
static float *prepare_b(const mg_node *n, int64_t N, int64_t K, int tB, int nr, size_t *floats) {
  float *b = mg_malloc(n->in[1]->nbytes), *bt = tB ? b : mg_malloc(n->in[1]->nbytes), *out;
  *floats = mg_sgemm_packed_floats((int)N, (int)K, nr);
  out = mg_malloc(*floats * sizeof(float));
  if (b && bt && out) {
    memcpy(b, n->in[1]->data, n->in[1]->nbytes); /* the graph's bytes may sit unaligned */
    if (!tB)
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) bt[j * K + k] = b[k * N + j];
    mg_sgemm_pack((int)N, (int)K, bt, (int)K, nr, out);
  } else {
    mg_free(out);
    out = NULL;
  }
  if (bt != b) mg_free(bt);
  mg_free(b);
  return out;
}

/* The entry for prepared panels of floats floats: held in 16 bits under
 * --precision fp16|bf16 (all panels are of large weights, CG_W16_MIN or more,
 * but for a tiny layer's, kept float32 like its unprepared weights would be). */
static cg_prep prep_entry(const cg_ctx *c, float *data, size_t floats, int kind, int mr) {
  int w16 = c->o->weights16 && floats >= CG_W16_MIN;
  return (cg_prep){.data = data, .floats = floats, .nbytes = floats * (w16 ? 2 : sizeof(float)), .w16 = w16,
                   .kind = kind, .mr = mr};
}

int cg_prepare_weights(cg_ctx *c) {
  const mg_graph *g = c->g;
  const int mr = c->o->pack_mr > 0 ? c->o->pack_mr : host_mr();
  c->prep = mg_calloc((size_t)g->n_nodes + 1, sizeof *c->prep);
  if (!c->prep) return -1;
  if (c->o->pack_mr < 0) return 0;
  const int nr = c->o->pack_mr > 0 ? c->o->pack_mr : host_nr();
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    mg_conv2d_params p;
    int64_t M, N, K;
    int tB;
    if (c->o->quant) {
      const int q = cg_q8_prepare(c, i, n);
      if (q < 0) return -1;
      if (q) continue;
    }
    if (cg_gemm_prep_shape(c, n, &M, &N, &K, &tB)) {
      size_t floats;
      float *out = prepare_b(n, N, K, tB, nr, &floats);
      if (!out) return -1;
      c->prep[i] = prep_entry(c, out, floats, 1, nr);
      c->n_prep++;
      continue;
    }
    if (!cg_conv_candidate(c, n, &p)) continue;
    p.prepared = (int)mg_conv2d_prep_kind(&p);
    if (p.prepared == MG_CONV_PREP_NONE) continue;
    p.prepared_mr = mr;
    size_t floats = mg_conv2d_prepared_floats(&p);
    /* the graph's bytes may sit unaligned in the mapped model: read a copy */
    float *w = mg_malloc(n->in[1]->nbytes), *out = mg_malloc(floats * sizeof(float));
    if (!w || !out) {
      mg_free(w);
      mg_free(out);
      return -1;
    }
    memcpy(w, n->in[1]->data, n->in[1]->nbytes);
    mg_conv2d_prepare(&p, w, out);
    mg_free(w);
    c->prep[i] = prep_entry(c, out, floats, p.prepared, mr);
    c->n_prep++;
  }
  return 0;
}

const char *cg_prepared(cg_ctx *c, const mg_node *n, int *kind, int *mr) {
  const cg_prep *p = c->prep && n->id >= 0 && n->id < c->g->n_nodes ? &c->prep[n->id] : NULL;
  *kind = 0, *mr = 0;
  if (!p || !p->data) return NULL;
  *kind = p->kind, *mr = p->mr;
  if (p->w16) return cg_w16_at(c, p->offset, "float");
  return str(c, "((const float *)(W + %zu))", p->offset);
}

int cg_threads(const cg_ctx *c) { return c->o->threads > 1 ? c->o->threads : 1; }
