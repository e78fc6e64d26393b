/* Helpers shared by the nn-family emitters (c_nn.c, c_resize.c, c_linalg.c). */
#ifndef MG_C_NN_UTIL_H
#define MG_C_NN_UTIL_H
#include "cg.h"
#include "window_geom.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* cg_need for a runtime file of this family and the files its calls reach:
 * nn.c and matmul.c call mg_bias_act (conv.c), which lives beside the
 * convolutions that call mg_sgemm (sgemm.c). */
static inline void nn_need(cg_ctx *c, const char *file) {
  cg_need(c, file);
  if (strcmp(file, "resize.c")) {
    cg_need(c, "conv.c");
    cg_need(c, "sgemm.c");
  }
}

/* ---- window geometry (c_window.c) ---- */

/* One sliding window over nd spatial dims (at most MG_ND_MAX here). */
typedef mg_window nn_window;

/* n's auto_pad as MG_PAD_*; -1 (reported) when unknown. */
int nn_read_auto_pad(cg_ctx *c, const mg_node *n, int *mode);
/* Reads strides, dilations, pads and auto_pad over nd spatial dims of sizes in with
 * kernel k and computes the output sizes (ceil_mode as the pools define it: the
 * last window must start inside the input or its begin pad). Returns 0, or -1
 * after reporting. */
int nn_window_init(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                   int ceil_mode, nn_window *g);

/* Checks kernel_shape (when given) against the weight's spatial dims k; -1 after
 * reporting. */
int nn_check_kernel_shape(cg_ctx *c, const mg_node *n, int nd, const int64_t *k);
/* ConvTranspose's window (output sizes and begin pads); -1 after reporting. */
int nn_transpose_window(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                        nn_window *g);

/* Whether value v (an input or output that must be present) is a float32 tensor. */
static inline int nn_is_f32(const mg_value *v) { return v && v->dtype == MG_F32; }
#endif
