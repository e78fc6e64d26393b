#include "window_geom.h"
#include <string.h>

int mg_window_auto_pad(const mg_node *n, int *mode) {
  /* Read without the op's attribute check: Col2Im shares the window and has none. */
  const mg_attr *a = mg_node_attr(n, "auto_pad");
  const char *s = a && a->kind == MG_ATTR_STRING ? a->s : "NOTSET";
  if (!strcmp(s, "NOTSET") || !*s) *mode = MG_PAD_NOTSET;
  else if (!strcmp(s, "VALID")) *mode = MG_PAD_VALID;
  else if (!strcmp(s, "SAME_UPPER")) *mode = MG_PAD_SAME_UPPER;
  else if (!strcmp(s, "SAME_LOWER")) *mode = MG_PAD_SAME_LOWER;
  else return -1;
  return 0;
}

mg_win_status mg_window_axis(int mode, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                             int64_t pe, int ceil_mode, const mg_win_limits *lim, int64_t *pb_out,
                             int64_t *pe_out, int64_t *out) {
  if (k < 1 || s < 1 || d < 1) return MG_WIN_NOT_POSITIVE;
  if (k > lim->window || s > lim->window || d > lim->window) return MG_WIN_TOO_LARGE;
  int64_t ek = (k - 1) * d + 1;
  if (mode == MG_PAD_SAME_UPPER || mode == MG_PAD_SAME_LOWER) {
    if (in < 0) {
      *pb_out = *pe_out = *out = -1;
      return MG_WIN_OK;
    }
    int64_t o = (in + s - 1) / s, total = (o - 1) * s + ek - in;
    if (total < 0) total = 0;
    *pb_out = mode == MG_PAD_SAME_UPPER ? total / 2 : total - total / 2;
    *pe_out = total - *pb_out;
    *out = o;
    return MG_WIN_OK;
  }
  if (mode != MG_PAD_NOTSET) pb = pe = 0;
  *pb_out = pb, *pe_out = pe, *out = -1;
  if (pb < 0 || pe < 0) return MG_WIN_NEGATIVE_PAD;
  if (pb > lim->pad || pe > lim->pad) return MG_WIN_PAD_TOO_LARGE;
  if (in < 0) return MG_WIN_OK;
  int64_t num = in + pb + pe - ek;
  if (num < 0) return MG_WIN_EMPTY;
  int64_t o = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) o--;
  *out = o;
  return MG_WIN_OK;
}

mg_win_status mg_window_init(const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                             int ceil_mode, const mg_win_limits *lim, mg_window *g) {
  const int64_t *st, *dl, *pd;
  size_t ns = mg_attr_ints(n, "strides", &st), ndl = mg_attr_ints(n, "dilations", &dl);
  size_t np = mg_attr_ints(n, "pads", &pd);
  memset(g, 0, sizeof *g);
  if (nd < 1 || nd > MG_WIN_ND || (ns && ns != (size_t)nd) || (ndl && ndl != (size_t)nd) ||
      (np && np != 2 * (size_t)nd))
    return MG_WIN_ATTR_LENGTH;
  if (mg_window_auto_pad(n, &g->mode)) return MG_WIN_AUTO_PAD;
  g->nd = nd;
  for (int i = 0; i < nd; i++) {
    g->in[i] = in[i], g->k[i] = k[i], g->s[i] = ns ? st[i] : 1, g->d[i] = ndl ? dl[i] : 1;
    mg_win_status r = mg_window_axis(g->mode, in[i], k[i], g->s[i], g->d[i], np ? pd[i] : 0,
                                     np ? pd[i + nd] : 0, ceil_mode, lim, &g->pb[i], &g->pe[i], &g->out[i]);
    if (r != MG_WIN_OK) return r;
  }
  return MG_WIN_OK;
}

/* floor(a / 2) for any a. */
static int64_t half_floor(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

mg_win_status mg_window_transpose(const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                                  const mg_win_limits *lim, mg_window *g) {
  const int64_t *st, *dl, *pd, *op, *osh;
  size_t ns = mg_attr_ints(n, "strides", &st), ndl = mg_attr_ints(n, "dilations", &dl);
  size_t np = mg_attr_ints(n, "pads", &pd), nop = mg_attr_ints(n, "output_padding", &op);
  size_t nos = mg_attr_ints(n, "output_shape", &osh);
  memset(g, 0, sizeof *g);
  if (nos == (size_t)nd + 2) osh += 2, nos -= 2;
  if (nd < 1 || nd > MG_WIN_ND || (ns && ns != (size_t)nd) || (ndl && ndl != (size_t)nd) ||
      (np && np != 2 * (size_t)nd) || (nop && nop != (size_t)nd) || (nos && nos != (size_t)nd))
    return MG_WIN_ATTR_LENGTH;
  if (mg_window_auto_pad(n, &g->mode)) return MG_WIN_AUTO_PAD;
  const int same = g->mode == MG_PAD_SAME_UPPER || g->mode == MG_PAD_SAME_LOWER;
  g->nd = nd;
  for (int i = 0; i < nd; i++) {
    int64_t s = ns ? st[i] : 1, d = ndl ? dl[i] : 1, o = nop ? op[i] : 0, full = 0, total = 0;
    g->in[i] = in[i], g->k[i] = k[i], g->s[i] = s, g->d[i] = d;
    if (s < 1 || d < 1 || o < 0) return MG_WIN_NOT_POSITIVE;
    if (s > lim->window || d > lim->window || o > lim->window) return MG_WIN_TOO_LARGE;
    int known = in[i] >= 0 && k[i] >= 0;
    if (known && !(mg_mul_ovf(s, in[i] - 1, &full) && mg_mul_ovf(k[i] - 1, d, &total) &&
                   mg_add_ovf(full, total, &full) && mg_add_ovf(full, o + 1, &full)))
      return MG_WIN_TOO_LARGE;
    if (nos || same) {
      /* the total padding from the requested size */
      g->out[i] = nos ? osh[i] : in[i] >= 0 && mg_mul_ovf(in[i], s, &total) ? total : -1;
      if (!nos && in[i] >= 0 && g->out[i] < 0) return MG_WIN_TOO_LARGE;
      if (!known || g->out[i] < 0) {
        g->pb[i] = g->pe[i] = -1;
        continue;
      }
      if (!mg_sub_ovf(full, g->out[i], &total)) return MG_WIN_TOO_LARGE;
      g->pb[i] = g->mode == MG_PAD_SAME_UPPER ? half_floor(total) : total - half_floor(total);
      g->pe[i] = total - g->pb[i];
    } else {
      g->pb[i] = g->mode == MG_PAD_NOTSET && np ? pd[i] : 0;
      g->pe[i] = g->mode == MG_PAD_NOTSET && np ? pd[i + nd] : 0;
      if (g->pb[i] < -lim->pad || g->pb[i] > lim->pad || g->pe[i] < -lim->pad || g->pe[i] > lim->pad)
        return MG_WIN_PAD_TOO_LARGE;
      g->out[i] = known ? full - g->pb[i] - g->pe[i] : -1;
      if (!known) continue;
    }
    if (g->out[i] < 0) return MG_WIN_EMPTY;
    if (g->pb[i] < -lim->pad || g->pb[i] > lim->pad) return MG_WIN_PAD_TOO_LARGE;
  }
  return MG_WIN_OK;
}
