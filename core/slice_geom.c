#include "slice_geom.h"

int mg_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                  int64_t *count) {
  int64_t s = start, e = end;
  if (step == 0) return -1;
  if (s < 0) s += dim;
  if (e < 0) e += dim;
  if (step > 0) {
    s = s < 0 ? 0 : s > dim ? dim : s;
    e = e < 0 ? 0 : e > dim ? dim : e;
    *count = e > s ? (e - s - 1) / step + 1 : 0;
  } else {
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    /* -step in unsigned arithmetic: INT64_MIN takes one element */
    *count = s > e ? (int64_t)((uint64_t)(s - e - 1) / (0 - (uint64_t)step)) + 1 : 0;
  }
  *first = s;
  return 0;
}
