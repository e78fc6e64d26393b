/* Sliding-window geometry of the convolution and pooling emitters (c_nn.c,
 * c_nn3d.c, c_quant.c): core/window_geom.h computes it, as for every other stage;
 * this file words the diagnostics and holds the backend's bounds. */
#include "c_nn_util.h"

#include <stdlib.h>
#include <string.h>


/* The limits of this backend's windows: the runtime's parameters are ints. */
static const mg_win_limits nn_limits = {(int64_t)1 << 20, (int64_t)1 << 20};

int nn_read_auto_pad(cg_ctx *c, const mg_node *n, int *mode) {
  if (mg_window_auto_pad(n, mode))
    return cg_unsupported(c, n, "auto_pad '%s'", mg_attr_str(n, "auto_pad", "NOTSET"));
  return 0;
}

/* Reads strides, dilations, pads and auto_pad over nd spatial dims of sizes in with
 * kernel k and computes the output sizes (core/window_geom.h; ceil_mode as the
 * pools define it). Returns 0, or -1 after reporting. */
int nn_window_init(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                     int ceil_mode, nn_window *g) {
  if (nd < 1 || nd > MG_ND_MAX) return cg_unsupported(c, n, "%d spatial dimensions", nd);
  switch (mg_window_init(n, nd, in, k, ceil_mode, &nn_limits, g)) {
  case MG_WIN_OK: return 0;
  case MG_WIN_ATTR_LENGTH:
    return cg_unsupported(c, n, "strides, dilations or pads do not match %d spatial dims", nd);
  case MG_WIN_AUTO_PAD: return nn_read_auto_pad(c, n, &g->mode);
  case MG_WIN_NOT_POSITIVE:
  case MG_WIN_TOO_LARGE: return cg_unsupported(c, n, "kernel, strides or dilations out of range");
  case MG_WIN_NEGATIVE_PAD: return cg_unsupported(c, n, "negative pads");
  case MG_WIN_PAD_TOO_LARGE: return cg_unsupported(c, n, "pads out of range");
  case MG_WIN_EMPTY: break;
  }
  return cg_unsupported(c, n, "the kernel is larger than the padded input");
}


/* ConvTranspose's geometry over nd spatial dims (core/window_geom.h): strides,
 * dilations, output_padding, and either pads or (output_shape / SAME auto_pad) the
 * total padding derived from the requested size. Fills in, k, s, d, pb and out;
 * pe is left 0, as the runtime takes none. Returns 0, or -1 after reporting. */
int nn_transpose_window(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                        nn_window *g) {
  if (nd < 1 || nd > MG_ND_MAX) return cg_unsupported(c, n, "%d spatial dimensions", nd);
  switch (mg_window_transpose(n, nd, in, k, &nn_limits, g)) {
  case MG_WIN_OK: break;
  case MG_WIN_ATTR_LENGTH:
    return cg_unsupported(c, n, "strides, dilations, pads, output_padding or output_shape do not "
                                "match %d spatial dims", nd);
  case MG_WIN_AUTO_PAD: return nn_read_auto_pad(c, n, &g->mode);
  case MG_WIN_NOT_POSITIVE:
  case MG_WIN_TOO_LARGE: return cg_unsupported(c, n, "strides, dilations or output_padding out of range");
  case MG_WIN_NEGATIVE_PAD:
  case MG_WIN_PAD_TOO_LARGE: return cg_unsupported(c, n, "pads out of range");
  case MG_WIN_EMPTY: return cg_unsupported(c, n, "empty output");
  }
  for (int i = 0; i < nd; i++) {
    if (g->out[i] < 1) return cg_unsupported(c, n, "empty output");
    g->pe[i] = 0;
  }
  return 0;
}

/* Checks kernel_shape (when given) against the weight's spatial dims. */
int nn_check_kernel_shape(cg_ctx *c, const mg_node *n, int nd, const int64_t *k) {
  const int64_t *ks;
  size_t nk = mg_attr_ints(n, "kernel_shape", &ks);
  int i;
  if (!nk) return 0;
  if (nk != (size_t)nd) return cg_unsupported(c, n, "kernel_shape does not match the weight");
  for (i = 0; i < nd; i++)
    if (ks[i] != k[i]) return cg_unsupported(c, n, "kernel_shape does not match the weight");
  return 0;
}
