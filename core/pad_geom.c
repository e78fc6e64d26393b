#include "pad_geom.h"
#include <string.h>

int mg_pad_mode(const char *mode) {
  return !strcmp(mode, "constant") ? MG_PADM_CONSTANT : !strcmp(mode, "reflect") ? MG_PADM_REFLECT
         : !strcmp(mode, "edge") ? MG_PADM_EDGE : !strcmp(mode, "wrap") ? MG_PADM_WRAP : -1;
}

void mg_pad_crop(int64_t dim, int64_t pb, int64_t pe, int64_t *start, int64_t *len) {
  *start = pb < 0 ? -pb : 0;
  *len = dim - *start - (pe < 0 ? -pe : 0);
}

int64_t mg_pad_source(int mode, int64_t o, int64_t lead, int64_t len) {
  int64_t v = o - lead;
  if (v >= 0 && v < len) return v;
  if (mode == MG_PADM_CONSTANT) return -1;
  if (mode == MG_PADM_EDGE) return v < 0 ? 0 : len - 1;
  if (mode == MG_PADM_WRAP) return ((v % len) + len) % len;
  if (len == 1) return 0;
  int64_t p = 2 * (len - 1);
  v = ((v % p) + p) % p;
  return v >= len ? p - v : v;
}
