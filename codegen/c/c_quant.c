/* C emitters of the misc family's quantisation ops (runtime/quant.c; contract in
 * codegen/cg.h): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
 *
 * Per-axis parameters become an [outer, len, inner] view, batch broadcasting of
 * the matrix products per-batch offsets, and convolution geometry (auto_pad,
 * pads, output sizes) a static parameter struct checked against the output shape
 * inference gave. Semantics are the reference interpreter's (interp/interp_misc.c,
 * interp_linalg.c); anything outside them is reported with cg_unsupported. */
#include "c_nn_util.h"

#include <stdlib.h>
#include <string.h>

static int is_float(mg_dtype t) { return t == MG_F32 || t == MG_F64 || t == MG_F16 || t == MG_BF16; }
static int is_q8(mg_dtype t) { return t == MG_U8 || t == MG_I8; }

static void need_quant(cg_ctx *c) {
  cg_need(c, "quant.c");
  cg_need(c, "misc.c");
  cg_need(c, "tensor.c");
}

/* An optional input: NULL when absent or omitted. */
static const mg_value *opt_in(const mg_node *n, int i) { return n->n_in > i ? n->in[i] : NULL; }

/* ---------------------------------------------------------- quantisation */

/* The [outer, len, inner] view of x for a scale s and zero point z (either one
 * value, or a vector along attribute `axis`), as the interpreter accepts them. */
static int quant_view(cg_ctx *c, const mg_node *n, const mg_value *x, const mg_value *s,
                      const mg_value *z, int64_t *outer, int64_t *len, int64_t *inner) {
  int64_t xd[MG_MAX_RANK], sd[MG_MAX_RANK];
  const int xr = cg_dims(x, xd), sr = cg_dims(s, sd);
  int64_t axis = mg_attr_int(n, "axis", 1);
  *outer = 1, *len = 1, *inner = cg_numel(x);
  if (cg_numel(s) == 1 && sr <= 1) {
    if (z && cg_numel(z) != 1) return cg_unsupported(c, n, "zero point and scale differ in size");
    return 0;
  }
  if (sr != 1) return cg_unsupported(c, n, "blocked quantisation (scale of rank %d)", sr);
  if (axis < 0) axis += xr;
  if (axis < 0 || axis >= xr) return cg_unsupported(c, n, "axis out of range");
  if (sd[0] != xd[axis]) return cg_unsupported(c, n, "scale length differs from the axis's");
  if (z && cg_numel(z) != sd[0]) return cg_unsupported(c, n, "zero point and scale differ in size");
  *len = sd[0];
  *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= xd[d];
  for (int d = (int)axis + 1; d < xr; d++) *inner *= xd[d];
  return 0;
}

/* QuantizeLinear to uint8/int8/uint16/int16 (y's dtype is the zero point's, uint8
 * without one). `saturate` only concerns float8 outputs, which are unsupported. */
int cg_emit_QuantizeLinear(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *s = n->in[1], *z = opt_in(n, 2), *y = n->out[0];
  const mg_dtype qt = z ? z->dtype : MG_U8;
  int64_t outer, len, inner;
  (void)mg_attr_int(n, "saturate", 1);
  if (!x || !s || !y) return cg_unsupported(c, n, "missing input or output");
  if (qt != MG_U8 && qt != MG_I8 && qt != MG_U16 && qt != MG_I16)
    return cg_unsupported(c, n, "quantising to %s", mg_dtype_name(qt));
  if (!is_float(x->dtype) && x->dtype != MG_I32) return cg_unsupported(c, n, "input dtype %s", mg_dtype_name(x->dtype));
  if (!is_float(s->dtype)) return cg_unsupported(c, n, "scale dtype %s", mg_dtype_name(s->dtype));
  if (y->dtype != qt || cg_numel(y) != cg_numel(x)) return cg_unsupported(c, n, "output differs from the input");
  if (quant_view(c, n, x, s, z, &outer, &len, &inner)) return -1;
  if (cg_numel(x) == 0) return 0;
  const char *prm = cg_static(c, "mg_quant_params", "{%lld, %lld, %lld, %s, %s, %s}", (long long)outer,
                              (long long)len, (long long)inner, cg_rt_dtype(x->dtype),
                              cg_rt_dtype(s->dtype), cg_rt_dtype(qt));
  need_quant(c);
  cg_line(c, "mg_quantize_linear(&%s, %s, %s, %s, %s);", prm, cg_vin(c, x), cg_vin(c, s),
          z ? cg_vin(c, z) : "NULL", cg_vout(c, y));
  return 0;
}

/* DequantizeLinear of an integer tensor into the scale's float dtype. */
int cg_emit_DequantizeLinear(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *s = n->in[1], *z = opt_in(n, 2), *y = n->out[0];
  int64_t outer, len, inner;
  if (!x || !s || !y) return cg_unsupported(c, n, "missing input or output");
  if (!is_q8(x->dtype) && x->dtype != MG_U16 && x->dtype != MG_I16 && x->dtype != MG_I32)
    return cg_unsupported(c, n, "dequantising %s", mg_dtype_name(x->dtype));
  if (!is_float(s->dtype)) return cg_unsupported(c, n, "scale dtype %s", mg_dtype_name(s->dtype));
  if (z && z->dtype != x->dtype) return cg_unsupported(c, n, "zero point dtype differs from the input's");
  if (y->dtype != s->dtype || cg_numel(y) != cg_numel(x)) return cg_unsupported(c, n, "output differs from the input");
  if (quant_view(c, n, x, s, z, &outer, &len, &inner)) return -1;
  if (cg_numel(x) == 0) return 0;
  const char *prm = cg_static(c, "mg_quant_params", "{%lld, %lld, %lld, %s, %s, MG_RT_U8}", (long long)outer,
                              (long long)len, (long long)inner, cg_rt_dtype(x->dtype), cg_rt_dtype(s->dtype));
  need_quant(c);
  cg_line(c, "mg_dequantize_linear(&%s, %s, %s, %s, %s);", prm, cg_vin(c, x), cg_vin(c, s),
          z ? cg_vin(c, z) : "NULL", cg_vout(c, y));
  return 0;
}

/* DynamicQuantizeLinear of float32 (outputs y, y_scale, y_zero_point; any may be
 * omitted). */
int cg_emit_DynamicQuantizeLinear(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0];
  const mg_value *y = n->n_out > 0 ? n->out[0] : NULL, *ys = n->n_out > 1 ? n->out[1] : NULL;
  const mg_value *yz = n->n_out > 2 ? n->out[2] : NULL;
  if (!x || x->dtype != MG_F32) return cg_unsupported(c, n, "input dtype %s (float32 only)", x ? mg_dtype_name(x->dtype) : "?");
  if ((y && (y->dtype != MG_U8 || cg_numel(y) != cg_numel(x))) || (ys && (ys->dtype != MG_F32 || cg_numel(ys) != 1)) ||
      (yz && (yz->dtype != MG_U8 || cg_numel(yz) != 1)))
    return cg_unsupported(c, n, "outputs must be uint8 [x's shape], float32 scalar, uint8 scalar");
  need_quant(c);
  cg_line(c, "mg_dynamic_quantize_linear(%lld, %s, %s, %s, %s);", (long long)cg_numel(x), cg_in(c, x),
          y ? cg_out(c, y) : "NULL", ys ? cg_out(c, ys) : "NULL", yz ? cg_out(c, yz) : "NULL");
  return 0;
}

/* ------------------------------------------------- integer matrix products */

/* Numpy MatMul geometry of a and b with broadcast batch dims: M, N, K, the batch
 * count and per-batch element offsets (off[0..batch) for a, off[batch..2 batch) for
 * b, malloc'ed into *off). Checks y's element count. */
typedef struct {
  int64_t M, N, K, batch;
  int ar, br;
  int64_t *off;
} mm_geom;

static int mm_plan(cg_ctx *c, const mg_node *n, const mg_value *a, const mg_value *b,
                   const mg_value *y, mm_geom *g) {
  int64_t ad[MG_MAX_RANK], bd[MG_MAX_RANK], ab[MG_MAX_RANK], bb[MG_MAX_RANK], ob[MG_MAX_RANK];
  int64_t idx[MG_MAX_RANK] = {0};
  memset(g, 0, sizeof *g);
  g->ar = cg_dims(a, ad), g->br = cg_dims(b, bd);
  if (g->ar < 1 || g->br < 1) return cg_unsupported(c, n, "scalar operand");
  g->M = g->ar == 1 ? 1 : ad[g->ar - 2];
  g->K = ad[g->ar - 1];
  g->N = g->br == 1 ? 1 : bd[g->br - 1];
  if ((g->br == 1 ? bd[0] : bd[g->br - 2]) != g->K) return cg_unsupported(c, n, "inner dimensions differ");
  const int na = g->ar > 2 ? g->ar - 2 : 0, nbb = g->br > 2 ? g->br - 2 : 0, nb = na > nbb ? na : nbb;
  g->batch = 1;
  for (int i = 0; i < nb; i++) {
    const int ia = i - (nb - na), ib = i - (nb - nbb);
    ab[i] = ia >= 0 ? ad[ia] : 1;
    bb[i] = ib >= 0 ? bd[ib] : 1;
    if (ab[i] != bb[i] && ab[i] != 1 && bb[i] != 1) return cg_unsupported(c, n, "batch dims do not broadcast");
    ob[i] = ab[i] == 1 ? bb[i] : ab[i];
    g->batch *= ob[i];
  }
  if (cg_numel(y) != g->batch * g->M * g->N) return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!(g->off = malloc(sizeof(int64_t) * (size_t)(2 * g->batch + 2)))) return cg_unsupported(c, n, "out of memory");
  for (int64_t t = 0; t < g->batch; t++) { /* the output batch in C order */
    int64_t ao = 0, bo = 0, as = g->M * g->K, bs = g->K * g->N;
    for (int i = nb - 1; i >= 0; i--) {
      if (ab[i] != 1) ao += idx[i] * as;
      if (bb[i] != 1) bo += idx[i] * bs;
      as *= ab[i], bs *= bb[i];
    }
    g->off[t] = ao, g->off[g->batch + t] = bo;
    for (int i = nb - 1; i >= 0; i--) {
      if (++idx[i] < ob[i]) break;
      idx[i] = 0;
    }
  }
  return 0;
}

/* Whether a per-row (of A, rank >= 2) or per-column (of B, rank >= 2) parameter p
 * of `per` values is usable: one value gives 0, `per` values 1, else -1. */
static int per_vector(const mg_value *p, int rank, int64_t per) {
  if (!p || cg_numel(p) == 1) return 0;
  return rank >= 2 && cg_numel(p) == per ? 1 : -1;
}

/* MatMulInteger and QLinearMatMul (q). */
static int emit_qmatmul(cg_ctx *c, const mg_node *n, int q) {
  const mg_value *a = n->in[0], *b = n->in[q ? 3 : 1], *y = n->out[0];
  const mg_value *azp = opt_in(n, 2), *bzp = opt_in(n, q ? 5 : 3);
  const mg_value *as = q ? n->in[1] : NULL, *bs = q ? n->in[4] : NULL;
  const mg_value *ys = q ? n->in[6] : NULL, *yzp = q ? n->in[7] : NULL;
  mm_geom g;
  int azr, bzc, asr = 0, bsc = 0;
  if (!a || !b || !y || (q && (!as || !bs || !ys || !yzp))) return cg_unsupported(c, n, "missing input");
  if (!is_q8(a->dtype) || !is_q8(b->dtype)) return cg_unsupported(c, n, "operands must be uint8 or int8");
  if ((azp && azp->dtype != a->dtype) || (bzp && bzp->dtype != b->dtype))
    return cg_unsupported(c, n, "zero point dtype differs from its operand's");
  if (q && (as->dtype != MG_F32 || bs->dtype != MG_F32 || ys->dtype != MG_F32))
    return cg_unsupported(c, n, "scales must be float32");
  if (q && (!is_q8(yzp->dtype) || cg_numel(yzp) != 1 || cg_numel(ys) != 1))
    return cg_unsupported(c, n, "y_scale and y_zero_point must be one value, uint8 or int8");
  if (y->dtype != (q ? yzp->dtype : MG_I32)) return cg_unsupported(c, n, "output dtype %s", mg_dtype_name(y->dtype));
  if (mm_plan(c, n, a, b, y, &g)) return -1;
  azr = per_vector(azp, g.ar, g.M), bzc = per_vector(bzp, g.br, g.N);
  if (q) asr = per_vector(as, g.ar, g.M), bsc = per_vector(bs, g.br, g.N);
  if (azr < 0 || bzc < 0 || asr < 0 || bsc < 0) {
    free(g.off);
    return cg_unsupported(c, n, "scale or zero point is neither one value nor one per row/column");
  }
  if (g.batch * g.M * g.N == 0) {
    free(g.off);
    return 0;
  }
  if (g.K == 0) { /* an empty sum: MatMulInteger gives 0, QLinearMatMul the zero point */
    free(g.off);
    return cg_unsupported(c, n, "empty inner dimension");
  }
  const char *prm = cg_static(c, "mg_qmatmul_params", "{%lld, %lld, %lld, %s, %s, %d, %d, %d, %d, %s}",
                              (long long)g.M, (long long)g.N, (long long)g.K, cg_rt_dtype(a->dtype),
                              cg_rt_dtype(b->dtype), azr, bzc, asr, bsc, cg_rt_dtype(q ? yzp->dtype : MG_U8));
  const char *aoff = cg_i64s(c, g.off, (int)g.batch), *boff = cg_i64s(c, g.off + g.batch, (int)g.batch);
  free(g.off);
  need_quant(c);
  if (q)
    cg_line(c, "mg_qlinear_matmul(&%s, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);", prm,
            (long long)g.batch, cg_vin(c, a), aoff, cg_in(c, as), azp ? cg_vin(c, azp) : "NULL", cg_vin(c, b),
            boff, cg_in(c, bs), bzp ? cg_vin(c, bzp) : "NULL", cg_in(c, ys), cg_vin(c, yzp), cg_vout(c, y));
  else
    cg_line(c, "mg_matmul_integer(&%s, %lld, %s, %s, %s, %s, %s, %s, %s);", prm, (long long)g.batch,
            cg_vin(c, a), aoff, azp ? cg_vin(c, azp) : "NULL", cg_vin(c, b), boff,
            bzp ? cg_vin(c, bzp) : "NULL", cg_out(c, y));
  return 0;
}

int cg_emit_MatMulInteger(cg_ctx *c, const mg_node *n) { return emit_qmatmul(c, n, 0); }
int cg_emit_QLinearMatMul(cg_ctx *c, const mg_node *n) { return emit_qmatmul(c, n, 1); }

/* ------------------------------------------------ integer convolutions */

/* ConvInteger and QLinearConv (q), 1-D and 2-D. */
static int emit_qconv(cg_ctx *c, const mg_node *n, int q) {
  const mg_value *x = n->in[0], *w = n->in[q ? 3 : 1], *y = n->out[0];
  const mg_value *xzp = opt_in(n, 2), *wzp = opt_in(n, q ? 5 : 3);
  const mg_value *xs = q ? n->in[1] : NULL, *ws = q ? n->in[4] : NULL;
  const mg_value *ys = q ? n->in[6] : NULL, *yzp = q ? n->in[7] : NULL, *bias = q ? opt_in(n, 8) : NULL;
  int64_t xd[MG_MAX_RANK], wd[MG_MAX_RANK], yd[MG_MAX_RANK], G = mg_attr_int(n, "group", 1);
  int64_t in[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, dl[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0}, o[2] = {1, 1};
  if (!x || !w || !y || (q && (!xs || !ws || !ys || !yzp || !xzp))) return cg_unsupported(c, n, "missing input");
  if (!is_q8(x->dtype) || !is_q8(w->dtype)) return cg_unsupported(c, n, "X and W must be uint8 or int8");
  if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype))
    return cg_unsupported(c, n, "zero point dtype differs from its operand's");
  if (q && (xs->dtype != MG_F32 || ws->dtype != MG_F32 || ys->dtype != MG_F32))
    return cg_unsupported(c, n, "scales must be float32");
  if (q && (!is_q8(yzp->dtype) || cg_numel(yzp) != 1 || cg_numel(ys) != 1 || cg_numel(xs) != 1))
    return cg_unsupported(c, n, "x_scale, y_scale and y_zero_point must be one value");
  if (bias && bias->dtype != MG_I32) return cg_unsupported(c, n, "B must be int32");
  if (y->dtype != (q ? yzp->dtype : MG_I32)) return cg_unsupported(c, n, "output dtype %s", mg_dtype_name(y->dtype));
  const int xr = cg_dims(x, xd), wr = cg_dims(w, wd), nd = xr - 2;
  if (xr < 3 || xr > 4 || wr != xr) return cg_unsupported(c, n, "X and W must both be 3-D or 4-D");
  const int64_t M = wd[0];
  if (G < 1 || xd[1] % G || wd[1] * G != xd[1] || M % G)
    return cg_unsupported(c, n, "channels do not match group %lld", (long long)G);
  if (xzp && cg_numel(xzp) != 1) return cg_unsupported(c, n, "x_zero_point must be one value");
  const int wzc = wzp && cg_numel(wzp) != 1, wsc = q && cg_numel(ws) != 1;
  if ((wzc && cg_numel(wzp) != M) || (wsc && cg_numel(ws) != M))
    return cg_unsupported(c, n, "w scale or zero point is neither one value nor one per output channel");
  if (bias && cg_numel(bias) != M) return cg_unsupported(c, n, "B must have M values");
  nn_window win;
  if (nn_check_kernel_shape(c, n, nd, wd + 2)) return -1;
  if (nn_window_init(c, n, nd, xd + 2, wd + 2, 0, &win)) return -1;
  for (int i = 0; i < nd; i++) { /* a 1-D convolution is the second of two dims */
    const int j = 2 - nd + i;
    in[j] = win.in[i], k[j] = win.k[i], s[j] = win.s[i], dl[j] = win.d[i];
    pb[j] = win.pb[i], pe[j] = win.pe[i], o[j] = win.out[i];
  }
  if (cg_dims(y, yd) != xr || yd[0] != xd[0] || yd[1] != M || yd[2] != o[2 - nd] || (nd == 2 && yd[3] != o[1]))
    return cg_unsupported(c, n, "output shape differs from the computed one");
  if (cg_numel(x) > INT32_MAX / 2 || cg_numel(w) > INT32_MAX / 2 || cg_numel(y) > INT32_MAX / 2)
    return cg_unsupported(c, n, "tensor too large");
  if (cg_numel(y) == 0) return 0;
  const char *prm = cg_static(c, "mg_qconv2d_params",
                              "{%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                              "%lld, %lld, %lld, %lld, %lld, %s, %s, %d, %d, %s}",
                              (long long)xd[0], (long long)xd[1], (long long)in[0], (long long)in[1], (long long)M,
                              (long long)k[0], (long long)k[1], (long long)G, (long long)s[0], (long long)s[1],
                              (long long)dl[0], (long long)dl[1], (long long)pb[0], (long long)pb[1],
                              (long long)pe[0], (long long)pe[1], (long long)o[0], (long long)o[1],
                              cg_rt_dtype(x->dtype), cg_rt_dtype(w->dtype), wzc, wsc,
                              cg_rt_dtype(q ? yzp->dtype : MG_U8));
  need_quant(c);
  if (q)
    cg_line(c, "mg_qlinear_conv(&%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);", prm, cg_vin(c, x), cg_in(c, xs),
            cg_vin(c, xzp), cg_vin(c, w), cg_in(c, ws), wzp ? cg_vin(c, wzp) : "NULL", cg_in(c, ys),
            cg_vin(c, yzp), bias ? cg_in(c, bias) : "NULL", cg_vout(c, y));
  else
    cg_line(c, "mg_conv_integer(&%s, %s, %s, %s, %s, %s);", prm, cg_vin(c, x), xzp ? cg_vin(c, xzp) : "NULL",
            cg_vin(c, w), wzp ? cg_vin(c, wzp) : "NULL", cg_out(c, y));
  return 0;
}

int cg_emit_ConvInteger(cg_ctx *c, const mg_node *n) { return emit_qconv(c, n, 0); }
int cg_emit_QLinearConv(cg_ctx *c, const mg_node *n) { return emit_qconv(c, n, 1); }
