/* Sliding-window geometry shared by the convolution and pooling emitters
 * (c_nn.c, c_nn3d.c, c_quant.c): auto_pad, pads, strides, dilations and ceil_mode
 * resolved to output sizes once, as ONNX defines them. */
#include "c_nn_util.h"

#include <stdlib.h>
#include <string.h>


int nn_read_auto_pad(cg_ctx *c, const mg_node *n, int *mode) {
  const char *s = mg_attr_str(n, "auto_pad", "NOTSET");
  if (!strcmp(s, "NOTSET") || !*s) *mode = PAD_NOTSET;
  else if (!strcmp(s, "VALID")) *mode = PAD_VALID;
  else if (!strcmp(s, "SAME_UPPER")) *mode = PAD_SAME_UPPER;
  else if (!strcmp(s, "SAME_LOWER")) *mode = PAD_SAME_LOWER;
  else return cg_unsupported(c, n, "auto_pad '%s'", s);
  return 0;
}

/* Reads strides, dilations, pads and auto_pad over nd spatial dims of sizes in with
 * kernel k and computes the output sizes (ceil_mode as the pools define it).
 * Returns 0, or -1 after reporting. */
int nn_window_init(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                     int ceil_mode, nn_window *g) {
  const int64_t *st, *dl, *pd;
  size_t ns, ndl, np;
  int mode, i;
  if (nd < 1 || nd > MG_ND_MAX) return cg_unsupported(c, n, "%d spatial dimensions", nd);
  ns = mg_attr_ints(n, "strides", &st);
  ndl = mg_attr_ints(n, "dilations", &dl);
  np = mg_attr_ints(n, "pads", &pd);
  if ((ns && ns != (size_t)nd) || (ndl && ndl != (size_t)nd) || (np && np != 2 * (size_t)nd))
    return cg_unsupported(c, n, "strides, dilations or pads do not match %d spatial dims", nd);
  if (nn_read_auto_pad(c, n, &mode)) return -1;
  memset(g, 0, sizeof *g);
  g->nd = nd;
  for (i = 0; i < nd; i++) {
    const int64_t x = in[i], kk = k[i], s = ns ? st[i] : 1, d = ndl ? dl[i] : 1;
    int64_t ek, num, o;
    if (kk < 1 || s < 1 || d < 1 || kk > (1 << 20) || s > (1 << 20) || d > (1 << 20))
      return cg_unsupported(c, n, "kernel, strides or dilations out of range");
    g->in[i] = x, g->k[i] = kk, g->s[i] = s, g->d[i] = d;
    ek = (kk - 1) * d + 1;
    if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
      int64_t total;
      o = (x + s - 1) / s;
      total = (o - 1) * s + ek - x;
      if (total < 0) total = 0;
      g->pb[i] = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
      g->pe[i] = total - g->pb[i];
      g->out[i] = o;
      continue;
    }
    g->pb[i] = mode == PAD_NOTSET && np ? pd[i] : 0;
    g->pe[i] = mode == PAD_NOTSET && np ? pd[i + nd] : 0;
    if (g->pb[i] < 0 || g->pe[i] < 0) return cg_unsupported(c, n, "negative pads");
    if (g->pb[i] > (1 << 20) || g->pe[i] > (1 << 20)) return cg_unsupported(c, n, "pads out of range");
    num = x + g->pb[i] + g->pe[i] - ek;
    if (num < 0) return cg_unsupported(c, n, "the kernel is larger than the padded input");
    o = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
    if (ceil_mode && (o - 1) * s >= x + g->pb[i]) o--;
    g->out[i] = o;
  }
  return 0;
}


/* ConvTranspose's geometry over nd spatial dims: strides, dilations,
 * output_padding, and either pads or (output_shape / SAME auto_pad) the total
 * padding derived from the requested size, SAME_UPPER putting the odd one at the
 * end and everything else at the beginning, as ONNX specifies. Fills in, k, s, d,
 * pb and out (pe is unused). Returns 0, or -1 after reporting. */
int nn_transpose_window(cg_ctx *c, const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                        nn_window *g) {
  const int64_t *st, *dl, *pd, *op, *osh;
  size_t ns, ndl, np, nop, nos;
  int mode, i;
  if (nd < 1 || nd > MG_ND_MAX) return cg_unsupported(c, n, "%d spatial dimensions", nd);
  if (nn_read_auto_pad(c, n, &mode)) return -1;
  ns = mg_attr_ints(n, "strides", &st);
  ndl = mg_attr_ints(n, "dilations", &dl);
  np = mg_attr_ints(n, "pads", &pd);
  nop = mg_attr_ints(n, "output_padding", &op);
  nos = mg_attr_ints(n, "output_shape", &osh);
  if (nos == (size_t)nd + 2) osh += 2, nos -= 2;
  if ((ns && ns != (size_t)nd) || (ndl && ndl != (size_t)nd) || (np && np != 2 * (size_t)nd) ||
      (nop && nop != (size_t)nd) || (nos && nos != (size_t)nd))
    return cg_unsupported(c, n, "strides, dilations, pads, output_padding or output_shape do not "
                                "match %d spatial dims", nd);
  memset(g, 0, sizeof *g);
  g->nd = nd;
  for (i = 0; i < nd; i++) {
    int64_t full, o = nop ? op[i] : 0;
    g->in[i] = in[i], g->k[i] = k[i], g->s[i] = ns ? st[i] : 1, g->d[i] = ndl ? dl[i] : 1;
    if (g->s[i] < 1 || g->d[i] < 1 || o < 0 || g->s[i] > (1 << 20) || g->d[i] > (1 << 20) || o > (1 << 20))
      return cg_unsupported(c, n, "strides, dilations or output_padding out of range");
    full = g->s[i] * (g->in[i] - 1) + o + (g->k[i] - 1) * g->d[i] + 1;
    if (nos || mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
      /* total padding from the requested size; SAME_UPPER puts the odd
       * one at the end, everything else at the beginning */
      int64_t total, half;
      g->out[i] = nos ? osh[i] : g->in[i] * g->s[i];
      total = full - g->out[i];
      half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g->pb[i] = mode == PAD_SAME_UPPER ? half : total - half;
    } else {
      int64_t pe = mode == PAD_NOTSET && np ? pd[i + nd] : 0;
      g->pb[i] = mode == PAD_NOTSET && np ? pd[i] : 0;
      if (g->pb[i] < -(1 << 20) || g->pb[i] > (1 << 20) || pe < -(1 << 20) || pe > (1 << 20))
        return cg_unsupported(c, n, "pads out of range");
      g->out[i] = full - g->pb[i] - pe;
    }
    if (g->out[i] < 1) return cg_unsupported(c, n, "empty output");
    if (g->pb[i] < -(1 << 20) || g->pb[i] > (1 << 20)) return cg_unsupported(c, n, "pads out of range");
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
