/* C emitters for what c_nn.c hands over (runtime/conv_nd.c; contract in cg.h):
 * Conv, ConvTranspose and the windowed pools over 3 or more spatial dims, MaxPool
 * of non-float32 dtypes or with its Indices output (any rank), and MaxUnpool.
 * As in c_nn.c, the geometry is computed here once and checked against the shape
 * inference gave the output; a disagreement is reported, never emitted. */
#include "c_nn3d.h"
#include "c_nn_util.h"

#include <stdlib.h>
#include <string.h>

typedef nn_window winnd;

/* Checks that y is [N, M, out...] and fits int; -1 after reporting. */
static int check_out(cg_ctx *c, const mg_node *n, const mg_value *y, int64_t N, int64_t M,
                     const winnd *g) {
  int64_t yd[MG_MAX_RANK];
  int r = cg_dims(y, yd), i;
  if (r != g->nd + 2 || yd[0] != N || yd[1] != M)
    return cg_unsupported(c, n, "output shape differs from the computed one");
  for (i = 0; i < g->nd; i++)
    if (yd[2 + i] != g->out[i]) return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(y))) return cg_unsupported(c, n, "tensor too large");
  return 0;
}

/* "{a, b, ...}" of MG_ND_MAX values (v[0..nd), zeros after) into buf (256 chars). */
static const char *arr(char *buf, const int64_t *v, int nd) {
  size_t used = 0;
  int i;
  for (i = 0; i < MG_ND_MAX; i++)
    used += (size_t)snprintf(buf + used, 256 - used, "%s%lld", i ? ", " : "{",
                             (long long)(i < nd ? v[i] : 0));
  snprintf(buf + used, 256 - used, "}");
  return buf;
}

/* The shared initialiser of mg_convnd_params from a window. */
static const char *conv_static(cg_ctx *c, const winnd *g, int64_t N, int64_t C, int64_t M,
                               int64_t G, const cg_act *act) {
  char a[6][256], fa[40], fb[40];
  return cg_static(c, "mg_convnd_params", "{%d, %lld, %lld, %lld, %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s}",
                   g->nd, (long long)N, (long long)C, (long long)M, (long long)G, arr(a[0], g->in, g->nd),
                   arr(a[1], g->k, g->nd), arr(a[2], g->s, g->nd), arr(a[3], g->d, g->nd),
                   arr(a[4], g->pb, g->nd), arr(a[5], g->out, g->nd), act->act,
                   nn_flit(fa, act->a), nn_flit(fb, act->b));
}

int nd_emit_conv(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  int64_t xd[MG_MAX_RANK], wd[MG_MAX_RANK], G = mg_attr_int(n, "group", 1);
  int xr, wr;
  winnd g;
  cg_act act;
  const char *prm;
  if (!nn_is_f32(x) || !nn_is_f32(w) || !nn_is_f32(y) || (b && !nn_is_f32(b)))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  xr = cg_dims(x, xd);
  wr = cg_dims(w, wd);
  if (xr < 3 || wr != xr) return cg_unsupported(c, n, "X and W must have the same rank >= 3");
  if (G < 1 || xd[1] % G || wd[1] * G != xd[1] || wd[0] % G)
    return cg_unsupported(c, n, "channels do not match group %lld", (long long)G);
  if (b && cg_numel(b) != wd[0]) return cg_unsupported(c, n, "B must have M values");
  if (nn_check_kernel_shape(c, n, xr - 2, wd + 2)) return -1;
  if (nn_window_init(c, n, xr - 2, xd + 2, wd + 2, 0, &g)) return -1;
  if (check_out(c, n, y, xd[0], wd[0], &g)) return -1;
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(w)) || !nn_fits_int(cg_numel(w) / wd[0] * cg_numel(y)))
    return cg_unsupported(c, n, "tensor too large");
  cg_fused_act(c, n, &act);
  prm = conv_static(c, &g, xd[0], xd[1], wd[0], G, &act);
  nn_need(c, "conv_nd.c");
  cg_line(c, "mg_convnd(&%s, %s, %s, %s, %s, %s);", prm, cg_in(c, x), cg_in(c, w),
          b ? cg_in(c, b) : "NULL", cg_out(c, y), cg_scratch(c, "mg_convnd_scratch(&%s)", prm));
  return 0;
}

int nd_emit_conv_transpose(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0];
  int64_t xd[MG_MAX_RANK], wd[MG_MAX_RANK], G = mg_attr_int(n, "group", 1), M;
  int xr, wr, nd;
  winnd g;
  cg_act none = {"MG_ACT_NONE", 0.0f, 0.0f};
  const char *prm;
  if (!nn_is_f32(x) || !nn_is_f32(w) || !nn_is_f32(y) || (b && !nn_is_f32(b)))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  xr = cg_dims(x, xd);
  wr = cg_dims(w, wd);
  if (xr < 3 || wr != xr) return cg_unsupported(c, n, "X and W must have the same rank >= 3");
  nd = xr - 2;
  if (nd > MG_ND_MAX) return cg_unsupported(c, n, "%d spatial dimensions", nd);
  if (G < 1 || xd[1] % G || wd[0] != xd[1])
    return cg_unsupported(c, n, "channels do not match group %lld", (long long)G);
  M = wd[1] * G;
  if (b && cg_numel(b) != M) return cg_unsupported(c, n, "B must have M values");
  if (nn_check_kernel_shape(c, n, nd, wd + 2)) return -1;
  if (nn_transpose_window(c, n, nd, xd + 2, wd + 2, &g)) return -1;
  if (check_out(c, n, y, xd[0], M, &g)) return -1;
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(w)) ||
      !nn_fits_int(cg_numel(w) / (xd[1] / G) * (cg_numel(x) / (xd[0] * xd[1]))))
    return cg_unsupported(c, n, "tensor too large");
  prm = conv_static(c, &g, xd[0], xd[1], M, G, &none);
  nn_need(c, "conv_nd.c");
  cg_line(c, "mg_conv_transpose_nd(&%s, %s, %s, %s, %s, %s);", prm, cg_in(c, x), cg_in(c, w),
          b ? cg_in(c, b) : "NULL", cg_out(c, y),
          cg_scratch(c, "mg_conv_transpose_nd_scratch(&%s)", prm));
  return 0;
}

int nd_emit_pool(cg_ctx *c, const mg_node *n, int kind) {
  const mg_value *x = n->in[0], *y = n->out[0];
  const mg_value *ind = kind == ND_POOL_MAX && n->n_out > 1 ? n->out[1] : NULL;
  int64_t xd[MG_MAX_RANK], p = kind == ND_POOL_LP ? mg_attr_int(n, "p", 2) : 2;
  int64_t order = kind == ND_POOL_MAX ? mg_attr_int(n, "storage_order", 0) : 0;
  const int64_t *ks;
  int xr, nd;
  winnd g;
  char a[7][256], fp[40];
  const char *prm, *rt;
  if (!x || !y || x->dtype != y->dtype) return cg_unsupported(c, n, "X and Y must share a dtype");
  rt = cg_rt_dtype(x->dtype);
  if (kind == ND_POOL_MAX) {
    if (!rt || x->dtype == MG_BOOL) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  } else if (!nn_is_f32(x)) {
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  }
  if (ind && ind->dtype != MG_I64) return cg_unsupported(c, n, "Indices must be int64");
  if (order != 0 && order != 1) return cg_unsupported(c, n, "storage_order %lld", (long long)order);
  xr = cg_dims(x, xd);
  nd = xr - 2;
  if (xr < 3) return cg_unsupported(c, n, "input rank %d", xr);
  if (mg_attr_ints(n, "kernel_shape", &ks) != (size_t)nd)
    return cg_unsupported(c, n, "kernel_shape must have %d values", nd);
  if (kind == ND_POOL_LP && (p < 1 || p > 64)) return cg_unsupported(c, n, "p = %lld", (long long)p);
  if (nn_window_init(c, n, nd, xd + 2, ks, (int)mg_attr_int(n, "ceil_mode", 0), &g)) return -1;
  if (check_out(c, n, y, xd[0], xd[1], &g)) return -1;
  if (ind && cg_numel(ind) != cg_numel(y)) return cg_unsupported(c, n, "Indices shape differs from Y");
  if (!nn_fits_int(cg_numel(x))) return cg_unsupported(c, n, "tensor too large");
  prm = cg_static(c, "mg_poolnd_params", "{%d, %lld, %s, %s, %s, %s, %s, %s, %s, %d, %s}", nd,
                  (long long)(xd[0] * xd[1]), arr(a[0], g.in, nd), arr(a[1], g.k, nd),
                  arr(a[2], g.s, nd), arr(a[3], g.d, nd), arr(a[4], g.pb, nd), arr(a[5], g.pe, nd),
                  arr(a[6], g.out, nd),
                  kind == ND_POOL_AVG ? (int)(mg_attr_int(n, "count_include_pad", 0) != 0) : 0,
                  nn_flit(fp, (float)p));
  nn_need(c, "conv_nd.c");
  if (kind == ND_POOL_MAX && (ind || x->dtype != MG_F32))
    cg_line(c, "mg_maxpool_nd_any(&%s, %s, %s, %s, %s, %d);", prm, rt, cg_vin(c, x), cg_vout(c, y),
            ind ? cg_out(c, ind) : "NULL", (int)order);
  else
    cg_line(c, "%s(&%s, %s, %s);",
            kind == ND_POOL_MAX ? "mg_maxpool_nd" : kind == ND_POOL_AVG ? "mg_avgpool_nd" : "mg_lppool_nd",
            prm, cg_in(c, x), cg_out(c, y));
  return 0;
}

int cg_emit_MaxUnpool(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *ix = n->in[1], *y = n->out[0];
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK], id[MG_MAX_RANK], ys[MG_MAX_RANK];
  const int64_t *ks, *st, *pd;
  size_t nk, ns, np;
  int xr, nd, i;
  if (!x || !ix || !y || x->dtype != y->dtype || !cg_rt_dtype(x->dtype))
    return cg_unsupported(c, n, "dtype %s", x ? mg_dtype_name(x->dtype) : "?");
  if (ix->dtype != MG_I64) return cg_unsupported(c, n, "I must be int64");
  xr = cg_dims(x, xd);
  nd = xr - 2;
  if (xr < 3 || cg_numel(ix) != cg_numel(x)) return cg_unsupported(c, n, "X and I must match, rank >= 3");
  nk = mg_attr_ints(n, "kernel_shape", &ks);
  ns = mg_attr_ints(n, "strides", &st);
  np = mg_attr_ints(n, "pads", &pd);
  if (nk != (size_t)nd || (ns && ns != (size_t)nd) || (np && np != 2 * (size_t)nd))
    return cg_unsupported(c, n, "kernel_shape, strides or pads do not match %d spatial dims", nd);
  id[0] = xd[0], id[1] = xd[1];
  for (i = 0; i < nd; i++) {
    const int64_t s = ns ? st[i] : 1, pb = np ? pd[i] : 0, pe = np ? pd[i + nd] : 0;
    if (s < 1 || ks[i] < 1 || pb < 0 || pe < 0 || s > (1 << 20) || ks[i] > (1 << 20) ||
        pb > (1 << 20) || pe > (1 << 20))
      return cg_unsupported(c, n, "kernel_shape, strides or pads out of range");
    id[2 + i] = (xd[2 + i] - 1) * s + ks[i] - pb - pe;
    if (id[2 + i] < 1) return cg_unsupported(c, n, "the unpooled shape is empty");
  }
  /* with output_shape, the unpooled block sits at the start of a larger output */
  if (cg_dims(y, yd) != xr) return cg_unsupported(c, n, "output rank differs from X");
  for (i = 0; i < xr; i++)
    if (yd[i] < id[i] || (i < 2 && yd[i] != id[i]) || (!(n->n_in > 2 && n->in[2]) && yd[i] != id[i]))
      return cg_unsupported(c, n, "output shape differs from the unpooled one");
  ys[xr - 1] = 1;
  for (i = xr - 2; i >= 0; i--) ys[i] = ys[i + 1] * yd[i + 1];
  nn_need(c, "conv_nd.c");
  cg_line(c, "mg_maxunpool(%d, %s, %s, %lld, %zu, %s, %s, %s, %zu);", xr, cg_i64s(c, id, xr),
          cg_i64s(c, ys, xr), (long long)cg_numel(x), mg_dtype_size(x->dtype), cg_vin(c, x),
          cg_in(c, ix), cg_vout(c, y), (size_t)cg_numel(y) * mg_dtype_size(x->dtype));
  return 0;
}
