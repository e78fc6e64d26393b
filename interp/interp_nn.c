/* Neural-network kernels: Conv and ConvTranspose (im2col / col2im around the
 * double matrix product nn_gemm), Col2Im, the pools (Average, Max with indices,
 * Lp, Global*, MaxUnpool) and the normalisations (Batch, Layer, Group, Instance).
 * Resize, GridSample, RoiAlign, MaxRoiPool and NonMaxSuppression are in
 * interp_resize.c. Spatial ranks 1 to 3 are supported; they are handled as 3-D
 * with leading unit dimensions. */
#include "interp_nn.h"
#include "window_geom.h"
#include <math.h>
#include <string.h>

/* Records an out-of-memory diagnostic for n; returns -1. */
static int oom(interp_ctx *c, const mg_node *n) {
  mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
  return -1;
}

/* A zeroed array of k doubles, or NULL (after a diagnostic) when too large or
 * out of memory. */
static double *dalloc(interp_ctx *c, const mg_node *n, int64_t k) {
  if (k < 0 || k > ((int64_t)1 << 37)) {
    it_fail(c, n, "intermediate of %lld elements is too large", (long long)k);
    return NULL;
  }
  double *p = mg_calloc((size_t)k + 1, sizeof(double));
  if (!p) oom(c, n);
  return p;
}

/* Floor and ceiling of a / b for b > 0. */
static int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }

/* ---- geometry ---- */

enum { SP = 3 }; /* spatial dims as computed: 1-D and 2-D gain leading unit dims */

/* A sliding window over the spatial dims: input (or column grid) sizes, kernel,
 * strides, dilations, begin and end pads, output (or image) sizes. */
typedef struct {
  int nd;
  int64_t in[SP], k[SP], s[SP], d[SP], pb[SP], pe[SP], out[SP];
} geom;

/* a * b * c, or -1 when an operand is negative or the product overflows. */
static int64_t mul3(int64_t a, int64_t b, int64_t c) {
  int64_t r;
  if (a < 0 || b < 0 || c < 0 || !mg_mul_i64(a, b, &r) || !mg_mul_i64(r, c, &r)) return -1;
  return r;
}

static int64_t prod3(const int64_t *v) { return mul3(v[0], v[1], v[2]); }

/* Bounds on window attributes, so that size arithmetic cannot overflow. */
#define WIN_LIMIT ((int64_t)1 << 20)
#define PAD_LIMIT ((int64_t)1 << 30)

static const mg_win_limits win_limits = {WIN_LIMIT, PAD_LIMIT};

/* Records the auto_pad diagnostic for n; returns -1. */
static int bad_auto_pad(interp_ctx *c, const mg_node *n) {
  mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "auto_pad '%s'", mg_attr_str(n, "auto_pad", "NOTSET"));
  return -1;
}

/* The shared window w right-aligned into g's SP slots (leading unit dims). */
static void geom_from(const mg_window *w, geom *g) {
  memset(g, 0, sizeof *g);
  g->nd = w->nd;
  for (int j = 0; j < SP; j++) g->in[j] = g->k[j] = g->s[j] = g->d[j] = g->out[j] = 1;
  for (int i = 0, j = SP - w->nd; i < w->nd; i++, j++) {
    g->in[j] = w->in[i], g->k[j] = w->k[i], g->s[j] = w->s[i], g->d[j] = w->d[i];
    g->pb[j] = w->pb[i], g->pe[j] = w->pe[i], g->out[j] = w->out[i];
  }
}

/* Reads n's strides, dilations, pads and auto_pad for nd spatial dims (input
 * sizes in, kernel k) and computes the output sizes (core/window_geom.h); ceil_mode
 * rounds them up as the pools do. Returns 0, or -1 after a diagnostic. */
static int geom_init(interp_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                     int ceil_mode, geom *g) {
  memset(g, 0, sizeof *g);
  if (nd < 1 || nd > SP) {
    mg_error(c->d, LIMIT, n->name, n->op_type, "%d spatial dimensions (1 to 3 are supported)", nd);
    return -1;
  }
  mg_window w;
  switch (mg_window_init(n, nd, in, k, ceil_mode, &win_limits, &w)) {
  case MG_WIN_OK: geom_from(&w, g); return 0;
  case MG_WIN_ATTR_LENGTH: return it_fail(c, n, "strides, dilations or pads do not match %d spatial dims", nd);
  case MG_WIN_AUTO_PAD: return bad_auto_pad(c, n);
  case MG_WIN_NOT_POSITIVE: return it_fail(c, n, "kernel, strides and dilations must be positive");
  case MG_WIN_TOO_LARGE:
    return it_fail(c, n, "kernel, strides or dilations exceed %lld", (long long)WIN_LIMIT);
  case MG_WIN_NEGATIVE_PAD: return it_fail(c, n, "negative pads are not supported");
  case MG_WIN_PAD_TOO_LARGE: return it_fail(c, n, "pads exceed %lld", (long long)PAD_LIMIT);
  case MG_WIN_EMPTY: break;
  }
  return it_fail(c, n, "the kernel is larger than the padded input");
}

/* The output index range [*lo, *hi) along one dim whose input position
 * o * s - pb + koff falls inside [0, len). */
static void valid_range(int64_t len, int64_t s, int64_t pb, int64_t koff, int64_t outlen, int64_t *lo,
                        int64_t *hi) {
  int64_t a = ceildiv(pb - koff, s), b = floordiv(len - 1 + pb - koff, s) + 1;
  *lo = a < 0 ? 0 : a > outlen ? outlen : a;
  *hi = b > outlen ? outlen : b < *lo ? *lo : b;
}

/* Chunking of the column buffers: at most about COL_BUDGET doubles at a time. */
#define COL_BUDGET ((int64_t)1 << 22)

/* The number of (z, y) rows of `width` positions to process per chunk when each
 * position takes k column values. */
static int64_t chunk_rows(int64_t k, int64_t width, int64_t rows) {
  int64_t per = k * (width > 0 ? width : 1), r = per > 0 ? COL_BUDGET / per : rows;
  return r < 1 ? 1 : r > rows ? rows : r;
}

/* im2col over the output rows [r0, r1) of the flattened (z, y) output grid:
 * cols[(ch * K + kernel offset) * W + (row - r0) * out_x + x], W = (r1 - r0) * out_x,
 * is x[ch] at the window tap, 0 in the padding, for ch in [0, cg); x holds cg
 * planes of prod(in) values. */
static void im2col(const geom *g, const double *x, int64_t cg, int64_t r0, int64_t r1, double *cols) {
  int64_t is = prod3(g->in), w = (r1 - r0) * g->out[2];
  double *row = cols;
  for (int64_t ch = 0; ch < cg; ch++) {
    const double *xc = x + ch * is;
    for (int64_t kz = 0; kz < g->k[0]; kz++)
      for (int64_t ky = 0; ky < g->k[1]; ky++)
        for (int64_t kx = 0; kx < g->k[2]; kx++, row += w) {
          int64_t lo, hi, s2 = g->s[2];
          valid_range(g->in[2], s2, g->pb[2], kx * g->d[2], g->out[2], &lo, &hi);
          for (int64_t t = r0; t < r1; t++) {
            int64_t iz = t / g->out[1] * g->s[0] - g->pb[0] + kz * g->d[0];
            int64_t iy = t % g->out[1] * g->s[1] - g->pb[1] + ky * g->d[1];
            double *r = row + (t - r0) * g->out[2];
            if (iz < 0 || iz >= g->in[0] || iy < 0 || iy >= g->in[1]) {
              memset(r, 0, sizeof(double) * (size_t)g->out[2]);
              continue;
            }
            const double *src = xc + (iz * g->in[1] + iy) * g->in[2] - g->pb[2] + kx * g->d[2];
            for (int64_t ox = 0; ox < lo; ox++) r[ox] = 0;
            if (s2 == 1) memcpy(r + lo, src + lo, sizeof(double) * (size_t)(hi - lo));
            else
              for (int64_t ox = lo; ox < hi; ox++) r[ox] = src[ox * s2];
            for (int64_t ox = hi; ox < g->out[2]; ox++) r[ox] = 0;
          }
        }
  }
}

/* The adjoint of im2col over the grid rows [r0, r1): img[ch] += cols at the window
 * taps for ch in [0, cg), with g->in the column grid and g->out the image (taps
 * outside are dropped); cols is laid out as im2col's. */
static void col2im(const geom *g, const double *cols, int64_t cg, int64_t r0, int64_t r1, double *img) {
  int64_t is = prod3(g->out), w = (r1 - r0) * g->in[2];
  const double *row = cols;
  for (int64_t ch = 0; ch < cg; ch++) {
    double *yc = img + ch * is;
    for (int64_t kz = 0; kz < g->k[0]; kz++)
      for (int64_t ky = 0; ky < g->k[1]; ky++)
        for (int64_t kx = 0; kx < g->k[2]; kx++, row += w) {
          int64_t lo, hi, s2 = g->s[2];
          valid_range(g->out[2], s2, g->pb[2], kx * g->d[2], g->in[2], &lo, &hi);
          for (int64_t t = r0; t < r1; t++) {
            int64_t oz = t / g->in[1] * g->s[0] - g->pb[0] + kz * g->d[0];
            int64_t oy = t % g->in[1] * g->s[1] - g->pb[1] + ky * g->d[1];
            if (oz < 0 || oz >= g->out[0] || oy < 0 || oy >= g->out[1]) continue;
            const double *r = row + (t - r0) * g->in[2];
            double *dst = yc + (oz * g->out[1] + oy) * g->out[2] - g->pb[2] + kx * g->d[2];
            for (int64_t gx = lo; gx < hi; gx++) dst[gx * s2] += r[gx];
          }
        }
  }
}

/* ---- convolutions ---- */

/* Checks kernel_shape (when given) against the weight's spatial dims. */
static int check_kernel_shape(interp_ctx *c, const mg_node *n, int nd, const int64_t *k) {
  const int64_t *ks;
  size_t nk = mg_attr_ints(n, "kernel_shape", &ks);
  if (!nk) return 0;
  if (nk != (size_t)nd) return it_fail(c, n, "kernel_shape has %zu values for %d spatial dims", nk, nd);
  for (int i = 0; i < nd; i++)
    if (ks[i] != k[i]) return it_fail(c, n, "kernel_shape disagrees with the weight's shape");
  return 0;
}

/* See interp_nn.h. Depthwise convolutions (one input channel per group) run tap
 * by tap; 1x1 stride-1 unpadded ones multiply X directly; the rest go through
 * im2col in chunks of output rows and nn_gemm. */
int nn_conv(interp_ctx *c, const mg_node *n, const double *x, const int64_t *xdims, int xrank,
            const double *w, const int64_t *wdims, const double *bias, double **y,
            int64_t *ydims) {
  *y = NULL;
  int nd = xrank - 2;
  int64_t N = xdims[0], C = xdims[1], M = wdims[0], Cg = wdims[1], G = mg_attr_int(n, "group", 1);
  if (G < 1 || G > C || Cg < 1 || C != Cg * G || M % G)
    return it_fail(c, n, "channels (X %lld, W %lldx%lld) do not match group %lld", (long long)C,
                   (long long)M, (long long)Cg, (long long)G);
  if (check_kernel_shape(c, n, nd, wdims + 2)) return -1;
  geom g;
  if (geom_init(c, n, nd, xdims + 2, wdims + 2, 0, &g)) return -1;
  ydims[0] = N, ydims[1] = M;
  for (int i = 0; i < nd; i++) ydims[2 + i] = g.out[SP - nd + i];
  int64_t os = prod3(g.out), is = prod3(g.in), ks = prod3(g.k), K = Cg * ks, Mg = M / G;
  double *yv = dalloc(c, n, mul3(N, M, os));
  if (!yv) return -1;
  for (int64_t b = 0; bias && b < N; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t o = 0; o < os; o++) yv[(b * M + m) * os + o] = bias[m];
  int pointwise = ks == 1;
  for (int j = 0; j < SP; j++) pointwise &= g.s[j] == 1 && g.pb[j] == 0 && g.pe[j] == 0;
  if (Cg == 1 && !pointwise) { /* depthwise: direct, tap by tap */
    for (int64_t b = 0; b < N; b++)
      for (int64_t m = 0; m < M; m++) {
        const double *xc = x + (b * C + m / Mg) * is, *wm = w + m * ks;
        double *yc = yv + (b * M + m) * os;
        for (int64_t kz = 0, t = 0; kz < g.k[0]; kz++)
          for (int64_t ky = 0; ky < g.k[1]; ky++)
            for (int64_t kx = 0; kx < g.k[2]; kx++, t++) {
              int64_t lo, hi;
              double wv = wm[t];
              valid_range(g.in[2], g.s[2], g.pb[2], kx * g.d[2], g.out[2], &lo, &hi);
              for (int64_t oz = 0; oz < g.out[0]; oz++) {
                int64_t iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
                if (iz < 0 || iz >= g.in[0]) continue;
                for (int64_t oy = 0; oy < g.out[1]; oy++) {
                  int64_t iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
                  if (iy < 0 || iy >= g.in[1]) continue;
                  const double *src = xc + (iz * g.in[1] + iy) * g.in[2] - g.pb[2] + kx * g.d[2];
                  double *dst = yc + (oz * g.out[1] + oy) * g.out[2];
                  for (int64_t ox = lo; ox < hi; ox++) dst[ox] += wv * src[ox * g.s[2]];
                }
              }
            }
      }
    *y = yv;
    return 0;
  }
  /* im2col and product in chunks of output rows (one chunk for most layers). */
  int64_t rows = g.out[0] * g.out[1], step = chunk_rows(K, g.out[2], rows);
  double *cols = pointwise ? NULL : dalloc(c, n, mul3(K, step, g.out[2]));
  if (!pointwise && !cols) {
    mg_free(yv);
    return -1;
  }
  int rc = 0;
  for (int64_t b = 0; b < N && !rc; b++)
    for (int64_t gi = 0; gi < G && !rc; gi++) {
      const double *xg = x + (b * C + gi * Cg) * is, *wg = w + gi * Mg * K;
      double *yg = yv + (b * M + gi * Mg) * os;
      if (pointwise) {
        if (nn_gemm(Mg, os, K, wg, K, xg, os, yg, os)) rc = oom(c, n);
        continue;
      }
      for (int64_t r0 = 0; r0 < rows && !rc; r0 += step) {
        int64_t r1 = r0 + step < rows ? r0 + step : rows, wd = (r1 - r0) * g.out[2];
        im2col(&g, xg, Cg, r0, r1, cols);
        if (nn_gemm(Mg, wd, K, wg, K, cols, wd, yg + r0 * g.out[2], os)) rc = oom(c, n);
      }
    }
  mg_free(cols);
  if (rc) mg_free(yv);
  else *y = yv;
  return rc;
}

/* Reads X and W (and B) of Conv/ConvTranspose as new double arrays; B must have
 * W.dims[bias_len_dim] values (times group for ConvTranspose's dim 1). */
static int conv_inputs(interp_ctx *c, const mg_node *n, mg_rvalue **in, int64_t bias_len_dim,
                       double **x, double **w, double **b) {
  const mg_array *xt = it_in(in, n, 0), *wt = it_in(in, n, 1), *bt = it_in(in, n, 2);
  *x = *w = *b = NULL;
  if (!xt || !wt) return it_fail(c, n, "missing input");
  if (!it_is_float(xt->dtype)) return it_fail(c, n, "X must be floating point");
  if (xt->rank < 3 || wt->rank != xt->rank)
    return it_fail(c, n, "X and W must have the same rank >= 3");
  int64_t m = bias_len_dim < 0 ? 0 : wt->dims[bias_len_dim];
  if (bias_len_dim == 1 && !mg_mul_i64(m, mg_attr_int(n, "group", 1), &m)) m = -1;
  if (bt && it_numel(bt) != m) return it_fail(c, n, "B must have %lld values", (long long)m);
  if (!(*x = it_f64(c, n, xt)) || !(*w = it_f64(c, n, wt)) || (bt && !(*b = it_f64(c, n, bt)))) {
    mg_free(*x), mg_free(*w);
    *x = *w = NULL;
    return -1;
  }
  return 0;
}

/* Conv: X, W, optional B; output in X's dtype. */
static int conv(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  double *x, *w, *b, *y = NULL;
  if (conv_inputs(c, n, in, 0, &x, &w, &b)) return -1;
  const mg_array *xt = it_in(in, n, 0), *wt = it_in(in, n, 1);
  int64_t yd[MG_ARRAY_MAX_RANK];
  int rc = nn_conv(c, n, x, xt->dims, xt->rank, w, wt->dims, b, &y, yd);
  mg_array *yt = rc ? NULL : it_out(c, n, out, 0, xt->dtype, xt->rank, yd);
  if (yt) it_store_f64(yt, y);
  else rc = -1;
  mg_free(x), mg_free(w), mg_free(b), mg_free(y);
  return rc;
}

/* ConvTranspose: per group, columns = W^T X, then col2im into the output. */
static int conv_transpose(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  double *x, *w, *b;
  if (conv_inputs(c, n, in, 1, &x, &w, &b)) return -1;
  const mg_array *xt = it_in(in, n, 0), *wt = it_in(in, n, 1);
  int nd = xt->rank - 2, rc = 0;
  int64_t N = xt->dims[0], C = xt->dims[1], G = mg_attr_int(n, "group", 1), Mg = wt->dims[1];
  double *wtr = NULL, *cols = NULL, *y = NULL;
  geom g;
  memset(&g, 0, sizeof g);
  const int64_t *pd, *osh;
  size_t np = mg_attr_ints(n, "pads", &pd), nos = mg_attr_ints(n, "output_shape", &osh);
  if (nos == (size_t)nd + 2) osh += 2, nos -= 2;
  if (G < 1 || G > (C > 1 ? C : 1) || C % G || wt->dims[0] != C)
    rc = it_fail(c, n, "W's first dim must equal X's channels, divisible by group");
  else if (nd > SP)
    mg_error(c->d, LIMIT, n->name, n->op_type, "%d spatial dimensions (1 to 3 are supported)", nd), rc = -1;
  if (!rc) rc = check_kernel_shape(c, n, nd, wt->dims + 2);
  /* this interpreter's own bounds on output_shape and on pads in every mode */
  for (int i = 0; i < nd && !rc; i++)
    if ((nos == (size_t)nd && (osh[i] < 0 || osh[i] > ((int64_t)1 << 40))) ||
        (np == 2 * (size_t)nd && (pd[i] < -PAD_LIMIT || pd[i] > PAD_LIMIT || pd[i + nd] < -PAD_LIMIT || pd[i + nd] > PAD_LIMIT)))
      rc = it_fail(c, n, "strides, dilations, output_padding, output_shape or pads out of range");
  mg_window tw;
  if (!rc) switch (mg_window_transpose(n, nd, xt->dims + 2, wt->dims + 2, &win_limits, &tw)) {
    case MG_WIN_OK: geom_from(&tw, &g); break;
    case MG_WIN_ATTR_LENGTH:
      rc = it_fail(c, n, "strides, dilations, pads, output_padding or output_shape do not match %d dims", nd);
      break;
    case MG_WIN_AUTO_PAD: rc = bad_auto_pad(c, n); break;
    case MG_WIN_EMPTY: rc = it_fail(c, n, "negative output size"); break;
    default: rc = it_fail(c, n, "strides, dilations, output_padding, output_shape or pads out of range");
    }
  if (rc) geom_from(&(mg_window){.nd = 0}, &g);
  int64_t M = rc ? 0 : Mg * G, Cg = G > 0 ? C / G : 1, ks = prod3(g.k), is = prod3(g.in), os = prod3(g.out);
  int64_t rows = Mg * ks, yd[MG_ARRAY_MAX_RANK];
  int64_t grows = g.in[0] * g.in[1], step = chunk_rows(rows, g.in[2], grows);
  if (!rc) rc = (y = dalloc(c, n, mul3(N, M, os))) && (cols = dalloc(c, n, mul3(rows, step, g.in[2]))) &&
                        (wtr = dalloc(c, n, mul3(G, rows, Cg))) ? 0 : -1;
  for (int64_t gi = 0; gi < G && !rc; gi++) /* W[g] is Cg x rows; keep its transpose */
    for (int64_t i = 0; i < Cg; i++)
      for (int64_t r = 0; r < rows; r++) wtr[(gi * rows + r) * Cg + i] = w[(gi * Cg + i) * rows + r];
  for (int64_t bi = 0; bi < N && !rc; bi++)
    for (int64_t gi = 0; gi < G && !rc; gi++)
      for (int64_t r0 = 0; r0 < grows && !rc; r0 += step) { /* chunks of input rows */
        int64_t r1 = r0 + step < grows ? r0 + step : grows, wd = (r1 - r0) * g.in[2];
        memset(cols, 0, sizeof(double) * (size_t)(rows * wd));
        if (nn_gemm(rows, wd, Cg, wtr + gi * rows * Cg, Cg, x + (bi * C + gi * Cg) * is + r0 * g.in[2], is, cols, wd))
          rc = oom(c, n);
        else col2im(&g, cols, Mg, r0, r1, y + (bi * M + gi * Mg) * os);
      }
  for (int64_t bi = 0; bi < N && !rc && b; bi++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t o = 0; o < os; o++) y[(bi * M + m) * os + o] += b[m];
  yd[0] = N, yd[1] = M;
  for (int i = 0; i < nd; i++) yd[2 + i] = g.out[SP - nd + i];
  mg_array *yt = rc ? NULL : it_out(c, n, out, 0, xt->dtype, xt->rank, yd);
  if (yt) it_store_f64(yt, y);
  else rc = -1;
  mg_free(x), mg_free(w), mg_free(b), mg_free(y), mg_free(cols), mg_free(wtr);
  return rc;
}

/* Col2Im: input [N, C * prod(block), L] summed into [N, C, image_shape...]. */
static int col2im_op(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *im = it_in(in, n, 1), *bl = it_in(in, n, 2);
  if (!xt || !im || !bl) return it_fail(c, n, "missing input");
  int64_t img[SP], blk[SP];
  int nd = it_ints(im, img, SP);
  if (nd < 1 || it_ints(bl, blk, SP) != nd)
    return it_fail(c, n, "image_shape and block_shape must have 1 to 3 equal-length values");
  if (xt->rank != 3) return it_fail(c, n, "input must be [N, C*prod(block_shape), L]");
  geom g;
  if (geom_init(c, n, nd, img, blk, 0, &g)) return -1;
  /* geom_init computed the column grid as its output; swap roles for col2im. */
  for (int j = 0; j < SP; j++) {
    int64_t t = g.in[j];
    g.in[j] = g.out[j];
    g.out[j] = t;
  }
  int64_t ks = prod3(g.k), N = xt->dims[0];
  if (xt->dims[1] % ks || xt->dims[2] != prod3(g.in))
    return it_fail(c, n, "input dims do not match the blocks (%lld columns expected)",
                   (long long)prod3(g.in));
  int64_t C = xt->dims[1] / ks, yd[2 + SP] = {N, C};
  for (int i = 0; i < nd; i++) yd[2 + i] = img[i];
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, nd + 2, yd);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt), *y = x ? dalloc(c, n, it_numel(yt)) : NULL;
  for (int64_t b = 0; y && b < N; b++)
    col2im(&g, x + b * xt->dims[1] * xt->dims[2], C, 0, g.in[0] * g.in[1], y + b * C * prod3(g.out));
  if (y) it_store_f64(yt, y);
  int rc = y ? 0 : -1;
  mg_free(x), mg_free(y);
  return rc;
}

/* ---- pools ---- */

/* AveragePool, MaxPool (with Indices), LpPool over 1 to 3 spatial dims. */
static int pool(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0);
  if (!xt) return it_fail(c, n, "missing input");
  if (xt->rank < 3) return it_fail(c, n, "input must have rank >= 3");
  int nd = xt->rank - 2;
  const int64_t *ks;
  if (mg_attr_ints(n, "kernel_shape", &ks) != (size_t)nd)
    return it_fail(c, n, "kernel_shape must have %d values", nd);
  geom g;
  if (geom_init(c, n, nd, xt->dims + 2, ks, (int)mg_attr_int(n, "ceil_mode", 0), &g)) return -1;
  int is_max = n->op == MG_OP_MaxPool, is_avg = n->op == MG_OP_AveragePool;
  int include_pad = n->op == MG_OP_AveragePool && mg_attr_int(n, "count_include_pad", 0);
  int col_major = is_max && mg_attr_int(n, "storage_order", 0);
  double p = n->op == MG_OP_LpPool ? (double)mg_attr_int(n, "p", 2) : 2.0;
  int64_t yd[MG_ARRAY_MAX_RANK], planes = xt->dims[0] * xt->dims[1];
  yd[0] = xt->dims[0], yd[1] = xt->dims[1];
  for (int i = 0; i < nd; i++) yd[2 + i] = g.out[SP - nd + i];
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, yd);
  if (!yt) return -1;
  mg_array *it = is_max && n->n_out > 1 && out[1] ? it_out(c, n, out, 1, MG_I64, xt->rank, yd) : NULL;
  if (is_max && n->n_out > 1 && out[1] && !it) return -1;
  int64_t is = prod3(g.in), os = prod3(g.out);
  double *x = it_f64(c, n, xt), *y = x ? dalloc(c, n, mul3(planes, os, 1)) : NULL;
  int64_t *idx = it && y ? mg_calloc((size_t)(planes * os + 1), sizeof(int64_t)) : NULL;
  if (!y || (it && !idx)) {
    if (y) oom(c, n);
    mg_free(x), mg_free(y), mg_free(idx);
    return -1;
  }
  for (int64_t pl = 0; pl < planes; pl++) {
    const double *xp = x + pl * is;
    for (int64_t oz = 0, o = pl * os; oz < g.out[0]; oz++)
      for (int64_t oy = 0; oy < g.out[1]; oy++)
        for (int64_t ox = 0; ox < g.out[2]; ox++, o++) {
          double acc = is_max ? -INFINITY : 0;
          int64_t cnt = 0, best = -1;
          for (int64_t kz = 0; kz < g.k[0]; kz++) {
            int64_t iz = oz * g.s[0] - g.pb[0] + kz * g.d[0];
            for (int64_t ky = 0; ky < g.k[1]; ky++) {
              int64_t iy = oy * g.s[1] - g.pb[1] + ky * g.d[1];
              for (int64_t kx = 0; kx < g.k[2]; kx++) {
                int64_t ix = ox * g.s[2] - g.pb[2] + kx * g.d[2];
                int inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
                if (include_pad && iz < g.in[0] + g.pe[0] && iy < g.in[1] + g.pe[1] && ix < g.in[2] + g.pe[2])
                  cnt++;
                if (!inside) continue;
                double v = xp[(iz * g.in[1] + iy) * g.in[2] + ix];
                if (is_max) {
                  if (v > acc || best < 0) {
                    acc = v;
                    best = col_major ? iz + g.in[0] * (iy + g.in[1] * ix) : (iz * g.in[1] + iy) * g.in[2] + ix;
                  }
                } else {
                  acc += is_avg ? v : pow(fabs(v), p);
                  if (!include_pad) cnt++;
                }
              }
            }
          }
          if (is_avg) acc = cnt ? acc / (double)cnt : NAN;
          else if (!is_max) acc = pow(acc, 1 / p);
          y[o] = acc;
          if (idx) idx[o] = best < 0 ? -1 : pl * is + best;
        }
  }
  it_store_f64(yt, y);
  if (it) it_store_i64(it, idx);
  mg_free(x), mg_free(y), mg_free(idx);
  return 0;
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: over all dims after the second. */
static int global_pool(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0);
  if (!xt) return it_fail(c, n, "missing input");
  if (xt->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  int64_t yd[MG_ARRAY_MAX_RANK], planes = xt->dims[0] * xt->dims[1], sp = 1;
  for (int d = 0; d < xt->rank; d++) yd[d] = d < 2 ? xt->dims[d] : 1;
  for (int d = 2; d < xt->rank; d++) sp *= xt->dims[d];
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, yd);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt), *y = x ? dalloc(c, n, planes) : NULL;
  double p = n->op == MG_OP_GlobalLpPool ? (double)mg_attr_int(n, "p", 2) : 2.0;
  for (int64_t pl = 0; y && pl < planes; pl++) {
    const double *xp = x + pl * sp;
    double acc = n->op == MG_OP_GlobalMaxPool ? -INFINITY : 0;
    for (int64_t i = 0; i < sp; i++) {
      if (n->op == MG_OP_GlobalMaxPool) acc = xp[i] > acc || isnan(xp[i]) ? xp[i] : acc;
      else if (n->op == MG_OP_GlobalAveragePool) acc += xp[i];
      else acc += pow(fabs(xp[i]), p);
    }
    if (n->op == MG_OP_GlobalAveragePool) acc /= (double)sp;
    if (n->op == MG_OP_GlobalLpPool) acc = pow(acc, 1 / p);
    y[pl] = acc;
  }
  if (y) it_store_f64(yt, y);
  int rc = y ? 0 : -1;
  mg_free(x), mg_free(y);
  return rc;
}

/* MaxUnpool: scatters X into zeros at the flat positions of I, which index the
 * shape MaxPool's input had, (in - 1) * stride - pads + kernel; a larger
 * output_shape keeps that block at its start and pads with zeros, as the ONNX
 * test data does. */
static int max_unpool(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *ix = it_in(in, n, 1), *osh = it_in(in, n, 2);
  if (!xt || !ix) return it_fail(c, n, "missing input");
  if (xt->rank < 3 || it_numel(ix) != it_numel(xt)) return it_fail(c, n, "X and I must match, rank >= 3");
  int nd = xt->rank - 2;
  int64_t yd[MG_ARRAY_MAX_RANK], id[MG_ARRAY_MAX_RANK], ist[MG_ARRAY_MAX_RANK], ost[MG_ARRAY_MAX_RANK];
  const int64_t *ks, *st, *pd;
  size_t nk = mg_attr_ints(n, "kernel_shape", &ks), ns = mg_attr_ints(n, "strides", &st);
  size_t np = mg_attr_ints(n, "pads", &pd);
  if (nk != (size_t)nd || (ns && ns != (size_t)nd) || (np && np != 2 * (size_t)nd))
    return it_fail(c, n, "kernel_shape, strides or pads do not match %d spatial dims", nd);
  id[0] = xt->dims[0], id[1] = xt->dims[1];
  for (int i = 0; i < nd; i++) {
    int64_t s = ns ? st[i] : 1, pb = np ? pd[i] : 0, pe = np ? pd[i + nd] : 0;
    if (s < 1 || s > WIN_LIMIT || ks[i] < 1 || ks[i] > WIN_LIMIT || pb < 0 || pe < 0 || pb > PAD_LIMIT || pe > PAD_LIMIT)
      return it_fail(c, n, "kernel_shape, strides or pads out of range");
    id[2 + i] = (xt->dims[2 + i] - 1) * s + ks[i] - pb - pe;
    if (id[2 + i] < 1) return it_fail(c, n, "the unpooled shape is empty");
  }
  memcpy(yd, id, sizeof(int64_t) * (size_t)xt->rank);
  if (osh) {
    if (it_ints(osh, yd, MG_ARRAY_MAX_RANK) != xt->rank) return it_fail(c, n, "output_shape must have rank(X) values");
    for (int d = 0; d < xt->rank; d++)
      if (yd[d] < id[d] || (d < 2 && yd[d] != id[d]))
        return it_fail(c, n, "output_shape is smaller than the unpooled shape");
  }
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, yd);
  if (!yt) return -1;
  it_strides(xt->rank, id, ist);
  it_strides(xt->rank, yd, ost);
  int64_t k = it_numel(xt), total = ist[0] * id[0];
  size_t es = mg_dtype_size(xt->dtype);
  for (int64_t i = 0; i < k; i++) {
    int64_t p = it_get_i64(ix, i), q = 0;
    if (p < 0 || p >= total) return it_fail(c, n, "index %lld is outside the output", (long long)p);
    for (int d = 0; d < xt->rank; d++) q += (p / ist[d]) % id[d] * ost[d];
    memcpy((unsigned char *)yt->data + (size_t)q * es, (const unsigned char *)xt->data + (size_t)i * es, es);
  }
  return 0;
}

/* ---- normalisations ---- */

/* Per-channel vector input i of length C as doubles (NULL after a diagnostic). */
static double *chan_vec(interp_ctx *c, const mg_node *n, mg_rvalue **in, int i, int64_t C,
                        const char *what) {
  const mg_array *t = it_in(in, n, i);
  if (!t) {
    it_fail(c, n, "missing %s", what);
    return NULL;
  }
  if (it_numel(t) != C) {
    it_fail(c, n, "%s has %lld values, expected %lld", what, (long long)it_numel(t), (long long)C);
    return NULL;
  }
  return it_f64(c, n, t);
}

/* BatchNormalization; training_mode=1 normalises with the batch statistics and
 * outputs the running mean and variance (momentum-weighted, population variance). */
static int batch_norm(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *mt = it_in(in, n, 3), *vt = it_in(in, n, 4);
  if (!xt || !mt || !vt) return it_fail(c, n, "missing input");
  if (xt->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  int64_t N = xt->dims[0], C = xt->dims[1], sp = it_numel(xt) / (N * C > 0 ? N * C : 1);
  double eps = mg_attr_float(n, "epsilon", 1e-5f), mom = mg_attr_float(n, "momentum", 0.9f);
  int train = (int)mg_attr_int(n, "training_mode", 0);
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, xt->dims);
  if (!yt) return -1;
  double *s = chan_vec(c, n, in, 1, C, "scale"), *b = s ? chan_vec(c, n, in, 2, C, "B") : NULL;
  double *m = b ? chan_vec(c, n, in, 3, C, "mean") : NULL, *v = m ? chan_vec(c, n, in, 4, C, "var") : NULL;
  double *x = v ? it_f64(c, n, xt) : NULL, *bm = NULL, *bv = NULL;
  int rc = x ? 0 : -1;
  if (!rc && train) {
    if (!(bm = dalloc(c, n, C)) || !(bv = dalloc(c, n, C))) rc = -1;
    for (int64_t ch = 0; !rc && ch < C; ch++) {
      double sum = 0, sq = 0, cnt = (double)(N * sp);
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < sp; j++) sum += x[(i * C + ch) * sp + j];
      bm[ch] = sum / cnt;
      for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < sp; j++) {
          double d = x[(i * C + ch) * sp + j] - bm[ch];
          sq += d * d;
        }
      bv[ch] = sq / cnt;
    }
  }
  for (int64_t i = 0; !rc && i < N; i++)
    for (int64_t ch = 0; ch < C; ch++) {
      double mean = train ? bm[ch] : m[ch], var = train ? bv[ch] : v[ch];
      double inv = 1 / sqrt(var + eps);
      double *p = x + (i * C + ch) * sp;
      for (int64_t j = 0; j < sp; j++) p[j] = (p[j] - mean) * inv * s[ch] + b[ch];
    }
  if (!rc) it_store_f64(yt, x);
  for (int o = 1; !rc && train && o < 3 && o < n->n_out; o++) {
    if (!out[o]) continue;
    const mg_array *src = o == 1 ? mt : vt;
    mg_array *rt = it_out(c, n, out, o, src->dtype, src->rank, src->dims);
    if (!rt) rc = -1;
    for (int64_t ch = 0; !rc && ch < C; ch++)
      it_set_f64(rt, ch, (o == 1 ? m[ch] : v[ch]) * mom + (o == 1 ? bm[ch] : bv[ch]) * (1 - mom));
  }
  mg_free(s), mg_free(b), mg_free(m), mg_free(v), mg_free(x), mg_free(bm), mg_free(bv);
  return rc;
}

/* Normalises each of `groups` contiguous runs of `len` values of x in place to
 * zero mean and unit variance (population), recording mean and 1/stddev. */
static void normalise_runs(double *x, int64_t groups, int64_t len, double eps, double *mean,
                           double *inv) {
  for (int64_t g = 0; g < groups; g++) {
    double *p = x + g * len, sum = 0, sq = 0;
    for (int64_t i = 0; i < len; i++) sum += p[i];
    double mu = len ? sum / (double)len : 0;
    for (int64_t i = 0; i < len; i++) sq += (p[i] - mu) * (p[i] - mu);
    double r = 1 / sqrt((len ? sq / (double)len : 0) + eps);
    for (int64_t i = 0; i < len; i++) p[i] = (p[i] - mu) * r;
    if (mean) mean[g] = mu;
    if (inv) inv[g] = r;
  }
}

/* LayerNormalization over dims [axis, rank); Scale and B broadcast to them; the
 * optional Mean and InvStdDev outputs have the normalised dims set to 1. */
static int layer_norm(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *st = it_in(in, n, 1), *bt = it_in(in, n, 2);
  if (!xt || !st) return it_fail(c, n, "missing input");
  int64_t axis = mg_attr_int(n, "axis", -1);
  if (axis < 0) axis += xt->rank;
  if (axis < 0 || axis >= xt->rank) return it_fail(c, n, "axis out of range");
  int nr = xt->rank - (int)axis;
  const int64_t *nd = xt->dims + axis;
  int64_t outer = 1, inner = 1, ss[MG_ARRAY_MAX_RANK], bs[MG_ARRAY_MAX_RANK], sd[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < axis; d++) outer *= xt->dims[d];
  for (int d = 0; d < nr; d++) inner *= nd[d];
  for (int k = 0; k < 2; k++) {
    const mg_array *t = k ? bt : st;
    if (!t) continue;
    if (t->rank > nr) return it_fail(c, n, "Scale/B rank exceeds the normalised rank");
    for (int d = 0; d < t->rank; d++)
      if (t->dims[d] != 1 && t->dims[d] != nd[nr - t->rank + d])
        return it_fail(c, n, "Scale/B do not broadcast to the normalised shape");
    it_bcast_strides(t, nr, nd, k ? bs : ss);
  }
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, xt->dims);
  if (!yt) return -1;
  double eps = mg_attr_float(n, "epsilon", 1e-5f);
  double *x = it_f64(c, n, xt), *mean = x ? dalloc(c, n, outer) : NULL, *inv = mean ? dalloc(c, n, outer) : NULL;
  if (!inv) {
    mg_free(x), mg_free(mean);
    return -1;
  }
  normalise_runs(x, outer, inner, eps, mean, inv);
  int64_t idx[MG_ARRAY_MAX_RANK] = {0}, so = 0, bo = 0;
  for (int64_t i = 0; i < inner; i++) { /* walk the normalised shape once, all rows */
    double sv = it_get_f64(st, so), bv = bt ? it_get_f64(bt, bo) : 0;
    for (int64_t r = 0; r < outer; r++) x[r * inner + i] = x[r * inner + i] * sv + bv;
    for (int d = nr - 1; d >= 0; d--) {
      idx[d]++, so += ss[d], bo += bt ? bs[d] : 0;
      if (idx[d] < nd[d]) break;
      so -= ss[d] * nd[d], bo -= bt ? bs[d] * nd[d] : 0, idx[d] = 0;
    }
  }
  it_store_f64(yt, x);
  int64_t sdims = mg_attr_int(n, "stash_type", 1);
  mg_dtype sdt = mg_dtype_valid((int)sdims) && mg_dtype_is_float((mg_dtype)sdims) ? (mg_dtype)sdims : MG_F32;
  for (int d = 0; d < xt->rank; d++) sd[d] = d < axis ? xt->dims[d] : 1;
  int rc = 0;
  for (int o = 1; o < 3 && o < n->n_out && !rc; o++) {
    if (!out[o]) continue;
    mg_array *t = it_out(c, n, out, o, sdt, xt->rank, sd);
    if (t) it_store_f64(t, o == 1 ? mean : inv);
    else rc = -1;
  }
  mg_free(x), mg_free(mean), mg_free(inv);
  return rc;
}

/* InstanceNormalization (per sample and channel) and GroupNormalization (per
 * sample and group of channels); scale and bias are per channel, or per group
 * for opset-18 GroupNormalization. */
static int group_norm(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *st = it_in(in, n, 1), *bt = it_in(in, n, 2);
  if (!xt || !st || !bt) return it_fail(c, n, "missing input");
  if (xt->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  int64_t N = xt->dims[0], C = xt->dims[1], sp = 1;
  for (int d = 2; d < xt->rank; d++) sp *= xt->dims[d];
  int64_t G = n->op == MG_OP_GroupNormalization ? mg_attr_int(n, "num_groups", 0) : C;
  if (G < 1 || C % G) return it_fail(c, n, "num_groups %lld does not divide %lld channels", (long long)G, (long long)C);
  int64_t ns = it_numel(st);
  if ((ns != C && ns != G) || it_numel(bt) != ns)
    return it_fail(c, n, "scale and bias must have %lld values", (long long)C);
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, xt->rank, xt->dims);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt);
  if (!x) return -1;
  double eps = mg_attr_float(n, "epsilon", 1e-5f);
  normalise_runs(x, N * G, C / G * sp, eps, NULL, NULL);
  for (int64_t i = 0; i < N; i++)
    for (int64_t ch = 0; ch < C; ch++) {
      int64_t k = ns == C ? ch : ch / (C / G);
      double sv = it_get_f64(st, k), bv = it_get_f64(bt, k), *p = x + (i * C + ch) * sp;
      for (int64_t j = 0; j < sp; j++) p[j] = p[j] * sv + bv;
    }
  it_store_f64(yt, x);
  mg_free(x);
  return 0;
}

/* The nn family's entry point (interp_internal.h): dispatches on n->op. */
int interp_nn(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
              interp_frame *frame) {
  (void)frame;
  switch (n->op) {
  case MG_OP_Conv: return conv(c, n, in, out);
  case MG_OP_ConvTranspose: return conv_transpose(c, n, in, out);
  case MG_OP_Col2Im: return col2im_op(c, n, in, out);
  case MG_OP_AveragePool: case MG_OP_MaxPool: case MG_OP_LpPool: return pool(c, n, in, out);
  case MG_OP_GlobalAveragePool: case MG_OP_GlobalMaxPool: case MG_OP_GlobalLpPool:
    return global_pool(c, n, in, out);
  case MG_OP_MaxUnpool: return max_unpool(c, n, in, out);
  case MG_OP_BatchNormalization: return batch_norm(c, n, in, out);
  case MG_OP_LayerNormalization: return layer_norm(c, n, in, out);
  case MG_OP_GroupNormalization: case MG_OP_InstanceNormalization: return group_norm(c, n, in, out);
  case MG_OP_Resize: case MG_OP_GridSample: case MG_OP_RoiAlign: case MG_OP_MaxRoiPool:
  case MG_OP_NonMaxSuppression:
    return interp_nn_sampling(c, n, in, out);
  default:
    mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "%s is not an nn op", n->op_type);
    return -1;
  }
}
