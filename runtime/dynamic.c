/* Kernels of run-time length: NonZero, Slice along a run-time axis,
 * NonMaxSuppression (contracts in mg_rt_dynamic.h). */
#include "mg_runtime.h"
#include <string.h>

int64_t mg_nonzero(mg_rt_dtype t, int rank, const int64_t *shape, const void *x, int64_t *out,
                   int64_t row_stride) {
  int64_t n = 1, cnt = 0, coord[64] = {0};
  for (int d = 0; d < rank; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++) {
    if (mg_tensor_load_f64(t, x, i) != 0) {
      for (int d = 0; d < rank; d++) out[d * row_stride + cnt] = coord[d];
      cnt++;
    }
    for (int d = rank - 1; d >= 0; d--) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return cnt;
}

int64_t mg_slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (step > 0) {
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < 0 ? 0 : end > n ? n : end;
    *first = start;
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = start < 0 ? -1 : start > n - 1 ? n - 1 : start;
  end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
  *first = start;
  return start > end ? (start - end + (-step) - 1) / (-step) : 0;
}

void mg_copy_rows(size_t row_bytes, int64_t count, const void *src, int64_t first, int64_t step, void *dst) {
  const unsigned char *s = src;
  unsigned char *d = dst;
  if (step == 1) {
    if (count > 0) memmove(d, s + (size_t)first * row_bytes, (size_t)count * row_bytes);
    return;
  }
  for (int64_t i = 0; i < count; i++)
    memmove(d + (size_t)i * row_bytes, s + (size_t)(first + i * step) * row_bytes, row_bytes);
}

/* ---- NonMaxSuppression */

size_t mg_nms_scratch(int64_t n) { return (size_t)(n + 1) * 6; /* three int64 arrays */ }

/* Sorts idx[0..n) by descending sc[idx], ties by ascending index (a stable merge
 * sort of an ascending list); tmp holds n. */
static void sort_by_score(int64_t *idx, int64_t *tmp, int64_t n, const float *sc) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
      while (a < mid && b < hi) tmp[k++] = sc[idx[b]] > sc[idx[a]] ? idx[b++] : idx[a++];
      while (a < mid) tmp[k++] = idx[a++];
      while (b < hi) tmp[k++] = idx[b++];
    }
    memcpy(idx, tmp, sizeof *idx * (size_t)n);
  }
}

static double dmin(double a, double b) { return a < b ? a : b; }
static double dmax(double a, double b) { return a > b ? a : b; }

/* Whether boxes a and b overlap with IoU above thr (the interpreter's rule). */
static int suppresses(const float *fa, const float *fb, int center, double thr) {
  double a[4] = {fa[0], fa[1], fa[2], fa[3]}, b[4] = {fb[0], fb[1], fb[2], fb[3]};
  double ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
  if (center) {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  } else {
    ay0 = dmin(a[0], a[2]), ay1 = dmax(a[0], a[2]), ax0 = dmin(a[1], a[3]), ax1 = dmax(a[1], a[3]);
    by0 = dmin(b[0], b[2]), by1 = dmax(b[0], b[2]), bx0 = dmin(b[1], b[3]), bx1 = dmax(b[1], b[3]);
  }
  double ix0 = dmax(ax0, bx0), ix1 = dmin(ax1, bx1), iy0 = dmax(ay0, by0), iy1 = dmin(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0) return 0;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double aa = (ax1 - ax0) * (ay1 - ay0), ab = (bx1 - bx0) * (by1 - by0), uni = aa + ab - inter;
  if (aa <= 0 || ab <= 0 || uni <= 0) return 0;
  return inter / uni > thr;
}

int64_t mg_nms(int64_t batches, int64_t classes, int64_t n, const float *boxes, int64_t box_stride,
               const float *scores, int64_t score_stride, int64_t max_per_class, float iou, int has_thr,
               float score_thr, int center, int64_t *out, int64_t cap, float *scratch) {
  int64_t *idx = (int64_t *)(void *)scratch, *tmp = idx + n + 1, *sel = tmp + n + 1, count = 0;
  if (max_per_class < 0) max_per_class = 0;
  for (int64_t b = 0; b < batches; b++)
    for (int64_t k = 0; k < classes; k++) {
      const float *sc = scores + (b * classes + k) * score_stride, *bx = boxes + b * box_stride;
      int64_t nc = 0, ns = 0;
      for (int64_t i = 0; i < n; i++)
        if (!has_thr || (double)sc[i] > (double)score_thr) idx[nc++] = i;
      sort_by_score(idx, tmp, nc, sc);
      for (int64_t i = 0; i < nc && ns < max_per_class; i++) {
        int keep = 1;
        for (int64_t j = 0; j < ns && keep; j++)
          if (suppresses(bx + idx[i] * 4, bx + sel[j] * 4, center, (double)iou)) keep = 0;
        if (!keep) continue;
        sel[ns++] = idx[i];
        if (count == cap) return -1;
        out[count * 3] = b, out[count * 3 + 1] = k, out[count * 3 + 2] = idx[i];
        count++;
      }
    }
  return count;
}
