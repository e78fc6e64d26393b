/* VJPs of the neural-network ops: Conv (groups, strides, pads, dilations, auto_pad;
 * im2col and the double GEMM, as the forward kernel), the pools, and the
 * normalisations (BatchNormalization in inference form with gradients to every
 * input, LayerNormalization, GroupNormalization, InstanceNormalization).
 *
 * The window geometry is the forward op's (core/window_geom.h), with the output
 * sizes taken from the forward output (which fixes ceil_mode's rounding). */
#include "vjp.h"
#include "interp_nn.h"
#include "window_geom.h"
#include <math.h>
#include <string.h>

enum { SP = 3 }; /* spatial dims as computed: 1-D and 2-D gain leading unit dims */

typedef struct {
  int64_t in[SP], out[SP], k[SP], s[SP], d[SP], pb[SP], pe[SP];
} window;

/* The window of node n over x (rank >= 3) producing y, kernel k[nd]: the pads as
 * core/window_geom.h computes them for the forward op, the output sizes y's. */
static int window_init(const vjp_args *a, const mg_array *x, const mg_array *y, const int64_t *k,
                       window *w) {
  const mg_node *n = a->n;
  int nd = x->rank - 2;
  if (nd < 1 || nd > SP || y->rank != x->rank) return vjp_unsupported(a, "%d spatial dimensions", nd);
  /* the forward op has checked the attributes against its own limits */
  const mg_win_limits any = {INT64_MAX, INT64_MAX};
  mg_window g;
  mg_win_status st = mg_window_init(n, nd, x->dims + 2, k, 0, &any, &g);
  if (st == MG_WIN_AUTO_PAD) return vjp_unsupported(a, "auto_pad '%s'", mg_attr_str(n, "auto_pad", "NOTSET"));
  if (st != MG_WIN_OK) return vjp_fail(a, "the window does not fit the input");
  for (int j = 0; j < SP; j++) w->in[j] = w->out[j] = w->k[j] = w->s[j] = w->d[j] = 1, w->pb[j] = w->pe[j] = 0;
  for (int i = 0, j = SP - nd; i < nd; i++, j++) {
    w->in[j] = g.in[i], w->out[j] = y->dims[2 + i], w->k[j] = g.k[i];
    w->s[j] = g.s[i], w->d[j] = g.d[i], w->pb[j] = g.pb[i], w->pe[j] = g.pe[i];
  }
  return 0;
}

static int64_t prod3(const int64_t *v) { return v[0] * v[1] * v[2]; }

static int nn_oom(const vjp_args *a) {
  mg_error(a->d, OOM, a->n->name, a->n->op_type, "out of memory");
  return -1;
}

/* Conv: per batch row and group, gW += gY cols^T and gX += col2im(W^T gY), with
 * cols the im2col of X (stored transposed: one row per output position). */
static int conv(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  const mg_array *X = a->x[0], *W = a->x[1], *Y = a->y[0];
  double *gb = a->n->n_in > 2 && a->x[2] ? a->gx[2] : NULL;
  window g;
  if (window_init(a, X, Y, W->dims + 2, &g)) return -1;
  int64_t N = X->dims[0], C = X->dims[1], M = W->dims[0], Cg = W->dims[1], G = mg_attr_int(a->n, "group", 1);
  if (G < 1 || C != Cg * G || M % G) return vjp_fail(a, "channels do not match group");
  int64_t is = prod3(g.in), os = prod3(g.out), ks = prod3(g.k), K = Cg * ks, Mg = M / G;
  const double *gy = a->gy[0];
  for (int64_t b = 0; gb && b < N; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t o = 0; o < os; o++) gb[m] += gy[(b * M + m) * os + o];
  if (!a->gx[0] && !a->gx[1]) return 0;
  double *x = a->gx[1] ? vjp_f64(a, X) : NULL, *w = vjp_f64(a, W);
  double *cols = vjp_zeros(a, K * os), *wt = vjp_zeros(a, K * Mg);
  int rc = (a->gx[1] && !x) || !w || !cols || !wt ? -1 : 0;
  for (int64_t b = 0; b < N && !rc; b++)
    for (int64_t gi = 0; gi < G && !rc; gi++) {
      const double *gyg = gy + (b * M + gi * Mg) * os;
      if (a->gx[1]) { /* colsT[o][ch*ks + t] = x at the tap, 0 in the padding */
        const double *xg = x + (b * C + gi * Cg) * is;
        for (int64_t ch = 0; ch < Cg; ch++)
          for (int64_t kz = 0, t = 0; kz < g.k[0]; kz++)
            for (int64_t ky = 0; ky < g.k[1]; ky++)
              for (int64_t kx = 0; kx < g.k[2]; kx++, t++)
                for (int64_t oz = 0, o = 0; oz < g.out[0]; oz++) {
                  int64_t iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
                  for (int64_t oy = 0; oy < g.out[1]; oy++) {
                    int64_t iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
                    int row_in = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1];
                    const double *src = row_in ? xg + ch * is + (iz * g.in[1] + iy) * g.in[2] : xg;
                    for (int64_t ox = 0; ox < g.out[2]; ox++, o++) {
                      int64_t ix = ox * g.s[2] - g.pb[2] + kx * g.d[2];
                      cols[o * K + ch * ks + t] = row_in && ix >= 0 && ix < g.in[2] ? src[ix] : 0;
                    }
                  }
                }
        if (nn_gemm(Mg, K, os, gyg, os, cols, K, a->gx[1] + gi * Mg * K, K)) rc = nn_oom(a);
      }
      if (a->gx[0] && !rc) { /* dcols[K][os] = W_g^T gY_g, then scattered back */
        const double *wg = w + gi * Mg * K;
        for (int64_t m = 0; m < Mg; m++)
          for (int64_t p = 0; p < K; p++) wt[p * Mg + m] = wg[m * K + p];
        memset(cols, 0, sizeof(double) * (size_t)(K * os));
        if (nn_gemm(K, os, Mg, wt, Mg, gyg, os, cols, os)) {
          rc = nn_oom(a);
          break;
        }
        double *gxg = a->gx[0] + (b * C + gi * Cg) * is;
        for (int64_t ch = 0; ch < Cg; ch++)
          for (int64_t kz = 0, t = 0; kz < g.k[0]; kz++)
            for (int64_t ky = 0; ky < g.k[1]; ky++)
              for (int64_t kx = 0; kx < g.k[2]; kx++, t++) {
                const double *row = cols + (ch * ks + t) * os;
                for (int64_t oz = 0, o = 0; oz < g.out[0]; oz++) {
                  int64_t iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
                  for (int64_t oy = 0; oy < g.out[1]; oy++, o += g.out[2]) {
                    int64_t iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
                    if (iz < 0 || iz >= g.in[0] || iy < 0 || iy >= g.in[1]) continue;
                    double *dst = gxg + ch * is + (iz * g.in[1] + iy) * g.in[2];
                    for (int64_t ox = 0; ox < g.out[2]; ox++) {
                      int64_t ix = ox * g.s[2] - g.pb[2] + kx * g.d[2];
                      if (ix >= 0 && ix < g.in[2]) dst[ix] += row[o + ox];
                    }
                  }
                }
              }
      }
    }
  mg_free(x), mg_free(w), mg_free(cols), mg_free(wt);
  return rc;
}

/* MaxPool (to the first maximum of each window, as the forward picks it) and
 * AveragePool (each counted tap gets 1/count). */
static int pool(const vjp_args *a) {
  if (!a->gy[0] || !a->gx[0]) return 0;
  const mg_array *X = a->x[0], *Y = a->y[0];
  const int64_t *ks;
  if (mg_attr_ints(a->n, "kernel_shape", &ks) != (size_t)(X->rank - 2)) return vjp_fail(a, "kernel_shape");
  window g;
  if (window_init(a, X, Y, ks, &g)) return -1;
  int is_max = a->n->op == MG_OP_MaxPool;
  int include_pad = a->n->op == MG_OP_AveragePool && mg_attr_int(a->n, "count_include_pad", 0);
  int64_t planes = X->dims[0] * X->dims[1], is = prod3(g.in), os = prod3(g.out);
  double *x = vjp_f64(a, X);
  if (!x) return -1;
  for (int64_t pl = 0; pl < planes; pl++) {
    const double *xp = x + pl * is;
    double *gp = a->gx[0] + pl * is;
    for (int64_t oz = 0, o = pl * os; oz < g.out[0]; oz++)
      for (int64_t oy = 0; oy < g.out[1]; oy++)
        for (int64_t ox = 0; ox < g.out[2]; ox++, o++) {
          double best_v = -INFINITY;
          int64_t best = -1, cnt = 0;
          for (int pass = 0; pass < 2; pass++)
            for (int64_t kz = 0; kz < g.k[0]; kz++) {
              int64_t iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
              for (int64_t ky = 0; ky < g.k[1]; ky++) {
                int64_t iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
                for (int64_t kx = 0; kx < g.k[2]; kx++) {
                  int64_t ix = ox * g.s[2] - g.pb[2] + kx * g.d[2];
                  int inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
                  if (pass == 0 && include_pad && iz < g.in[0] + g.pe[0] && iy < g.in[1] + g.pe[1] &&
                      ix < g.in[2] + g.pe[2])
                    cnt++;
                  if (!inside) continue;
                  int64_t at = (iz * g.in[1] + iy) * g.in[2] + ix;
                  if (pass == 0) {
                    if (is_max && (xp[at] > best_v || best < 0)) best_v = xp[at], best = at;
                    if (!include_pad) cnt++;
                  } else if (!is_max && cnt) {
                    gp[at] += a->gy[0][o] / (double)cnt;
                  }
                }
              }
            }
          if (is_max && best >= 0) gp[best] += a->gy[0][o];
        }
  }
  mg_free(x);
  return 0;
}

/* GlobalAveragePool (spread evenly) and GlobalMaxPool (to the first maximum). */
static int global_pool(const vjp_args *a) {
  if (!a->gy[0] || !a->gx[0]) return 0;
  const mg_array *X = a->x[0];
  int64_t planes = X->dims[0] * X->dims[1], sp = 1;
  for (int d = 2; d < X->rank; d++) sp *= X->dims[d];
  double *x = a->n->op == MG_OP_GlobalMaxPool ? vjp_f64(a, X) : NULL;
  if (a->n->op == MG_OP_GlobalMaxPool && !x) return -1;
  for (int64_t pl = 0; pl < planes; pl++) {
    double g = a->gy[0][pl];
    if (!x) {
      for (int64_t i = 0; i < sp; i++) a->gx[0][pl * sp + i] += g / (double)sp;
      continue;
    }
    int64_t best = 0;
    for (int64_t i = 1; i < sp; i++)
      if (x[pl * sp + i] > x[pl * sp + best]) best = i;
    a->gx[0][pl * sp + best] += g;
  }
  mg_free(x);
  return 0;
}

/* BatchNormalization, inference form: y = (x - mean) / sqrt(var + eps) * scale + B;
 * every input may want a gradient (mean and var are buffers in torch, but the
 * function is differentiable in them). */
static int batch_norm(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  if (mg_attr_int(a->n, "training_mode", 0)) return vjp_unsupported(a, "training_mode=1");
  for (int o = 1; o < a->n->n_out; o++)
    if (a->gy[o]) return vjp_unsupported(a, "a cotangent on the running statistics");
  const mg_array *X = a->x[0];
  int64_t N = X->dims[0], C = X->dims[1], sp = it_numel(X) / (N * C > 0 ? N * C : 1);
  double eps = mg_attr_float(a->n, "epsilon", 1e-5f);
  double *x = vjp_f64(a, X), *s = vjp_f64(a, a->x[1]), *mu = vjp_f64(a, a->x[3]), *var = vjp_f64(a, a->x[4]);
  int rc = x && s && mu && var ? 0 : -1;
  for (int64_t ch = 0; ch < C && !rc; ch++) {
    double inv = 1 / sqrt(var[ch] + eps), sg = 0, sgx = 0;
    for (int64_t i = 0; i < N; i++) {
      const double *g = a->gy[0] + (i * C + ch) * sp, *xp = x + (i * C + ch) * sp;
      double *gx = a->gx[0] ? a->gx[0] + (i * C + ch) * sp : NULL;
      for (int64_t j = 0; j < sp; j++) {
        sg += g[j];
        sgx += g[j] * (xp[j] - mu[ch]);
        if (gx) gx[j] += g[j] * s[ch] * inv;
      }
    }
    if (a->gx[1]) a->gx[1][ch] += sgx * inv;
    if (a->gx[2]) a->gx[2][ch] += sg;
    if (a->gx[3]) a->gx[3][ch] -= sg * s[ch] * inv;
    if (a->gx[4]) a->gx[4][ch] += -0.5 * sgx * s[ch] * inv * inv * inv;
  }
  mg_free(x), mg_free(s), mg_free(mu), mg_free(var);
  return rc;
}

/* LayerNormalization over dims [axis, rank), Scale and B broadcast to them. */
static int layer_norm(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  for (int o = 1; o < a->n->n_out; o++)
    if (a->gy[o]) return vjp_unsupported(a, "a cotangent on Mean or InvStdDev");
  const mg_array *X = a->x[0], *S = a->x[1], *B = a->n->n_in > 2 ? a->x[2] : NULL;
  int64_t axis = mg_attr_int(a->n, "axis", -1);
  if (axis < 0) axis += X->rank;
  if (axis < 0 || axis >= X->rank) return vjp_fail(a, "axis out of range");
  mg_array norm = {.rank = X->rank - (int)axis};
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= X->dims[d];
  for (int d = 0; d < norm.rank; d++) inner *= (norm.dims[d] = X->dims[axis + d]);
  double eps = mg_attr_float(a->n, "epsilon", 1e-5f);
  double *x = vjp_f64(a, X), *sv = NULL, *gz = vjp_zeros(a, inner), *gs = vjp_zeros(a, inner);
  double *gbias = vjp_zeros(a, inner);
  /* Scale read at every position of the normalised shape */
  double *sfull = vjp_zeros(a, inner);
  int rc = x && gz && gs && gbias && sfull ? 0 : -1;
  if (!rc) {
    int64_t st[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0}, off = 0;
    if (!(sv = vjp_f64(a, S))) rc = -1;
    it_bcast_strides(S, norm.rank, norm.dims, st);
    for (int64_t i = 0; i < inner && !rc; i++) {
      sfull[i] = sv[off];
      for (int d = norm.rank - 1; d >= 0; d--) {
        coord[d]++, off += st[d];
        if (coord[d] < norm.dims[d]) break;
        off -= st[d] * norm.dims[d], coord[d] = 0;
      }
    }
  }
  for (int64_t r = 0; r < outer && !rc; r++) {
    const double *xr = x + r * inner, *g = a->gy[0] + r * inner;
    double mu = 0, sq = 0, mg = 0, mgx = 0;
    for (int64_t i = 0; i < inner; i++) mu += xr[i];
    mu /= (double)inner;
    for (int64_t i = 0; i < inner; i++) sq += (xr[i] - mu) * (xr[i] - mu);
    double inv = 1 / sqrt(sq / (double)inner + eps);
    for (int64_t i = 0; i < inner; i++) {
      double xh = (xr[i] - mu) * inv;
      gz[i] = g[i] * sfull[i];
      mg += gz[i], mgx += gz[i] * xh;
      gs[i] += g[i] * xh, gbias[i] += g[i];
    }
    mg /= (double)inner, mgx /= (double)inner;
    if (a->gx[0])
      for (int64_t i = 0; i < inner; i++) a->gx[0][r * inner + i] += inv * (gz[i] - mg - (xr[i] - mu) * inv * mgx);
  }
  if (!rc && a->gx[1]) vjp_unbroadcast_add(a->gx[1], S, gs, &norm);
  if (!rc && B && a->gx[2]) vjp_unbroadcast_add(a->gx[2], B, gbias, &norm);
  mg_free(x), mg_free(sv), mg_free(gz), mg_free(gs), mg_free(gbias), mg_free(sfull);
  return rc;
}

/* GroupNormalization and InstanceNormalization: runs of C/G channels x spatial per
 * sample; scale and bias per channel (or per group for opset-18 GroupNormalization). */
static int group_norm(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  const mg_array *X = a->x[0], *S = a->x[1];
  int64_t N = X->dims[0], C = X->dims[1], sp = 1;
  for (int d = 2; d < X->rank; d++) sp *= X->dims[d];
  int64_t G = a->n->op == MG_OP_GroupNormalization ? mg_attr_int(a->n, "num_groups", 0) : C;
  if (G < 1 || C % G) return vjp_fail(a, "num_groups does not divide the channels");
  int64_t ns = it_numel(S), cpg = C / G, len = cpg * sp;
  double eps = mg_attr_float(a->n, "epsilon", 1e-5f);
  double *x = vjp_f64(a, X), *s = vjp_f64(a, S), *gz = vjp_zeros(a, len);
  int rc = x && s && gz ? 0 : -1;
  for (int64_t run = 0; run < N * G && !rc; run++) {
    const double *xr = x + run * len, *g = a->gy[0] + run * len;
    double mu = 0, sq = 0, mg = 0, mgx = 0;
    for (int64_t i = 0; i < len; i++) mu += xr[i];
    mu /= (double)len;
    for (int64_t i = 0; i < len; i++) sq += (xr[i] - mu) * (xr[i] - mu);
    double inv = 1 / sqrt(sq / (double)len + eps);
    for (int64_t i = 0; i < len; i++) {
      int64_t ch = run % G * cpg + i / sp, k = ns == C ? ch : ch / cpg;
      double xh = (xr[i] - mu) * inv;
      gz[i] = g[i] * s[k];
      mg += gz[i], mgx += gz[i] * xh;
      if (a->gx[1]) a->gx[1][k] += g[i] * xh;
      if (a->gx[2]) a->gx[2][k] += g[i];
    }
    mg /= (double)len, mgx /= (double)len;
    if (a->gx[0])
      for (int64_t i = 0; i < len; i++) a->gx[0][run * len + i] += inv * (gz[i] - mg - (xr[i] - mu) * inv * mgx);
  }
  mg_free(x), mg_free(s), mg_free(gz);
  return rc;
}

/* The nn family's entry point (vjp.h). */
int vjp_nn(const vjp_args *a) {
  switch (a->n->op) {
  case MG_OP_Conv: return conv(a);
  case MG_OP_MaxPool: case MG_OP_AveragePool: return pool(a);
  case MG_OP_GlobalAveragePool: case MG_OP_GlobalMaxPool: return global_pool(a);
  case MG_OP_BatchNormalization: return batch_norm(a);
  case MG_OP_LayerNormalization: return layer_norm(a);
  default: return group_norm(a);
  }
}
