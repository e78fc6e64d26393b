/* VJP of LSTM: backpropagation through time, per direction and batch row, with
 * the forward recomputed in double to keep every gate. Gate blocks as ONNX stores
 * them: (i, o, f, c); peepholes P (i, o, f). Handled: both directions, layouts 0
 * and 1, initial states, peepholes, cotangents on Y, Y_h and Y_c. Not handled
 * (a diagnostic): activations other than the default (Sigmoid, Tanh, Tanh), clip,
 * input_forget, and sequence_lens shorter than the sequence. */
#include "vjp.h"
#include <math.h>
#include <string.h>
#include <strings.h>

static double sigm(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

/* Whether n uses only the default activations, no clip and no input_forget. */
static int default_form(const vjp_args *a) {
  const mg_attr *acts = mg_node_attr(a->n, "activations");
  static const char *const dflt[3] = {"Sigmoid", "Tanh", "Tanh"};
  for (size_t i = 0; acts && acts->kind == MG_ATTR_STRINGS && i < acts->n; i++)
    if (strcasecmp(acts->strings[i], dflt[i % 3])) return vjp_unsupported(a, "activation '%s'", acts->strings[i]);
  const mg_attr *clip = mg_node_attr(a->n, "clip");
  if (clip && clip->kind == MG_ATTR_FLOAT && clip->f > 0) return vjp_unsupported(a, "clip");
  if (mg_attr_int(a->n, "input_forget", 0)) return vjp_unsupported(a, "input_forget");
  return 0;
}

/* Accumulates the gradients of one LSTM node. */
static int lstm(const vjp_args *a) {
  if (!vjp_any_gy(a)) return 0;
  if (default_form(a)) return -1;
  const mg_node *n = a->n;
  const mg_array *X = a->x[0], *SL = n->n_in > 4 ? a->x[4] : NULL;
  int layout = (int)mg_attr_int(n, "layout", 0);
  const char *dir = mg_attr_str(n, "direction", "forward");
  int D = !strcmp(dir, "bidirectional") ? 2 : 1, rev_only = !strcmp(dir, "reverse");
  int64_t S = layout ? X->dims[1] : X->dims[0], Bn = layout ? X->dims[0] : X->dims[1], I = X->dims[2];
  int64_t H = a->x[2]->dims[2], GH = 4 * H;
  for (int64_t b = 0; SL && b < it_numel(SL); b++)
    if (it_get_i64(SL, b) != S) return vjp_unsupported(a, "sequence_lens shorter than the sequence");
  double *in[8] = {0};
  int rc = 0;
  for (int i = 0; i < 8 && i < n->n_in && !rc; i++)
    if (i != 4 && a->x[i] && !(in[i] = vjp_f64(a, a->x[i]))) rc = -1;
  /* per step: gates i, o, f, g (after activation), c_t, c_{t-1}, h_{t-1} */
  int64_t per = 7 * H;
  double *hist = rc ? NULL : vjp_zeros(a, S * per), *da = hist ? vjp_zeros(a, GH + 2 * H) : NULL;
  if (!da) rc = -1;
  const double *gy = a->gy[0], *gyh = n->n_out > 1 ? a->gy[1] : NULL, *gyc = n->n_out > 2 ? a->gy[2] : NULL;
  for (int d = 0; d < D && !rc; d++) {
    int rev = rev_only || d == 1;
    const double *W = in[1] + d * GH * I, *R = in[2] + d * GH * H;
    const double *Wb = in[3] ? in[3] + d * 2 * GH : NULL, *P = in[7] ? in[7] + d * 3 * H : NULL;
    double *gW = a->gx[1] ? a->gx[1] + d * GH * I : NULL, *gR = a->gx[2] ? a->gx[2] + d * GH * H : NULL;
    double *gB = in[3] && a->gx[3] ? a->gx[3] + d * 2 * GH : NULL;
    double *gP = in[7] && a->gx[7] ? a->gx[7] + d * 3 * H : NULL;
    for (int64_t b = 0; b < Bn; b++) {
      int64_t so = layout ? (b * D + d) * H : ((int64_t)d * Bn + b) * H;
      /* forward, keeping the history */
      for (int64_t s = 0; s < S; s++) {
        int64_t t = rev ? S - 1 - s : s;
        const double *xt = in[0] + (layout ? (b * S + t) * I : (t * Bn + b) * I);
        double *hs = hist + s * per, *hp = hs + 6 * H, *cp = hs + 5 * H;
        for (int64_t k = 0; k < H; k++) {
          /* h_{t-1} = o tanh(c) of the step before, or the initial state */
          hp[k] = s ? hist[(s - 1) * per + H + k] * tanh(hist[(s - 1) * per + 4 * H + k])
                    : in[5] ? in[5][so + k] : 0;
          cp[k] = s ? hist[(s - 1) * per + 4 * H + k] : in[6] ? in[6][so + k] : 0;
        }
        for (int64_t row = 0; row < GH; row++) {
          double v = Wb ? Wb[row] + Wb[GH + row] : 0;
          for (int64_t i = 0; i < I; i++) v += W[row * I + i] * xt[i];
          for (int64_t i = 0; i < H; i++) v += R[row * H + i] * hp[i];
          da[row] = v;
        }
        for (int64_t k = 0; k < H; k++) {
          double ig = sigm(da[k] + (P ? P[k] * cp[k] : 0));
          double fg = sigm(da[2 * H + k] + (P ? P[2 * H + k] * cp[k] : 0));
          double gg = tanh(da[3 * H + k]);
          double c = fg * cp[k] + ig * gg;
          double og = sigm(da[H + k] + (P ? P[H + k] * c : 0));
          hs[k] = ig, hs[H + k] = og, hs[2 * H + k] = fg, hs[3 * H + k] = gg, hs[4 * H + k] = c;
        }
      }
      /* backward through time; dh, dc live in da's tail */
      double *dh = da + GH, *dc = dh + H;
      for (int64_t k = 0; k < H; k++) {
        dh[k] = gyh ? gyh[so + k] : 0;
        dc[k] = gyc ? gyc[so + k] : 0;
      }
      for (int64_t s = S - 1; s >= 0; s--) {
        int64_t t = rev ? S - 1 - s : s;
        const double *xt = in[0] + (layout ? (b * S + t) * I : (t * Bn + b) * I);
        const double *hs = hist + s * per, *cp = hs + 5 * H, *hp = hs + 6 * H;
        double *gxt = a->gx[0] ? a->gx[0] + (layout ? (b * S + t) * I : (t * Bn + b) * I) : NULL;
        int64_t yo = layout ? ((b * S + t) * D + d) * H : ((t * D + d) * Bn + b) * H;
        double dgate[4 * 64], *dg = H <= 64 ? dgate : NULL;
        if (!dg && !(dg = vjp_zeros(a, GH))) { rc = -1; break; }
        for (int64_t k = 0; k < H; k++) {
          double ig = hs[k], og = hs[H + k], fg = hs[2 * H + k], gg = hs[3 * H + k], c = hs[4 * H + k];
          double h_ = dh[k] + (gy ? gy[yo + k] : 0), tc = tanh(c);
          double dao = h_ * tc * og * (1 - og);
          double dcc = dc[k] + h_ * og * (1 - tc * tc) + (P ? dao * P[H + k] : 0);
          double dai = dcc * gg * ig * (1 - ig), daf = dcc * cp[k] * fg * (1 - fg);
          double dag = dcc * ig * (1 - gg * gg);
          dc[k] = dcc * fg + (P ? dai * P[k] + daf * P[2 * H + k] : 0);
          if (gP) gP[k] += dai * cp[k], gP[H + k] += dao * c, gP[2 * H + k] += daf * cp[k];
          dg[k] = dai, dg[H + k] = dao, dg[2 * H + k] = daf, dg[3 * H + k] = dag;
        }
        for (int64_t k = 0; k < H; k++) dh[k] = 0;
        for (int64_t row = 0; row < GH; row++) {
          double v = dg[row];
          if (v == 0) continue;
          if (gW) for (int64_t i = 0; i < I; i++) gW[row * I + i] += v * xt[i];
          if (gR) for (int64_t i = 0; i < H; i++) gR[row * H + i] += v * hp[i];
          if (gB) gB[row] += v, gB[GH + row] += v;
          if (gxt) for (int64_t i = 0; i < I; i++) gxt[i] += v * W[row * I + i];
          for (int64_t i = 0; i < H; i++) dh[i] += v * R[row * H + i];
        }
        if (dg != dgate) mg_free(dg);
      }
      if (rc) break;
      for (int64_t k = 0; k < H; k++) {
        if (in[5] && a->gx[5]) a->gx[5][so + k] += dh[k];
        if (in[6] && a->gx[6]) a->gx[6][so + k] += dc[k];
      }
    }
  }
  for (int i = 0; i < 8; i++) mg_free(in[i]);
  mg_free(hist), mg_free(da);
  return rc;
}

/* The rnn family's entry point (vjp.h). */
int vjp_rnn(const vjp_args *a) { return lstm(a); }
