/* Helpers shared by the nn-family emitters (c_nn.c, c_resize.c, c_linalg.c). */
#ifndef MG_C_NN_UTIL_H
#define MG_C_NN_UTIL_H
#include "cg.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>

/* A float as an exact C99 constant expression: a hex float literal, or INFINITY /
 * NAN (mg_rt_nn.h includes math.h for them). buf needs 40 chars; returns buf. */
static inline const char *nn_flit(char *buf, float f) {
  if (isnan(f)) snprintf(buf, 40, "NAN");
  else if (isinf(f)) snprintf(buf, 40, f > 0 ? "INFINITY" : "-INFINITY");
  else snprintf(buf, 40, "%af", (double)f);
  return buf;
}

/* Whether every value fits the runtime's int parameters (with room for products
 * the kernels form, which are bounded by element counts checked separately). */
static inline int nn_fits_int(int64_t v) { return v >= INT_MIN / 2 && v <= INT_MAX / 2; }

/* Whether value v (an input or output that must be present) is a float32 tensor. */
static inline int nn_is_f32(const mg_value *v) { return v && v->dtype == MG_F32; }
#endif
