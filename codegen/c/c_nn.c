/* C emitters of the nn family: Conv, ConvTranspose, the pools, the normalisations
 * and LRN (runtime/conv.c, runtime/nn.c; contract in codegen/cg.h). Resize is in
 * c_resize.c, Gemm and MatMul in c_linalg.c.
 *
 * Every geometric decision (auto_pad, ceil_mode, output_shape, output sizes) is
 * made here, once, and the result is checked against the shapes inference gave
 * the node's output: a disagreement means this file and the reference semantics
 * differ, so it is reported as unsupported rather than emitted. Only float32 is
 * supported; 1-D windows run as 2-D ones with H = 1. */
#include "c_nn3d.h"
#include "c_nn_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- window geometry */

/* One sliding window over 2 spatial dims (a 1-D one has in[0] = k[0] = 1). */
typedef struct {
  int nd;                                    /* spatial dims of the model: 1 or 2 */
  int64_t in[2], k[2], s[2], d[2], pb[2], pe[2], out[2];
} win2d;

/* Reads strides, dilations, pads and auto_pad of a Conv or pool over the nd
 * spatial dims `in` with kernel `k` and computes the output sizes (ceil_mode as the
 * pools define it: the last window must start inside the input or its begin pad).
 * Returns 0, or -1 after reporting. */
static int window_init(cg_ctx *c, const mg_node *n, int nd, const int64_t *in,
                       const int64_t *k, int ceil_mode, win2d *g) {
  nn_window w;
  int i;
  if (nd < 1 || nd > 2)
    return cg_unsupported(c, n, "%d spatial dimensions (1-D and 2-D are supported)", nd);
  if (nn_window_init(c, n, nd, in, k, ceil_mode, &w)) return -1;
  memset(g, 0, sizeof *g);
  g->nd = nd;
  for (i = 0; i < 2; i++) g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
  for (i = 0; i < nd; i++) { /* a 1-D window is the second of two dims */
    const int j = 2 - nd + i;
    g->in[j] = w.in[i], g->k[j] = w.k[i], g->s[j] = w.s[i], g->d[j] = w.d[i];
    g->pb[j] = w.pb[i], g->pe[j] = w.pe[i], g->out[j] = w.out[i];
  }
  return 0;
}

/* Checks that y is [N, M, out...] as computed (and fits int); -1 after reporting. */
static int check_out_shape(cg_ctx *c, const mg_node *n, const mg_value *y, int64_t N,
                           int64_t M, const win2d *g) {
  int64_t yd[MG_MAX_RANK];
  int r = cg_dims(y, yd), i;
  if (r != g->nd + 2 || yd[0] != N || yd[1] != M)
    return cg_unsupported(c, n, "output shape differs from the computed one");
  for (i = 0; i < g->nd; i++)
    if (yd[2 + i] != g->out[2 - g->nd + i])
      return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(y))) return cg_unsupported(c, n, "tensor too large");
  return 0;
}

/* ------------------------------------------------------------------ Conv */

/* The mg_conv2d_params of a 2-D (or 1-D) float32 Conv, activation and preparation
 * left unset, from its shapes and attributes; the geometry decisions and checks of
 * cg_emit_Conv. Returns 0; 1 for a Conv of 3+ spatial dims (c_nn3d.c's); -1 after
 * cg_unsupported. */
static int conv_params(cg_ctx *c, const mg_node *n, mg_conv2d_params *kp) {
  const mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  int64_t xd[MG_MAX_RANK], wd[MG_MAX_RANK], G = mg_attr_int(n, "group", 1);
  int xr, wr;
  win2d g;
  if (!nn_is_f32(x) || !nn_is_f32(w) || !nn_is_f32(y) || (b && !nn_is_f32(b)))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  xr = cg_dims(x, xd);
  wr = cg_dims(w, wd);
  if (xr >= 5) return 1;
  if (xr < 3 || xr > 4 || wr != xr) return cg_unsupported(c, n, "X and W must both be 3-D or 4-D");
  if (G < 1 || xd[1] % G || wd[1] * G != xd[1] || wd[0] % G)
    return cg_unsupported(c, n, "channels do not match group %lld", (long long)G);
  if (b && cg_numel(b) != wd[0]) return cg_unsupported(c, n, "B must have M values");
  if (nn_check_kernel_shape(c, n, xr - 2, wd + 2)) return -1;
  if (window_init(c, n, xr - 2, xd + 2, wd + 2, 0, &g)) return -1;
  if (check_out_shape(c, n, y, xd[0], wd[0], &g)) return -1;
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(w)))
    return cg_unsupported(c, n, "tensor too large");
  memset(kp, 0, sizeof *kp);
  kp->N = (int)xd[0], kp->C = (int)xd[1], kp->H = (int)g.in[0], kp->W = (int)g.in[1];
  kp->M = (int)wd[0], kp->kh = (int)g.k[0], kp->kw = (int)g.k[1], kp->group = (int)G;
  kp->stride_h = (int)g.s[0], kp->stride_w = (int)g.s[1], kp->dil_h = (int)g.d[0], kp->dil_w = (int)g.d[1];
  kp->pad_t = (int)g.pb[0], kp->pad_l = (int)g.pb[1], kp->pad_b = (int)g.pe[0], kp->pad_r = (int)g.pe[1];
  kp->OH = (int)g.out[0], kp->OW = (int)g.out[1];
  kp->act = MG_ACT_NONE;
  return 0;
}

int cg_conv_geometry(cg_ctx *c, const mg_node *n, mg_conv2d_params *p) {
  return n->op == MG_OP_Conv && n->n_in >= 2 && n->in[0] && n->in[1] && n->out[0] ? conv_params(c, n, p) : -1;
}

/* Conv n at int8 (runtime/int8.c): weights prepared int8 at conversion, its input
 * quantised in the kernel, dequantisation, bias and activation in its epilogue.
 * Single-threaded whatever --threads says. */
static int emit_q8_conv(cg_ctx *c, const mg_node *n, mg_conv2d_params *kp, const cg_act *act, float qs, int qz) {
  const mg_value *x = n->in[0], *b = n->n_in > 2 ? n->in[2] : NULL;
  char fa[40], fb[40], fs[40];
  int kind, mr;
  const char *wp = cg_prepared(c, n, &kind, &mr);
  const char *prm = cg_static(c, "mg_q8_conv_params",
                              "{{%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, "
                              "0, 0}, %s, %d}",
                              kp->N, kp->C, kp->H, kp->W, kp->M, kp->kh, kp->kw, kp->group, kp->stride_h, kp->stride_w,
                              kp->dil_h, kp->dil_w, kp->pad_t, kp->pad_l, kp->pad_b, kp->pad_r, kp->OH, kp->OW,
                              act->act, nn_flit(fa, act->a), nn_flit(fb, act->b), nn_flit(fs, qs), qz);
  nn_need(c, "int8.c");
  nn_need(c, "conv.c"); /* mg_bias_act, for the activations the epilogue does not apply */
  if (cg_threads(c) > 1) nn_need(c, "pool.c"); /* model_init starts the pool the other layers use */
  cg_line(c, "mg_q8_conv2d(&%s, %s, (const void *)%s, %s, %s, %s);", prm, cg_in(c, x), wp, b ? cg_in(c, b) : "NULL",
          cg_out(c, n->out[0]), cg_scratch(c, "mg_q8_conv2d_scratch(&%s)", prm));
  return 0;
}

int cg_emit_Conv(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  mg_conv2d_params kp;
  cg_act act;
  char fa[40], fb[40];
  const char *prm, *wp;
  int rc = conv_params(c, n, &kp), kind = 0, mr = 0;
  if (rc < 0) return -1;
  if (rc > 0) return nd_emit_conv(c, n); /* 3+ spatial dims: c_nn3d.c */
  cg_fused_act(c, n, &act);
  {
    float qs;
    int qz;
    if (cg_q8_conv(c, n, &qs, &qz)) return emit_q8_conv(c, n, &kp, &act, qs, qz);
  }
  /* weights prepared at conversion (cg_prepare.c), or as the graph has them */
  wp = cg_prepared(c, n, &kind, &mr);
  kp.prepared = kind, kp.prepared_mr = mr;
  prm = cg_static(c, "mg_conv2d_params",
                  "{%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, "
                  "%d, %d}",
                  kp.N, kp.C, kp.H, kp.W, kp.M, kp.kh, kp.kw, kp.group, kp.stride_h, kp.stride_w,
                  kp.dil_h, kp.dil_w, kp.pad_t, kp.pad_l, kp.pad_b, kp.pad_r, kp.OH, kp.OW, act.act,
                  nn_flit(fa, act.a), nn_flit(fb, act.b), kind, mr);
  nn_need(c, "conv.c");
  {
    /* the strategy mg_conv2d will take: its kernels are compiled only if selected */
    const mg_conv_kernel k = mg_conv2d_kernel(&kp);
    if (k == MG_CONV_WINOGRAD) cg_select(c, "MG_RT_USE_CONV_WINOGRAD");
    if (k == MG_CONV_DEPTHWISE) cg_select(c, "MG_RT_USE_CONV_DEPTHWISE");
  }
  /* on threads, its output is split among them, each with its own scratch */
  cg_kernel(c, 1, "mg_conv2d", "&%s, %s, %s, %s, %s, %s", prm, cg_in(c, x), wp ? wp : cg_in(c, w),
            b ? cg_in(c, b) : "NULL", cg_out(c, y), cg_scratch(c, "mg_conv2d_scratch(&%s)", prm));
  return 0;
}

/* ---------------------------------------------------------- ConvTranspose */

int cg_emit_ConvTranspose(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  int64_t xd[MG_MAX_RANK], wd[MG_MAX_RANK], G = mg_attr_int(n, "group", 1), M;
  int64_t in[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0},
          out[2] = {1, 1};
  int xr, wr, nd, i;
  win2d g;
  nn_window tw;
  const char *prm;
  if (!nn_is_f32(x) || !nn_is_f32(w) || !nn_is_f32(y) || (b && !nn_is_f32(b)))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  xr = cg_dims(x, xd);
  wr = cg_dims(w, wd);
  if (xr >= 5) return nd_emit_conv_transpose(c, n); /* c_nn3d.c */
  if (xr < 3 || xr > 4 || wr != xr) return cg_unsupported(c, n, "X and W must both be 3-D or 4-D");
  nd = xr - 2;
  if (G < 1 || xd[1] % G || wd[0] != xd[1])
    return cg_unsupported(c, n, "channels do not match group %lld", (long long)G);
  M = wd[1] * G;
  if (b && cg_numel(b) != M) return cg_unsupported(c, n, "B must have M values");
  if (nn_check_kernel_shape(c, n, nd, wd + 2)) return -1;
  if (nn_transpose_window(c, n, nd, xd + 2, wd + 2, &tw)) return -1;
  for (i = 0; i < nd; i++) { /* a 1-D convolution is the second of two dims */
    const int j = 2 - nd + i;
    in[j] = tw.in[i], k[j] = tw.k[i], s[j] = tw.s[i], d[j] = tw.d[i], pb[j] = tw.pb[i], out[j] = tw.out[i];
  }
  memset(&g, 0, sizeof g);
  g.nd = nd;
  g.out[0] = out[0], g.out[1] = out[1];
  if (check_out_shape(c, n, y, xd[0], M, &g)) return -1;
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(w)) ||
      !nn_fits_int(cg_numel(w) / (xd[1] / G) * in[0] * in[1]))
    return cg_unsupported(c, n, "tensor too large");
  prm = cg_static(c, "mg_convt2d_params",
                  "{%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                  "%lld, %lld, %lld, %lld}",
                  (long long)xd[0], (long long)xd[1], (long long)in[0], (long long)in[1],
                  (long long)M, (long long)k[0], (long long)k[1], (long long)G, (long long)s[0],
                  (long long)s[1], (long long)d[0], (long long)d[1], (long long)pb[0],
                  (long long)pb[1], (long long)out[0], (long long)out[1]);
  nn_need(c, "conv.c");
  cg_select(c, "MG_RT_USE_CONV_TRANSPOSE");
  cg_line(c, "mg_conv_transpose2d(&%s, %s, %s, %s, %s, %s);", prm, cg_in(c, x), cg_in(c, w),
          b ? cg_in(c, b) : "NULL", cg_out(c, y),
          cg_scratch(c, "mg_conv_transpose2d_scratch(&%s)", prm));
  return 0;
}

/* ------------------------------------------------------------------ pools */

enum { POOL_MAX, POOL_AVG, POOL_LP };

/* MaxPool, AveragePool, LpPool over 1 or 2 spatial dims. */
static int emit_pool(cg_ctx *c, const mg_node *n, int kind) {
  const mg_value *x = n->in[0], *y = n->out[0];
  int64_t xd[MG_MAX_RANK];
  const int64_t *ks;
  int xr, nd;
  win2d g;
  char fp[40];
  const char *prm, *fn;
  int64_t p = kind == POOL_LP ? mg_attr_int(n, "p", 2) : 2;
  /* 3+ spatial dims, other dtypes and MaxPool's Indices: c_nn3d.c */
  if (cg_dims(x, xd) >= 5 || !nn_is_f32(x) || (kind == POOL_MAX && n->n_out > 1 && n->out[1]))
    return nd_emit_pool(c, n, kind == POOL_MAX ? ND_POOL_MAX : kind == POOL_AVG ? ND_POOL_AVG : ND_POOL_LP);
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  xr = cg_dims(x, xd);
  nd = xr - 2;
  if (xr < 3 || xr > 4) return cg_unsupported(c, n, "input rank %d", xr);
  if (mg_attr_ints(n, "kernel_shape", &ks) != (size_t)nd)
    return cg_unsupported(c, n, "kernel_shape must have %d values", nd);
  if (kind == POOL_LP && (p < 1 || p > 64)) return cg_unsupported(c, n, "p = %lld", (long long)p);
  if (window_init(c, n, nd, xd + 2, ks, (int)mg_attr_int(n, "ceil_mode", 0), &g)) return -1;
  if (check_out_shape(c, n, y, xd[0], xd[1], &g)) return -1;
  if (!nn_fits_int(cg_numel(x))) return cg_unsupported(c, n, "tensor too large");
  prm = cg_static(c, "mg_pool2d_params",
                  "{%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                  "%lld, %lld, %lld, %d, %s}",
                  (long long)(xd[0] * xd[1]), (long long)g.in[0], (long long)g.in[1],
                  (long long)g.k[0], (long long)g.k[1], (long long)g.s[0], (long long)g.s[1],
                  (long long)g.d[0], (long long)g.d[1], (long long)g.pb[0], (long long)g.pb[1],
                  (long long)g.pe[0], (long long)g.pe[1], (long long)g.out[0],
                  (long long)g.out[1],
                  kind == POOL_AVG ? (int)(mg_attr_int(n, "count_include_pad", 0) != 0) : 0,
                  nn_flit(fp, (float)p));
  fn = kind == POOL_MAX ? "mg_maxpool2d" : kind == POOL_AVG ? "mg_avgpool2d" : "mg_lppool2d";
  nn_need(c, "nn.c");
  cg_select(c, "MG_RT_USE_POOL2D");
  cg_kernel(c, 0, fn, "&%s, %s, %s", prm, cg_in(c, x), cg_out(c, y));
  return 0;
}

int cg_emit_MaxPool(cg_ctx *c, const mg_node *n) { return emit_pool(c, n, POOL_MAX); }
int cg_emit_AveragePool(cg_ctx *c, const mg_node *n) { return emit_pool(c, n, POOL_AVG); }
int cg_emit_LpPool(cg_ctx *c, const mg_node *n) { return emit_pool(c, n, POOL_LP); }

/* Planes (N*C) and plane size (the rest) of an NC... tensor; -1 after reporting. */
static int planes_of(cg_ctx *c, const mg_node *n, const mg_value *x, int64_t *N, int64_t *C,
                     int64_t *size) {
  int64_t xd[MG_MAX_RANK];
  int r = cg_dims(x, xd), i;
  if (r < 2) return cg_unsupported(c, n, "input rank %d (at least 2)", r);
  *N = xd[0], *C = xd[1], *size = 1;
  for (i = 2; i < r; i++) *size *= xd[i];
  if (!nn_fits_int(cg_numel(x))) return cg_unsupported(c, n, "tensor too large");
  return 0;
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool. */
static int emit_global_pool(cg_ctx *c, const mg_node *n, int kind) {
  const mg_value *x = n->in[0], *y = n->out[0];
  int64_t N, C, size, p = kind == POOL_LP ? mg_attr_int(n, "p", 2) : 2;
  char fp[40];
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (planes_of(c, n, x, &N, &C, &size)) return -1;
  if (cg_numel(y) != N * C) return cg_unsupported(c, n, "output shape differs from N x C x 1...");
  nn_need(c, "nn.c");
  if (kind == POOL_LP) {
    if (p < 1 || p > 64) return cg_unsupported(c, n, "p = %lld", (long long)p);
    cg_line(c, "mg_global_lppool(%lld, %lld, %s, %s, %s);", (long long)(N * C), (long long)size,
            nn_flit(fp, (float)p), cg_in(c, x), cg_out(c, y));
  } else {
    cg_kernel(c, 0, kind == POOL_MAX ? "mg_global_maxpool" : "mg_global_avgpool", "%lld, %lld, %s, %s",
            (long long)(N * C), (long long)size, cg_in(c, x), cg_out(c, y));
  }
  return 0;
}

int cg_emit_GlobalAveragePool(cg_ctx *c, const mg_node *n) { return emit_global_pool(c, n, POOL_AVG); }
int cg_emit_GlobalMaxPool(cg_ctx *c, const mg_node *n) { return emit_global_pool(c, n, POOL_MAX); }
int cg_emit_GlobalLpPool(cg_ctx *c, const mg_node *n) { return emit_global_pool(c, n, POOL_LP); }

/* --------------------------------------------------------- normalisations */

/* Inference BatchNormalization as y = x*scale[c] + shift[c], scale and shift
 * folded here from the constant inputs (in double, rounded once); with run-time
 * statistics, mg_batchnorm folds them per call. */
int cg_emit_BatchNormalization(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  int64_t N, C, size, ch, i;
  float *v[4], *scale, *shift;
  double eps = mg_attr_float(n, "epsilon", 1e-5f);
  cg_act act;
  char fa[40], fb[40], fe[40];
  const char *sn, *tn;
  if (mg_attr_int(n, "training_mode", 0))
    return cg_unsupported(c, n, "training_mode=1 (batch statistics)");
  for (i = 1; i < n->n_out; i++)
    if (n->out[i]) return cg_unsupported(c, n, "running mean/var outputs (training only)");
  /* momentum only affects the running statistics of training mode */
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (planes_of(c, n, x, &N, &C, &size)) return -1;
  for (i = 0; i < 4; i++) {
    if (!nn_is_f32(n->in[1 + i])) return cg_unsupported(c, n, "scale, B, mean, var must be float32");
    if (cg_numel(n->in[1 + i]) != C) return cg_unsupported(c, n, "scale, B, mean, var need C values");
  }
  cg_fused_act(c, n, &act);
  nn_need(c, "nn.c");
  if (!cg_is_const(n->in[1]) || !cg_is_const(n->in[2]) || !cg_is_const(n->in[3]) ||
      !cg_is_const(n->in[4])) {
    /* statistics known only at run time: folded per call */
    cg_select(c, "MG_RT_USE_NORM");
    cg_line(c, "mg_batchnorm(%lld, %lld, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);",
            (long long)N, (long long)C, (long long)size, cg_in(c, x), cg_in(c, n->in[1]),
            cg_in(c, n->in[2]), cg_in(c, n->in[3]), cg_in(c, n->in[4]),
            nn_flit(fe, (float)eps), cg_out(c, y), act.act, nn_flit(fa, act.a), nn_flit(fb, act.b));
    return 0;
  }
  scale = malloc(sizeof(float) * (size_t)(4 * C + 2 * C + 1));
  if (!scale) return cg_unsupported(c, n, "out of memory");
  for (i = 0; i < 4; i++) {
    v[i] = scale + i * C;
    if (cg_const_floats(n->in[1 + i], v[i], C) != C) {
      free(scale);
      return cg_unsupported(c, n, "unreadable constant input");
    }
  }
  shift = scale + 5 * C;
  for (ch = 0; ch < C; ch++) {
    const double inv = 1.0 / sqrt((double)v[3][ch] + eps), s = (double)v[0][ch] * inv;
    shift[ch] = (float)((double)v[1][ch] - (double)v[2][ch] * s);
    scale[4 * C + ch] = (float)s;
  }
  sn = cg_f32s(c, scale + 4 * C, (int)C);
  tn = cg_f32s(c, shift, (int)C);
  free(scale);
  cg_select(c, "MG_RT_USE_NORM");
  cg_line(c, "mg_channel_affine(%lld, %lld, %lld, %s, %s, %s, %s, %s, %s, %s);", (long long)N,
          (long long)C, (long long)size, sn, tn, cg_in(c, x), cg_out(c, y), act.act,
          nn_flit(fa, act.a), nn_flit(fb, act.b));
  return 0;
}

/* A per-position parameter of LayerNormalization (Scale or B, broadcast to the
 * normalised dims nd[0..nr)) as an expression for `inner` floats: the tensor itself
 * when it already has them all, else (constant) a static array expanded here.
 * NULL after reporting. */
static const char *ln_param(cg_ctx *c, const mg_node *n, const mg_value *t, int nr,
                            const int64_t *nd, int64_t inner) {
  int64_t td[MG_MAX_RANK], strides[MG_MAX_RANK], idx[MG_MAX_RANK] = {0}, i, off = 0, acc = 1;
  int tr = cg_dims(t, td), d;
  float *src, *dst;
  const char *name;
  if (!nn_is_f32(t)) {
    cg_unsupported(c, n, "Scale/B dtype %s", mg_dtype_name(t->dtype));
    return NULL;
  }
  if (tr > nr) {
    cg_unsupported(c, n, "Scale/B rank exceeds the normalised rank");
    return NULL;
  }
  for (d = tr - 1; d >= 0; d--) {
    const int64_t full = nd[nr - tr + d];
    if (td[d] != 1 && td[d] != full) {
      cg_unsupported(c, n, "Scale/B do not broadcast to the normalised shape");
      return NULL;
    }
    strides[nr - tr + d] = td[d] == 1 ? 0 : acc;
    acc *= td[d];
  }
  for (d = 0; d < nr - tr; d++) strides[d] = 0;
  if (cg_numel(t) == inner) return cg_in(c, t);
  if (!cg_is_const(t)) {
    cg_unsupported(c, n, "non-constant Scale/B that broadcasts");
    return NULL;
  }
  src = malloc(sizeof(float) * (size_t)(acc + inner + 1));
  if (!src) {
    cg_unsupported(c, n, "out of memory");
    return NULL;
  }
  dst = src + acc;
  if (cg_const_floats(t, src, acc) != acc) {
    free(src);
    cg_unsupported(c, n, "unreadable constant Scale/B");
    return NULL;
  }
  for (i = 0; i < inner; i++) { /* walk the normalised shape in C order */
    dst[i] = src[off];
    for (d = nr - 1; d >= 0; d--) {
      idx[d]++, off += strides[d];
      if (idx[d] < nd[d]) break;
      off -= strides[d] * nd[d], idx[d] = 0;
    }
  }
  name = cg_f32s(c, dst, (int)inner);
  free(src);
  return name;
}

int cg_emit_LayerNormalization(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  const mg_value *mo = n->n_out > 1 ? n->out[1] : NULL, *io = n->n_out > 2 ? n->out[2] : NULL;
  int64_t xd[MG_MAX_RANK], axis = mg_attr_int(n, "axis", -1), outer = 1, inner = 1;
  int xr = cg_dims(x, xd), d;
  const char *sc, *bi = "NULL";
  char fe[40];
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (mg_attr_int(n, "stash_type", 1) != 1)
    return cg_unsupported(c, n, "stash_type %lld (float32 statistics only)",
                          (long long)mg_attr_int(n, "stash_type", 1));
  if (axis < 0) axis += xr;
  if (axis < 0 || axis >= xr) return cg_unsupported(c, n, "axis out of range");
  for (d = 0; d < xr; d++) {
    if (d < axis) outer *= xd[d];
    else inner *= xd[d];
  }
  if (inner < 1 || !nn_fits_int(cg_numel(x))) return cg_unsupported(c, n, "empty or too large");
  if ((mo && (!nn_is_f32(mo) || cg_numel(mo) != outer)) || (io && (!nn_is_f32(io) || cg_numel(io) != outer)))
    return cg_unsupported(c, n, "Mean/InvStdDev outputs must be float32 with one value per row");
  if (!(sc = ln_param(c, n, n->in[1], xr - (int)axis, xd + axis, inner))) return -1;
  if (n->n_in > 2 && n->in[2] && !(bi = ln_param(c, n, n->in[2], xr - (int)axis, xd + axis, inner)))
    return -1;
  nn_need(c, "nn.c");
  cg_select(c, "MG_RT_USE_NORM");
  cg_kernel(c, 0, "mg_layernorm", "%lld, %lld, %s, %s, %s, %s, %s, %s, %s", (long long)outer,
          (long long)inner, cg_in(c, x), sc, bi, nn_flit(fe, mg_attr_float(n, "epsilon", 1e-5f)),
          cg_out(c, y), mo ? cg_out(c, mo) : "NULL", io ? cg_out(c, io) : "NULL");
  return 0;
}

/* GroupNormalization (per-channel or, opset 18, per-group scale and bias) and
 * InstanceNormalization (groups = C). */
static int emit_group_norm(cg_ctx *c, const mg_node *n, int64_t G) {
  const mg_value *x = n->in[0], *y = n->out[0], *s = n->in[1], *b = n->in[2];
  int64_t N, C, size, ns, i;
  const char *names[2];
  char fe[40];
  int k;
  if (!nn_is_f32(x) || !nn_is_f32(y) || !nn_is_f32(s) || !nn_is_f32(b))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (planes_of(c, n, x, &N, &C, &size)) return -1;
  if (G < 1 || C % G) return cg_unsupported(c, n, "num_groups %lld does not divide %lld channels",
                                            (long long)G, (long long)C);
  if (size < 1) return cg_unsupported(c, n, "empty spatial dims");
  ns = cg_numel(s);
  if ((ns != C && ns != G) || cg_numel(b) != ns)
    return cg_unsupported(c, n, "scale and bias must have C (or num_groups) values");
  for (k = 0; k < 2; k++) {
    const mg_value *t = k ? b : s;
    float *src, *dst;
    if (ns == C) {
      names[k] = cg_in(c, t);
      continue;
    }
    /* per-group values: expanded to per-channel here */
    if (!cg_is_const(t)) return cg_unsupported(c, n, "non-constant per-group scale/bias");
    src = malloc(sizeof(float) * (size_t)(G + C + 1));
    if (!src) return cg_unsupported(c, n, "out of memory");
    dst = src + G;
    if (cg_const_floats(t, src, G) != G) {
      free(src);
      return cg_unsupported(c, n, "unreadable constant scale/bias");
    }
    for (i = 0; i < C; i++) dst[i] = src[i / (C / G)];
    names[k] = cg_f32s(c, dst, (int)C);
    free(src);
  }
  nn_need(c, "nn.c");
  cg_select(c, "MG_RT_USE_NORM");
  cg_line(c, "mg_groupnorm(%lld, %lld, %lld, %lld, %s, %s, %s, %s, %s);", (long long)N,
          (long long)C, (long long)G, (long long)size, cg_in(c, x), names[0], names[1],
          nn_flit(fe, mg_attr_float(n, "epsilon", 1e-5f)), cg_out(c, y));
  return 0;
}

int cg_emit_GroupNormalization(cg_ctx *c, const mg_node *n) {
  const mg_attr *a = mg_node_attr(n, "num_groups");
  if (!a) return cg_unsupported(c, n, "num_groups missing");
  return emit_group_norm(c, n, a->i);
}

int cg_emit_InstanceNormalization(cg_ctx *c, const mg_node *n) {
  int64_t xd[MG_MAX_RANK];
  if (cg_dims(n->in[0], xd) < 2) return cg_unsupported(c, n, "input rank < 2");
  return emit_group_norm(c, n, xd[1]);
}

int cg_emit_LRN(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  const mg_attr *sa = mg_node_attr(n, "size");
  int64_t N, C, size;
  char fa[40], fb[40], fc[40];
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (!sa || sa->i < 1 || sa->i > (1 << 20)) return cg_unsupported(c, n, "size must be positive");
  if (planes_of(c, n, x, &N, &C, &size)) return -1;
  nn_need(c, "nn.c");
  cg_select(c, "MG_RT_USE_NORM");
  cg_line(c, "mg_lrn(%lld, %lld, %lld, %lld, %s, %s, %s, %s, %s);", (long long)N, (long long)C,
          (long long)size, (long long)sa->i, nn_flit(fa, mg_attr_float(n, "alpha", 1e-4f)),
          nn_flit(fb, mg_attr_float(n, "beta", 0.75f)), nn_flit(fc, mg_attr_float(n, "bias", 1.0f)),
          cg_in(c, x), cg_out(c, y));
  return 0;
}
