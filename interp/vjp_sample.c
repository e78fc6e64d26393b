/* VJPs of the sampling ops, Resize and RoiAlign. Both are linear in X with
 * weights that depend only on shapes, attributes and the constant inputs (scales,
 * sizes, roi; the boxes), so the VJP is the transpose of the forward's gather:
 * each output cotangent is scattered back to the taps it was blended from, with
 * the same weights, from the same geometry (resize_plan / roi_grid_init in
 * interp_resize.c). The geometry inputs get no gradient: torch's interpolate and
 * roi_align give none to sizes, scales or boxes either. */
#include "vjp.h"
#include "interp_nn.h"
#include <math.h>
#include <string.h>

static int sample_oom(const vjp_args *a) {
  mg_error(a->d, OOM, a->n->name, a->n->op_type, "out of memory");
  return -1;
}

/* Resize: the forward's passes in reverse, each one's gather transposed. */
static int resize(const vjp_args *a) {
  if (!a->gy[0] || !a->gx[0]) return 0;
  const mg_array *X = a->x[0];
  mg_resize_opts o;
  mg_rz_axis geo[MG_ARRAY_MAX_RANK];
  const char *attr, *value, *err;
  if (mg_resize_read_opts(a->n, &o, &attr, &value)) return vjp_unsupported(a, "%s '%s'", attr, value);
  if (resize_plan(a->n, &o, X, a->n->n_in > 1 ? a->x[1] : NULL, a->n->n_in > 2 ? a->x[2] : NULL,
                  a->n->n_in > 3 ? a->x[3] : NULL, geo, &err))
    return vjp_fail(a, "%s", err);
  int r = X->rank, order[MG_ARRAY_MAX_RANK];
  resize_pass_order(r, geo, order);
  int64_t dims[MG_ARRAY_MAX_RANK + 1][MG_ARRAY_MAX_RANK]; /* shape before pass q (dims[r]: the output) */
  memcpy(dims[0], X->dims, sizeof(int64_t) * (size_t)r);
  for (int q = 0; q < r; q++) {
    memcpy(dims[q + 1], dims[q], sizeof(int64_t) * (size_t)r);
    dims[q + 1][order[q]] = geo[order[q]].out_len;
  }
  int64_t n_out = 1;
  for (int d = 0; d < r; d++) n_out *= dims[r][d];
  double *g = vjp_zeros(a, n_out);
  if (!g) return -1;
  memcpy(g, a->gy[0], sizeof(double) * (size_t)n_out);
  int64_t ti[MG_RZ_MAX_TAPS];
  double tw[MG_RZ_MAX_TAPS];
  for (int q = r - 1; q >= 0; q--) {
    int ax = order[q];
    const mg_rz_axis *G = &geo[ax];
    int64_t L = G->in_len, O = G->out_len, outer = 1, inner = 1;
    int identity = L == O;
    for (int64_t j = 0; j < O && identity; j++)
      identity = mg_resize_taps(&o, G, j, ti, tw) == 1 && ti[0] == j && tw[0] == 1;
    if (identity) continue; /* the forward skipped it too */
    for (int d = 0; d < ax; d++) outer *= dims[q][d];
    for (int d = ax + 1; d < r; d++) inner *= dims[q][d];
    double *prev = vjp_zeros(a, outer * L * inner);
    if (!prev) {
      mg_free(g);
      return -1;
    }
    for (int64_t j = 0; j < O; j++) {
      int nt = mg_resize_taps(&o, G, j, ti, tw); /* 0: extrapolated, no input reached */
      for (int64_t p = 0; p < outer; p++) {
        const double *src = g + (p * O + j) * inner;
        for (int k = 0; k < nt; k++) {
          double *dst = prev + (p * L + ti[k]) * inner;
          for (int64_t i = 0; i < inner; i++) dst[i] += tw[k] * src[i];
        }
      }
    }
    mg_free(g);
    g = prev;
  }
  int64_t n_in = 1;
  for (int d = 0; d < r; d++) n_in *= X->dims[d];
  for (int64_t i = 0; i < n_in; i++) a->gx[0][i] += g[i];
  mg_free(g);
  return 0;
}

/* RoiAlign: avg spreads each bin's cotangent over its samples' corners; max sends
 * it to the weighted corner the forward took (the first largest). */
static int roi_align(const vjp_args *a) {
  if (!a->gy[0] || !a->gx[0]) return 0;
  const mg_array *X = a->x[0], *R = a->x[1], *B = a->x[2];
  roi_opts o;
  const char *attr, *value, *err;
  if (roi_read_opts(a->n, &o, &attr, &value)) return vjp_unsupported(a, "%s '%s'", attr, value);
  if (X->rank != 4 || R->rank != 2 || R->dims[1] != 4) return vjp_fail(a, "expected X [N,C,H,W] and rois [R,4]");
  double *x = o.is_max ? vjp_f64(a, X) : NULL, *boxes = vjp_f64(a, R), *bidx = vjp_f64(a, B);
  if ((o.is_max && !x) || !boxes || !bidx) {
    mg_free(x), mg_free(boxes), mg_free(bidx);
    return boxes && bidx ? -1 : sample_oom(a);
  }
  int64_t N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3], nr = R->dims[0];
  int rc = 0;
  for (int64_t r = 0; r < nr && !rc; r++) {
    int64_t b = (int64_t)bidx[r];
    roi_grid g;
    if (b < 0 || b >= N) {
      rc = vjp_fail(a, "batch index %lld out of range", (long long)b);
      break;
    }
    if (roi_grid_init(&o, boxes + 4 * r, &g, &err)) {
      rc = vjp_fail(a, "roi %lld: %s", (long long)r, err);
      break;
    }
    for (int64_t ch = 0; ch < C; ch++) {
      double *gp = a->gx[0] + (b * C + ch) * H * W;
      const double *p = x ? x + (b * C + ch) * H * W : NULL;
      for (int64_t ph = 0; ph < o.oh; ph++)
        for (int64_t pw = 0; pw < o.ow; pw++) {
          double gy = a->gy[0][((r * C + ch) * o.oh + ph) * o.ow + pw], best = 0, best_w = 0;
          int64_t best_i = -1;
          int first = 1;
          for (int64_t iy = 0; iy < g.gh; iy++)
            for (int64_t ix = 0; ix < g.gw; ix++) {
              int64_t idx[4];
              double w[4];
              roi_corners(&g, H, W, ph, pw, iy, ix, idx, w);
              for (int k = 0; k < 4; k++) {
                if (!p) {
                  gp[idx[k]] += gy * w[k] / g.count;
                } else if (first || w[k] * p[idx[k]] > best) {
                  best = w[k] * p[idx[k]], best_w = w[k], best_i = idx[k];
                  first = 0;
                }
              }
            }
          if (p && best_i >= 0) gp[best_i] += gy * best_w;
        }
    }
  }
  mg_free(x), mg_free(boxes), mg_free(bidx);
  return rc;
}

int vjp_sample(const vjp_args *a) {
  switch (a->n->op) {
  case MG_OP_Resize: return resize(a);
  default: return roi_align(a);
  }
}
