/* npycmp GOT.npy WANT.npy [--rel-max R] [--cosine C]
 *
 * Test helper: compares two arrays the way the issues state agreement with
 * PyTorch: max|got - want| <= R * max|want| (default R = 1e-4) and cosine
 * similarity >= C (default 0.99999). Prints the figures; exit 0 when both hold,
 * 1 when not, 2 on bad input. */
#include "npy.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double get(const mg_array *a, int64_t k) {
  return mg_load_f64(a->dtype, (const unsigned char *)a->data + (size_t)k * mg_dtype_size(a->dtype));
}

int main(int argc, char **argv) {
  double rel_max = 1e-4, cos_min = 0.99999;
  const char *paths[2];
  int np = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rel-max") && i + 1 < argc) rel_max = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cosine") && i + 1 < argc) cos_min = atof(argv[++i]);
    else if (np < 2) paths[np++] = argv[i];
  }
  if (np != 2) {
    fprintf(stderr, "usage: npycmp GOT.npy WANT.npy [--rel-max R] [--cosine C]\n");
    return 2;
  }
  mg_diags d;
  mg_diags_init(&d);
  mg_array a, b;
  if (npy_read_file(paths[0], &a, &d) || npy_read_file(paths[1], &b, &d)) {
    char line[1024];
    for (size_t i = 0; i < d.count; i++) {
      mg_diag_format(&d.items[i], line, sizeof line);
      fprintf(stderr, "%s\n", line);
    }
    return 2;
  }
  int same = a.rank == b.rank;
  for (int i = 0; same && i < a.rank; i++) same = a.dims[i] == b.dims[i];
  if (!same) {
    fprintf(stderr, "npycmp: shapes differ\n");
    return 1;
  }
  int64_t n = 1;
  for (int i = 0; i < a.rank; i++) n *= a.dims[i];
  double max_err = 0, max_ref = 0, dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = get(&a, i), y = get(&b, i);
    double e = fabs(x - y);
    if (isnan(e)) e = INFINITY;
    if (e > max_err) max_err = e;
    if (fabs(y) > max_ref) max_ref = fabs(y);
    dot += x * y, na += x * x, nb += y * y;
  }
  double cosine = na > 0 && nb > 0 ? dot / sqrt(na * nb) : (na == nb ? 1 : 0);
  double ratio = max_ref > 0 ? max_err / max_ref : max_err;
  int ok = ratio <= rel_max && cosine >= cos_min;
  printf("max_abs_err %.3g max_abs_ref %.3g ratio %.3g cosine %.9f %s\n", max_err, max_ref, ratio,
         cosine, ok ? "ok" : "FAIL");
  mg_array_free(&a);
  mg_array_free(&b);
  mg_diags_free(&d);
  return ok ? 0 : 1;
}
