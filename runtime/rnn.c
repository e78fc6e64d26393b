/* RNN, GRU and LSTM for the migc CPU runtime (contract in mg_rt_rnn.h).
 *
 * Per direction: one SGEMM projects every step's input at once (X W^T, with the
 * biases that sit outside any gate product folded in), then each step runs one
 * SGEMM over the whole batch for the recurrent part (h R^T) and finishes the gates
 * row by row with activation loops over contiguous runs of H values. Rows of
 * different lengths run in lockstep; a row past its length is skipped, so in the
 * reverse direction each row starts at its own last step. */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

#define ALIGN_SLACK 16

static float *align64(float *p) {
  uintptr_t u = (uintptr_t)p;
  return p + ((64 - (u & 63)) & 63) / sizeof(float);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* v[i] = f(v[i]) for i < n; the switch is outside the loops so they vectorise. */
static void act_row(const mg_rnn_act *f, float *v, int n) {
  const float a = f->alpha, b = f->beta;
  int i;
  switch (f->fn) {
  case MG_RNN_RELU:
    for (i = 0; i < n; i++) v[i] = v[i] > 0.0f ? v[i] : 0.0f;
    break;
  case MG_RNN_TANH:
    for (i = 0; i < n; i++) v[i] = tanhf(v[i]);
    break;
  case MG_RNN_SIGMOID:
    for (i = 0; i < n; i++) v[i] = 1.0f / (1.0f + expf(-v[i]));
    break;
  case MG_RNN_AFFINE:
    for (i = 0; i < n; i++) v[i] = a * v[i] + b;
    break;
  case MG_RNN_LEAKYRELU:
    for (i = 0; i < n; i++) v[i] = v[i] >= 0.0f ? v[i] : a * v[i];
    break;
  case MG_RNN_THRESHOLDEDRELU:
    for (i = 0; i < n; i++) v[i] = v[i] > a ? v[i] : 0.0f;
    break;
  case MG_RNN_SCALEDTANH:
    for (i = 0; i < n; i++) v[i] = a * tanhf(b * v[i]);
    break;
  case MG_RNN_HARDSIGMOID:
    for (i = 0; i < n; i++) {
      const float t = a * v[i] + b;
      v[i] = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    }
    break;
  case MG_RNN_ELU:
    for (i = 0; i < n; i++) v[i] = v[i] >= 0.0f ? v[i] : a * (expf(v[i]) - 1.0f);
    break;
  case MG_RNN_SOFTSIGN:
    for (i = 0; i < n; i++) v[i] = v[i] / (1.0f + fabsf(v[i]));
    break;
  case MG_RNN_SOFTPLUS:
    for (i = 0; i < n; i++) v[i] = (v[i] > 0.0f ? v[i] : 0.0f) + log1pf(expf(-fabsf(v[i])));
    break;
  }
}

/* Clamps v[0..n) to [-clip, clip] when clip > 0. */
static void clip_row(float clip, float *v, int n) {
  int i;
  if (!(clip > 0.0f)) return;
  for (i = 0; i < n; i++) v[i] = v[i] < -clip ? -clip : v[i] > clip ? clip : v[i];
}

/* Scratch layout, in floats from an aligned base. */
typedef struct {
  size_t xw, rec, h, c, tmp, bias, sg, total;
} rnn_layout;

static rnn_layout layout_of(const mg_rnn_params *p) {
  const size_t GH = (size_t)p->gates * p->H, BH = (size_t)p->B * p->H;
  rnn_layout l;
  size_t sg = mg_sgemm_scratch(p->S * p->B, (int)GH, p->I);
  sg = max_size(sg, mg_sgemm_scratch(p->B, (int)GH, p->H));
  l.xw = 0;
  l.rec = l.xw + (size_t)p->S * p->B * GH + ALIGN_SLACK;
  l.h = l.rec + (size_t)p->B * GH + ALIGN_SLACK;
  l.c = l.h + BH + ALIGN_SLACK;
  l.tmp = l.c + BH + ALIGN_SLACK;
  l.bias = l.tmp + BH + ALIGN_SLACK;
  l.sg = l.bias + GH + ALIGN_SLACK;
  l.total = l.sg + sg + ALIGN_SLACK;
  return l;
}

size_t mg_rnn_scratch(const mg_rnn_params *p) { return layout_of(p).total + ALIGN_SLACK; }

/* Offset of (direction d, batch row b) in h0/c0/y_h/y_c. */
static size_t state_off(const mg_rnn_params *p, int d, int b) {
  return p->layout ? ((size_t)b * p->dirs + d) * p->H : ((size_t)d * p->B + b) * p->H;
}

/* Row of X (and of the projected X) for step t of batch row b. */
static size_t x_row(const mg_rnn_params *p, int t, int b) {
  return p->layout ? (size_t)b * p->S + t : (size_t)t * p->B + b;
}

/* Offset of (step t, direction d, batch row b) in y. */
static size_t y_off(const mg_rnn_params *p, int t, int d, int b) {
  return p->layout ? (((size_t)b * p->S + t) * p->dirs + d) * p->H
                   : (((size_t)t * p->dirs + d) * p->B + b) * p->H;
}

static int row_len(const mg_rnn_params *p, const int32_t *lens, int b) {
  int v;
  if (!lens) return p->S;
  v = lens[b];
  return v < 0 ? 0 : v > p->S ? p->S : v;
}

/* LSTM gates of one row: pre holds the i, o, f, c pre-activations (projection plus
 * recurrence); c is updated to the new cell and h to the new hidden state. */
static void lstm_row(const mg_rnn_params *p, const mg_rnn_act *f, const float *peep, float *pre,
                     float *c, float *h, float *tmp) {
  const int H = p->H;
  float *gi = pre, *go = pre + H, *gf = pre + 2 * H, *gc = pre + 3 * H;
  int k;
  if (peep)
    for (k = 0; k < H; k++) gi[k] += peep[k] * c[k], gf[k] += peep[2 * H + k] * c[k];
  clip_row(p->clip, gi, H);
  clip_row(p->clip, gf, H);
  clip_row(p->clip, gc, H);
  act_row(&f[0], gi, H);
  if (p->input_forget)
    for (k = 0; k < H; k++) gf[k] = 1.0f - gi[k];
  else
    act_row(&f[0], gf, H);
  act_row(&f[1], gc, H);
  for (k = 0; k < H; k++) c[k] = gf[k] * c[k] + gi[k] * gc[k];
  if (peep)
    for (k = 0; k < H; k++) go[k] += peep[H + k] * c[k];
  clip_row(p->clip, go, H);
  act_row(&f[0], go, H);
  for (k = 0; k < H; k++) tmp[k] = c[k];
  clip_row(p->clip, tmp, H); /* the clip applies to h's input, not the stored cell */
  act_row(&f[2], tmp, H);
  for (k = 0; k < H; k++) h[k] = go[k] * tmp[k];
}

/* One direction of the recurrence over all batch rows. */
static void run_direction(const mg_rnn_params *p, int d, const float *x, const float *w,
                          const float *r, const float *bias_in, const int32_t *lens,
                          const float *h0, const float *c0, const float *peep, float *y,
                          float *y_h, float *y_c, float *base, const rnn_layout *l) {
  const int H = p->H, B = p->B, G = p->gates, GH = G * H;
  const int rev = p->reverse || d == 1;
  const int gru_split = G == 3 && !p->linear_before_reset; /* Rh applies to r (.) h */
  const float *Wd = w + (size_t)d * GH * p->I, *Rd = r + (size_t)d * GH * H;
  const float *Wb = bias_in ? bias_in + (size_t)d * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
  const float *P = peep ? peep + (size_t)d * 3 * H : NULL;
  const mg_rnn_act *f = &p->acts[d * (G == 1 ? 1 : G == 3 ? 2 : 3)];
  float *xw = base + l->xw, *rec = base + l->rec, *h = base + l->h, *c = base + l->c;
  float *tmp = base + l->tmp, *bsum = base + l->bias, *sg = base + l->sg;
  const size_t rows = (size_t)p->S * B;
  int b, k, s, maxlen = 0;
  size_t i;
  /* biases outside any gate product join the projection; GRU's Rb_h with
   * linear_before_reset is multiplied by r, so it stays with the recurrence */
  for (k = 0; k < GH; k++) {
    const int keep_rb = G == 3 && p->linear_before_reset && k >= 2 * H;
    bsum[k] = Wb ? Wb[k] + (keep_rb ? 0.0f : Rb[k]) : 0.0f;
  }
  mg_sgemm((int)rows, GH, p->I, 1.0f, x, p->I, 0, Wd, p->I, 1, 0.0f, xw, GH, sg);
  for (i = 0; i < rows; i++)
    for (k = 0; k < GH; k++) xw[i * GH + k] += bsum[k];
  for (b = 0; b < B; b++) {
    const size_t so = state_off(p, d, b);
    for (k = 0; k < H; k++) {
      h[(size_t)b * H + k] = h0 ? h0[so + k] : 0.0f;
      c[(size_t)b * H + k] = c0 ? c0[so + k] : 0.0f;
      tmp[(size_t)b * H + k] = 0.0f;
    }
    if (row_len(p, lens, b) > maxlen) maxlen = row_len(p, lens, b);
  }
  for (s = 0; s < maxlen; s++) {
    mg_sgemm(B, gru_split ? 2 * H : GH, H, 1.0f, h, H, 0, Rd, H, 1, 0.0f, rec, GH, sg);
    if (G == 3 && gru_split) {
      /* z and r first, then Rh (r (.) h) for the whole batch */
      for (b = 0; b < B; b++) {
        const int len = row_len(p, lens, b);
        float *rc = rec + (size_t)b * GH;
        const float *xr;
        if (s >= len) continue;
        xr = xw + x_row(p, rev ? len - 1 - s : s, b) * GH;
        for (k = 0; k < 2 * H; k++) rc[k] += xr[k];
        clip_row(p->clip, rc, 2 * H);
        act_row(&f[0], rc, 2 * H);
        for (k = 0; k < H; k++) tmp[(size_t)b * H + k] = rc[H + k] * h[(size_t)b * H + k];
      }
      mg_sgemm(B, H, H, 1.0f, tmp, H, 0, Rd + (size_t)2 * H * H, H, 1, 0.0f, rec + 2 * H, GH, sg);
    }
    for (b = 0; b < B; b++) {
      const int len = row_len(p, lens, b);
      float *rc = rec + (size_t)b * GH, *hb = h + (size_t)b * H;
      const float *xr;
      int t;
      if (s >= len) continue;
      t = rev ? len - 1 - s : s;
      xr = xw + x_row(p, t, b) * GH;
      if (G == 1) {
        for (k = 0; k < H; k++) rc[k] += xr[k];
        clip_row(p->clip, rc, H);
        act_row(&f[0], rc, H);
        memcpy(hb, rc, sizeof(float) * (size_t)H);
      } else if (G == 3) {
        float *hh = rc + 2 * H;
        if (gru_split) {
          for (k = 0; k < H; k++) hh[k] += xr[2 * H + k];
        } else {
          for (k = 0; k < 2 * H; k++) rc[k] += xr[k];
          clip_row(p->clip, rc, 2 * H);
          act_row(&f[0], rc, 2 * H);
          for (k = 0; k < H; k++)
            hh[k] = xr[2 * H + k] + rc[H + k] * (hh[k] + (Rb ? Rb[2 * H + k] : 0.0f));
        }
        clip_row(p->clip, hh, H);
        act_row(&f[1], hh, H);
        for (k = 0; k < H; k++) hb[k] = (1.0f - rc[k]) * hh[k] + rc[k] * hb[k];
      } else {
        for (k = 0; k < GH; k++) rc[k] += xr[k];
        lstm_row(p, f, P, rc, c + (size_t)b * H, hb, tmp + (size_t)b * H);
      }
      if (y) memcpy(y + y_off(p, t, d, b), hb, sizeof(float) * (size_t)H);
    }
  }
  for (b = 0; b < B; b++) {
    const size_t so = state_off(p, d, b);
    const int live = row_len(p, lens, b) > 0;
    for (k = 0; k < H; k++) {
      if (y_h) y_h[so + k] = live ? h[(size_t)b * H + k] : 0.0f;
      if (y_c) y_c[so + k] = live ? c[(size_t)b * H + k] : 0.0f;
    }
  }
}

void mg_rnn(const mg_rnn_params *p, const float *x, const float *w, const float *r,
            const float *b, const int32_t *lens, const float *h0, const float *c0,
            const float *peep, float *y, float *y_h, float *y_c, float *scratch) {
  const rnn_layout l = layout_of(p);
  float *base = align64(scratch);
  int d;
  if (y && lens) memset(y, 0, sizeof(float) * (size_t)p->S * p->dirs * p->B * p->H);
  for (d = 0; d < p->dirs; d++)
    run_direction(p, d, x, w, r, b, lens, h0, c0, peep, y, y_h, y_c, base, &l);
}
