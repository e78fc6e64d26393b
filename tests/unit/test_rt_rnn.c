/* Unit tests for the rnn runtime family (runtime/rnn.c, conv_nd.c, sample.c): each
 * kernel against a naive double-precision reference written here, straight from
 * the ONNX equations, over randomised shapes (size-1 dims, odd sizes, strides,
 * dilations, asymmetric pads, both layouts and all directions, ragged lengths).
 *
 * Tolerance: sums of n float terms may differ from the exact sum by rounding only;
 * the checks allow (4*sqrt(n) + 8)*eps*mag (recurrences compound that over steps,
 * so they get a looser fixed bound), far below what a wrong or missing term gives.
 * Built against migcruntime and with MG_RUNTIME_PORTABLE and tiny SGEMM blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mg_runtime.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_float(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }

static float *rnd_array(size_t n) {
  float *a = malloc((n ? n : 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i < n; i++) a[i] = rnd_float();
  return a;
}

/* An output buffer of n floats filled with NaN plus a guard after it. */
static float *out_array(size_t n) {
  float *a = malloc((n + 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i < n; i++) a[i] = NAN;
  a[n] = 4321.0f;
  return a;
}
static void out_check_free(float *a, size_t n) {
  assert_true(a[n] == 4321.0f);
  free(a);
}
static float *scratch_of(size_t n) {
  float *s = malloc((n + 1) * sizeof(float));
  assert_non_null(s);
  return s;
}

static double sum_tol(double mag, double n) {
  return (4.0 * sqrt(n) + 8.0) * FLT_EPSILON * mag + 1e-30;
}

static void expect_near(double got, double ref, double tol, const char *what, size_t at) {
  if (isnan(ref) && isnan(got)) return;
  if (isinf(ref) && got == ref) return;
  if (!(fabs(got - ref) <= tol))
    fail_msg("%s[%zu] = %.9g, reference %.9g (tol %.3g)", what, at, got, ref, tol);
}

static size_t prodi(const int *v, int n) {
  size_t r = 1;
  int i;
  for (i = 0; i < n; i++) r *= (size_t)v[i];
  return r;
}
static void unflat(size_t f, const int *dims, int n, int *idx) {
  int i;
  for (i = n - 1; i >= 0; i--) idx[i] = (int)(f % (size_t)dims[i]), f /= (size_t)dims[i];
}

/* ------------------------------------------------------ RNN, GRU, LSTM */

static double ref_act(const mg_rnn_act *a, double x) {
  switch (a->fn) {
  case MG_RNN_RELU: return x > 0 ? x : 0;
  case MG_RNN_TANH: return tanh(x);
  case MG_RNN_SIGMOID: return 1 / (1 + exp(-x));
  case MG_RNN_AFFINE: return a->alpha * x + a->beta;
  case MG_RNN_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
  case MG_RNN_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
  case MG_RNN_SCALEDTANH: return a->alpha * tanh(a->beta * x);
  case MG_RNN_HARDSIGMOID: return fmax(0, fmin(1, a->alpha * x + a->beta));
  case MG_RNN_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
  case MG_RNN_SOFTSIGN: return x / (1 + fabs(x));
  case MG_RNN_SOFTPLUS: return x > 0 ? x + log(1 + exp(-x)) : log(1 + exp(x));
  }
  return x;
}

static double clipd(const mg_rnn_params *p, double v) {
  if (p->clip > 0) v = v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
  return v;
}

/* The spec's equations for one row and direction, in double. */
static void ref_rnn(const mg_rnn_params *p, const float *x, const float *w, const float *r,
                    const float *b, const int32_t *lens, const float *h0, const float *c0,
                    const float *peep, double *y, double *yh, double *yc) {
  const int H = p->H, G = p->gates, GH = G * H, I = p->I;
  const int per = G == 1 ? 1 : G == 3 ? 2 : 3;
  int d, bb, s, k, i;
  double h[64], c[64], hn[64], g[256], rg[64];
  memset(y, 0, sizeof(double) * (size_t)p->S * p->dirs * p->B * H);
  for (d = 0; d < p->dirs; d++)
    for (bb = 0; bb < p->B; bb++) {
      const int len = lens ? lens[bb] : p->S, rev = p->reverse || d == 1;
      const size_t so = p->layout ? ((size_t)bb * p->dirs + d) * H : ((size_t)d * p->B + bb) * H;
      const float *W = w + (size_t)d * GH * I, *R = r + (size_t)d * GH * H;
      const float *Wb = b ? b + (size_t)d * 2 * GH : NULL;
      const float *P = peep ? peep + (size_t)d * 3 * H : NULL;
      const mg_rnn_act *f = p->acts + d * per;
      for (k = 0; k < H; k++) h[k] = h0 ? h0[so + k] : 0, c[k] = c0 ? c0[so + k] : 0;
      for (s = 0; s < len; s++) {
        const int t = rev ? len - 1 - s : s;
        const float *xt = x + (p->layout ? (size_t)bb * p->S + t : (size_t)t * p->B + bb) * I;
        double wx[256], rh[256];
        for (k = 0; k < GH; k++) {
          wx[k] = Wb ? Wb[k] : 0, rh[k] = Wb ? Wb[GH + k] : 0;
          for (i = 0; i < I; i++) wx[k] += (double)W[(size_t)k * I + i] * xt[i];
          for (i = 0; i < H; i++) rh[k] += (double)R[(size_t)k * H + i] * h[i];
        }
        if (G == 1) {
          for (k = 0; k < H; k++) hn[k] = ref_act(&f[0], clipd(p, wx[k] + rh[k]));
        } else if (G == 3) {
          for (k = 0; k < H; k++) rg[k] = ref_act(&f[0], clipd(p, wx[H + k] + rh[H + k]));
          for (k = 0; k < H; k++) {
            const double z = ref_act(&f[0], clipd(p, wx[k] + rh[k]));
            double rec, hh;
            if (p->linear_before_reset) {
              rec = rg[k] * rh[2 * H + k];
            } else {
              rec = Wb ? Wb[GH + 2 * H + k] : 0;
              for (i = 0; i < H; i++) rec += (double)R[(size_t)(2 * H + k) * H + i] * rg[i] * h[i];
            }
            hh = ref_act(&f[1], clipd(p, wx[2 * H + k] + rec));
            hn[k] = (1 - z) * hh + z * h[k];
          }
        } else {
          for (k = 0; k < GH; k++) g[k] = wx[k] + rh[k];
          for (k = 0; k < H; k++) {
            const double ii = ref_act(&f[0], clipd(p, g[k] + (P ? P[k] * c[k] : 0)));
            const double ff = p->input_forget ? 1 - ii
                                              : ref_act(&f[0], clipd(p, g[2 * H + k] + (P ? P[2 * H + k] * c[k] : 0)));
            const double cc = ref_act(&f[1], clipd(p, g[3 * H + k]));
            const double cn = ff * c[k] + ii * cc;
            const double o = ref_act(&f[0], clipd(p, g[H + k] + (P ? P[H + k] * cn : 0)));
            hn[k] = o * ref_act(&f[2], clipd(p, cn));
            c[k] = cn;
          }
        }
        memcpy(h, hn, sizeof(double) * (size_t)H);
        memcpy(y + (p->layout ? (((size_t)bb * p->S + t) * p->dirs + d) * H
                              : (((size_t)t * p->dirs + d) * p->B + bb) * H),
               h, sizeof(double) * (size_t)H);
      }
      for (k = 0; k < H; k++) {
        yh[so + k] = len > 0 ? h[k] : 0;
        yc[so + k] = len > 0 ? c[k] : 0;
      }
    }
}

static void test_rnn(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 120; trial++) {
    mg_rnn_params p;
    const int G = trial % 3 == 0 ? 1 : trial % 3 == 1 ? 3 : 4;
    int D, k, use_lens = rnd_int(0, 1);
    size_t nx, nw, nr, nb, ns, ny, i;
    float *x, *w, *r, *b, *h0, *c0, *peep, *y, *yh, *yc, *scr;
    int32_t lens[8];
    double *ry, *ryh, *ryc, tol_rel;
    memset(&p, 0, sizeof p);
    p.gates = G;
    p.S = rnd_int(1, 6), p.B = rnd_int(1, 5), p.I = rnd_int(1, 9), p.H = rnd_int(1, 12);
    k = rnd_int(0, 2);
    p.dirs = D = k == 2 ? 2 : 1, p.reverse = k == 1, p.layout = rnd_int(0, 1);
    p.clip = rnd_int(0, 2) == 0 ? 0.7f : 0.0f;
    p.linear_before_reset = G == 3 && rnd_int(0, 1);
    p.input_forget = G == 4 && rnd_int(0, 3) == 0;
    for (k = 0; k < 6; k++) {
      static const mg_rnn_fn fns[] = {MG_RNN_RELU, MG_RNN_TANH, MG_RNN_SIGMOID, MG_RNN_AFFINE,
                                      MG_RNN_LEAKYRELU, MG_RNN_THRESHOLDEDRELU, MG_RNN_SCALEDTANH,
                                      MG_RNN_HARDSIGMOID, MG_RNN_ELU, MG_RNN_SOFTSIGN, MG_RNN_SOFTPLUS};
      const int pos = k % (G == 1 ? 1 : G == 3 ? 2 : 3);
      p.acts[k].fn = trial < 60 ? (pos == 0 && G > 1 ? MG_RNN_SIGMOID : MG_RNN_TANH) : fns[rnd() % 11];
      p.acts[k].alpha = 0.3f + 0.1f * (float)rnd_int(0, 5);
      p.acts[k].beta = 0.2f + 0.1f * (float)rnd_int(0, 5);
    }
    for (k = 0; k < p.B; k++) lens[k] = rnd_int(0, p.S);
    if (use_lens) lens[rnd_int(0, p.B - 1)] = p.S;
    nx = (size_t)p.S * p.B * p.I, nw = (size_t)D * G * p.H * p.I, nr = (size_t)D * G * p.H * p.H;
    nb = (size_t)D * 2 * G * p.H, ns = (size_t)D * p.B * p.H, ny = (size_t)p.S * ns;
    x = rnd_array(nx), w = rnd_array(nw), r = rnd_array(nr);
    b = rnd_int(0, 3) ? rnd_array(nb) : NULL;
    h0 = rnd_int(0, 1) ? rnd_array(ns) : NULL;
    c0 = G == 4 && rnd_int(0, 1) ? rnd_array(ns) : NULL;
    peep = G == 4 && rnd_int(0, 1) ? rnd_array((size_t)D * 3 * p.H) : NULL;
    y = out_array(ny), yh = out_array(ns), yc = out_array(ns);
    scr = scratch_of(mg_rnn_scratch(&p));
    ry = malloc(sizeof(double) * (ny + 1)), ryh = malloc(sizeof(double) * (ns + 1)),
    ryc = malloc(sizeof(double) * (ns + 1));
    assert_true(ry && ryh && ryc);
    /* unbounded activations (Relu, Affine, Elu) compound rounding over the steps */
    tol_rel = trial < 60 ? 2e-4 : 2e-3;
    mg_rnn(&p, x, w, r, b, use_lens ? lens : NULL, h0, c0, peep, y, yh, G == 4 ? yc : NULL, scr);
    ref_rnn(&p, x, w, r, b, use_lens ? lens : NULL, h0, c0, peep, ry, ryh, ryc);
    for (i = 0; i < ny; i++) expect_near(y[i], ry[i], tol_rel * (1 + fabs(ry[i])), "rnn y", i);
    for (i = 0; i < ns; i++) {
      expect_near(yh[i], ryh[i], tol_rel * (1 + fabs(ryh[i])), "rnn y_h", i);
      if (G == 4) expect_near(yc[i], ryc[i], tol_rel * (1 + fabs(ryc[i])), "rnn y_c", i);
    }
    out_check_free(y, ny), out_check_free(yh, ns), out_check_free(yc, ns);
    free(x), free(w), free(r), free(b), free(h0), free(c0), free(peep), free(scr);
    free(ry), free(ryh), free(ryc);
  }
}

/* ------------------------------------------------------ N-d convolution */

/* A random window over nd dims into p's in/k/s/d/pb/out (pe returned). */
static void rnd_window(int nd, int *in, int *k, int *s, int *d, int *pb, int *pe, int *out) {
  int j;
  for (j = 0; j < nd; j++) {
    int num;
    in[j] = rnd_int(1, nd > 2 ? 6 : 9), k[j] = rnd_int(1, 3), s[j] = rnd_int(1, 3), d[j] = rnd_int(1, 2);
    pb[j] = rnd_int(0, k[j] - 1), pe[j] = rnd_int(0, k[j] - 1);
    num = in[j] + pb[j] + pe[j] - ((k[j] - 1) * d[j] + 1);
    if (num < 0) pe[j] += -num, num = 0;
    out[j] = num / s[j] + 1;
  }
}

static void test_convnd(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 60; trial++) {
    mg_convnd_params p;
    int pe[MG_ND_MAX], oi[MG_ND_MAX], ki[MG_ND_MAX], j, n, m, ci;
    size_t nx, nw, ny, P, Pin, taps, o, t;
    float *x, *w, *b, *y, *scr;
    memset(&p, 0, sizeof p);
    p.nd = rnd_int(1, 4);
    p.group = rnd_int(1, 2);
    p.N = rnd_int(1, 2), p.C = p.group * rnd_int(1, 3), p.M = p.group * rnd_int(1, 3);
    rnd_window(p.nd, p.in, p.k, p.s, p.d, p.pb, pe, p.out);
    p.act = rnd_int(0, 1) ? MG_ACT_RELU : MG_ACT_NONE;
    P = prodi(p.out, p.nd), Pin = prodi(p.in, p.nd), taps = prodi(p.k, p.nd);
    nx = (size_t)p.N * p.C * Pin, nw = (size_t)p.M * (p.C / p.group) * taps, ny = (size_t)p.N * p.M * P;
    x = rnd_array(nx), w = rnd_array(nw), b = rnd_int(0, 1) ? rnd_array((size_t)p.M) : NULL;
    y = out_array(ny), scr = scratch_of(mg_convnd_scratch(&p));
    mg_convnd(&p, x, w, b, y, scr);
    for (n = 0; n < p.N; n++)
      for (m = 0; m < p.M; m++)
        for (o = 0; o < P; o++) {
          const int g = m / (p.M / p.group), Cg = p.C / p.group;
          double acc = b ? b[m] : 0, mag = fabs(acc);
          unflat(o, p.out, p.nd, oi);
          for (ci = 0; ci < Cg; ci++)
            for (t = 0; t < taps; t++) {
              size_t off = 0;
              int inside = 1;
              unflat(t, p.k, p.nd, ki);
              for (j = 0; j < p.nd; j++) {
                const int i = oi[j] * p.s[j] - p.pb[j] + ki[j] * p.d[j];
                if (i < 0 || i >= p.in[j]) inside = 0;
                off = off * (size_t)p.in[j] + (size_t)(inside ? i : 0);
              }
              if (inside) {
                const double v = (double)x[((size_t)n * p.C + g * Cg + ci) * Pin + off] *
                                 w[((size_t)m * Cg + ci) * taps + t];
                acc += v, mag += fabs(v);
              }
            }
          if (p.act == MG_ACT_RELU && acc < 0) acc = 0;
          expect_near(y[((size_t)n * p.M + m) * P + o], acc, sum_tol(mag, (double)(Cg * taps)), "convnd", o);
        }
    out_check_free(y, ny);
    free(x), free(w), free(b), free(scr);
  }
}

static void test_conv_transpose_nd(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 60; trial++) {
    mg_convtnd_params p;
    int ii[MG_ND_MAX], ki[MG_ND_MAX], j, n, c, m;
    size_t nx, nw, ny, P, Pin, taps, i, t;
    float *x, *w, *b, *y, *scr;
    double *ref, *mag;
    memset(&p, 0, sizeof p);
    p.nd = rnd_int(1, 4), p.group = rnd_int(1, 2);
    p.N = rnd_int(1, 2), p.C = p.group * rnd_int(1, 3), p.M = p.group * rnd_int(1, 3);
    for (j = 0; j < p.nd; j++) {
      p.in[j] = rnd_int(1, 5), p.k[j] = rnd_int(1, 3), p.s[j] = rnd_int(1, 3), p.d[j] = rnd_int(1, 2);
      p.pb[j] = rnd_int(-1, 2);
      p.out[j] = p.s[j] * (p.in[j] - 1) + (p.k[j] - 1) * p.d[j] + 1 - p.pb[j] - rnd_int(-1, 1);
      if (p.out[j] < 1) p.out[j] = 1;
    }
    P = prodi(p.out, p.nd), Pin = prodi(p.in, p.nd), taps = prodi(p.k, p.nd);
    nx = (size_t)p.N * p.C * Pin, nw = (size_t)p.C * (p.M / p.group) * taps, ny = (size_t)p.N * p.M * P;
    x = rnd_array(nx), w = rnd_array(nw), b = rnd_int(0, 1) ? rnd_array((size_t)p.M) : NULL;
    y = out_array(ny), scr = scratch_of(mg_conv_transpose_nd_scratch(&p));
    ref = calloc(ny + 1, sizeof(double)), mag = calloc(ny + 1, sizeof(double));
    assert_true(ref && mag);
    mg_conv_transpose_nd(&p, x, w, b, y, scr);
    for (n = 0; n < p.N; n++)
      for (m = 0; m < p.M; m++)
        for (i = 0; i < P; i++) ref[((size_t)n * p.M + m) * P + i] = b ? b[m] : 0;
    for (n = 0; n < p.N; n++)
      for (c = 0; c < p.C; c++)
        for (i = 0; i < Pin; i++)
          for (m = 0; m < p.M / p.group; m++)
            for (t = 0; t < taps; t++) {
              size_t off = 0;
              int inside = 1;
              unflat(i, p.in, p.nd, ii);
              unflat(t, p.k, p.nd, ki);
              for (j = 0; j < p.nd; j++) {
                const int o = ii[j] * p.s[j] - p.pb[j] + ki[j] * p.d[j];
                if (o < 0 || o >= p.out[j]) inside = 0;
                off = off * (size_t)p.out[j] + (size_t)(inside ? o : 0);
              }
              if (inside) {
                const size_t yo = ((size_t)n * p.M + (c / (p.C / p.group)) * (p.M / p.group) + m) * P + off;
                const double v = (double)x[((size_t)n * p.C + c) * Pin + i] *
                                 w[((size_t)c * (p.M / p.group) + m) * taps + t];
                ref[yo] += v, mag[yo] += fabs(v);
              }
            }
    for (i = 0; i < ny; i++) expect_near(y[i], ref[i], sum_tol(mag[i] + 1, (double)(p.C * taps)), "convtnd", i);
    out_check_free(y, ny);
    free(x), free(w), free(b), free(scr), free(ref), free(mag);
  }
}

/* ------------------------------------------------------------ pools */

static void test_pools_nd(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 90; trial++) {
    mg_poolnd_params p;
    const int kind = trial % 3; /* max, avg, lp */
    int oi[MG_ND_MAX], ki[MG_ND_MAX], j, pl;
    size_t nx, ny, P, Pin, taps, o, t;
    float *x, *y;
    memset(&p, 0, sizeof p);
    p.nd = rnd_int(1, 4), p.planes = rnd_int(1, 3);
    rnd_window(p.nd, p.in, p.k, p.s, p.d, p.pb, p.pe, p.out);
    p.count_include_pad = rnd_int(0, 1);
    p.p = rnd_int(0, 1) ? 2.0f : 3.0f;
    P = prodi(p.out, p.nd), Pin = prodi(p.in, p.nd), taps = prodi(p.k, p.nd);
    nx = (size_t)p.planes * Pin, ny = (size_t)p.planes * P;
    x = rnd_array(nx), y = out_array(ny);
    if (kind == 0) mg_maxpool_nd(&p, x, y);
    else if (kind == 1) mg_avgpool_nd(&p, x, y);
    else mg_lppool_nd(&p, x, y);
    for (pl = 0; pl < p.planes; pl++)
      for (o = 0; o < P; o++) {
        double acc = kind == 0 ? -INFINITY : 0, mag = 0;
        int cnt = 0;
        unflat(o, p.out, p.nd, oi);
        for (t = 0; t < taps; t++) {
          size_t off = 0;
          int inside = 1, inpad = 1;
          unflat(t, p.k, p.nd, ki);
          for (j = 0; j < p.nd; j++) {
            const int i = oi[j] * p.s[j] - p.pb[j] + ki[j] * p.d[j];
            if (i < 0 || i >= p.in[j]) inside = 0;
            if (i < -p.pb[j] || i >= p.in[j] + p.pe[j]) inpad = 0;
            off = off * (size_t)p.in[j] + (size_t)(inside ? i : 0);
          }
          if (p.count_include_pad ? inpad : inside) cnt++;
          if (!inside) continue;
          {
            const double v = x[(size_t)pl * Pin + off];
            if (kind == 0) acc = v > acc ? v : acc;
            else if (kind == 1) acc += v, mag += fabs(v);
            else acc += pow(fabs(v), p.p), mag += pow(fabs(v), p.p);
          }
        }
        if (kind == 1) acc = acc / cnt, mag /= cnt;
        if (kind == 2) acc = pow(acc, 1.0 / p.p), mag = acc;
        expect_near(y[(size_t)pl * P + o], acc, sum_tol(mag + 1e-6, (double)taps) * 4, "pool", o);
      }
    out_check_free(y, ny);
    free(x);
  }
}

static void test_maxpool_any(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 60; trial++) {
    mg_poolnd_params p;
    const int u8 = trial % 2, col_major = rnd_int(0, 1);
    int oi[MG_ND_MAX], ki[MG_ND_MAX], j, pl;
    size_t nx, ny, P, Pin, taps, o, t, i;
    float *xf = NULL;
    uint8_t *xb = NULL;
    void *x, *y;
    int64_t *ind;
    memset(&p, 0, sizeof p);
    p.nd = rnd_int(1, 3), p.planes = rnd_int(1, 3);
    rnd_window(p.nd, p.in, p.k, p.s, p.d, p.pb, p.pe, p.out);
    P = prodi(p.out, p.nd), Pin = prodi(p.in, p.nd), taps = prodi(p.k, p.nd);
    nx = (size_t)p.planes * Pin, ny = (size_t)p.planes * P;
    if (u8) {
      xb = malloc(nx + 1);
      assert_non_null(xb);
      for (i = 0; i < nx; i++) xb[i] = (uint8_t)rnd_int(0, 255);
      x = xb;
    } else {
      x = xf = rnd_array(nx);
    }
    y = malloc(ny * 4 + 4), ind = malloc(sizeof(int64_t) * (ny + 1));
    assert_true(y && ind);
    mg_maxpool_nd_any(&p, u8 ? MG_RT_U8 : MG_RT_F32, x, y, ind, col_major);
    for (pl = 0; pl < p.planes; pl++)
      for (o = 0; o < P; o++) {
        double best = 0;
        long long bi = -1;
        unflat(o, p.out, p.nd, oi);
        for (t = 0; t < taps; t++) {
          long long off = 0, cm = 0, mul = 1;
          int inside = 1;
          unflat(t, p.k, p.nd, ki);
          for (j = 0; j < p.nd; j++) {
            const int v = oi[j] * p.s[j] - p.pb[j] + ki[j] * p.d[j];
            if (v < 0 || v >= p.in[j]) inside = 0;
            off = off * p.in[j] + v, cm += (long long)v * mul, mul *= p.in[j];
          }
          if (inside) {
            const double v = u8 ? xb[(size_t)pl * Pin + (size_t)off] : xf[(size_t)pl * Pin + (size_t)off];
            if (bi < 0 || v > best) best = v, bi = (long long)pl * (long long)Pin + (col_major ? cm : off);
          }
        }
        if (bi < 0) { /* dilated windows may see only padding */
          assert_int_equal(ind[(size_t)pl * P + o], -1);
          if (u8) assert_int_equal(((uint8_t *)y)[(size_t)pl * P + o], 0);
          else assert_true(((float *)y)[(size_t)pl * P + o] == -INFINITY);
          continue;
        }
        if (u8) assert_int_equal(((uint8_t *)y)[(size_t)pl * P + o], (int)best);
        else assert_true(((float *)y)[(size_t)pl * P + o] == (float)best);
        assert_int_equal(ind[(size_t)pl * P + o], bi);
      }
    free(xf), free(xb), free(y), free(ind);
  }
}

static void test_maxunpool(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 20; trial++) {
    const int rank = 4;
    int64_t idims[4], ydims[4], ys[4], total = 1, k, ybig;
    float *x, *y;
    int64_t *ind;
    int d, count = rnd_int(1, 20);
    for (d = 0; d < rank; d++) idims[d] = rnd_int(1, 4), ydims[d] = idims[d] + (d >= 2 ? rnd_int(0, 2) : 0);
    for (d = 0; d < rank; d++) total *= idims[d];
    ys[3] = 1;
    for (d = 2; d >= 0; d--) ys[d] = ys[d + 1] * ydims[d + 1];
    ybig = ys[0] * ydims[0];
    x = rnd_array((size_t)count), y = out_array((size_t)ybig);
    ind = malloc(sizeof(int64_t) * (size_t)count);
    assert_non_null(ind);
    for (k = 0; k < count; k++) ind[k] = rnd_int(0, (int)total - 1);
    mg_maxunpool(rank, idims, ys, count, sizeof(float), x, ind, y, sizeof(float) * (size_t)ybig);
    for (k = 0; k < ybig; k++) { /* each y position: the last x written there, or 0 */
      int64_t q = k, pos = 0, c[4], j;
      int inside = 1;
      float want = 0.0f;
      for (d = 3; d >= 0; d--) c[d] = q % ydims[d], q /= ydims[d];
      for (d = 0; d < rank; d++) {
        if (c[d] >= idims[d]) inside = 0;
        pos = pos * idims[d] + c[d];
      }
      for (j = 0; inside && j < count; j++)
        if (ind[j] == pos) want = x[j];
      assert_true(y[k] == want);
    }
    out_check_free(y, (size_t)ybig);
    free(x), free(ind);
  }
}

/* ------------------------------------------------- GridSample, RoiAlign */

/* Reflection by repeated folding (a different route from the runtime's fmod). */
static double fold(double v, double lo, double hi) {
  if (hi <= lo) return lo;
  while (v < lo || v > hi) v = v < lo ? 2 * lo - v : 2 * hi - v;
  return v;
}

static double pixel(const float *p, int H, int W, long yy, long xx) {
  return yy >= 0 && yy < H && xx >= 0 && xx < W ? p[(size_t)yy * W + xx] : 0.0;
}

static void test_grid_sample(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 60; trial++) {
    const int mode = rnd_int(0, 1) ? MG_GS_BILINEAR : MG_GS_NEAREST, pad = rnd_int(0, 2),
              align = rnd_int(0, 1);
    const int N = rnd_int(1, 2), C = rnd_int(1, 3), H = rnd_int(1, 6), W = rnd_int(1, 6),
              OH = rnd_int(1, 4), OW = rnd_int(1, 4);
    const size_t ny = (size_t)N * C * OH * OW;
    float *x = rnd_array((size_t)N * C * H * W), *g = rnd_array((size_t)N * OH * OW * 2), *y;
    size_t i;
    int b, c;
    for (i = 0; i < (size_t)N * OH * OW * 2; i++) g[i] *= 1.4f; /* some samples outside */
    y = out_array(ny);
    mg_grid_sample2d(N, C, H, W, OH, OW, mode, pad, align, x, g, y);
    for (b = 0; b < N; b++)
      for (i = 0; i < (size_t)OH * OW; i++) {
        double fx = g[((size_t)b * OH * OW + i) * 2], fy = g[((size_t)b * OH * OW + i) * 2 + 1];
        fx = align ? (fx + 1) / 2 * (W - 1) : ((fx + 1) * W - 1) / 2;
        fy = align ? (fy + 1) / 2 * (H - 1) : ((fy + 1) * H - 1) / 2;
        if (pad == MG_GS_REFLECTION) {
          fx = align ? fold(fx, 0, W - 1) : fold(fx, -0.5, W - 0.5);
          fy = align ? fold(fy, 0, H - 1) : fold(fy, -0.5, H - 0.5);
        }
        if (pad != MG_GS_ZEROS) fx = fmin(fmax(fx, 0), W - 1), fy = fmin(fmax(fy, 0), H - 1);
        for (c = 0; c < C; c++) {
          const float *p = x + ((size_t)b * C + c) * H * W;
          double v;
          if (mode == MG_GS_NEAREST) {
            v = pixel(p, H, W, lrint(fy), lrint(fx));
          } else {
            const long x0 = (long)floor(fx), y0 = (long)floor(fy);
            const double tx = fx - x0, ty = fy - y0;
            v = pixel(p, H, W, y0, x0) * (1 - tx) * (1 - ty) + pixel(p, H, W, y0, x0 + 1) * tx * (1 - ty) +
                pixel(p, H, W, y0 + 1, x0) * (1 - tx) * ty + pixel(p, H, W, y0 + 1, x0 + 1) * tx * ty;
          }
          expect_near(y[((size_t)b * C + c) * OH * OW + i], v, 1e-5, "grid_sample", i);
        }
      }
    out_check_free(y, ny);
    free(x), free(g);
  }
}

static void test_roi_align(void **state) {
  int trial;
  (void)state;
  for (trial = 0; trial < 40; trial++) {
    const int N = rnd_int(1, 2), C = rnd_int(1, 3), H = rnd_int(2, 8), W = rnd_int(2, 8),
              R = rnd_int(1, 3), OH = rnd_int(1, 3), OW = rnd_int(1, 3), sr = rnd_int(0, 2),
              half = rnd_int(0, 1);
    const float ss = 0.5f * (float)rnd_int(1, 3);
    const size_t ny = (size_t)R * C * OH * OW;
    float *x = rnd_array((size_t)N * C * H * W), *rois = rnd_array((size_t)R * 4), *y;
    int64_t batch[3];
    int r, c, ph, pw;
    for (r = 0; r < R; r++) {
      float x1 = (rois[r * 4] + 1) * W, y1 = (rois[r * 4 + 1] + 1) * H;
      rois[r * 4] = x1, rois[r * 4 + 1] = y1;
      rois[r * 4 + 2] = x1 + (rois[r * 4 + 2] + 1) * W, rois[r * 4 + 3] = y1 + (rois[r * 4 + 3] + 1) * H;
      batch[r] = rnd_int(0, N - 1);
    }
    y = out_array(ny);
    mg_roi_align(N, C, H, W, R, OH, OW, sr, ss, 0, half, x, rois, batch, y);
    for (r = 0; r < R; r++) {
      const double off = half ? 0.5 : 0;
      const double x0 = rois[r * 4] * ss - off, y0 = rois[r * 4 + 1] * ss - off;
      double rw = rois[r * 4 + 2] * ss - off - x0, rh = rois[r * 4 + 3] * ss - off - y0;
      int gh, gw, iy, ix;
      if (!half) rw = fmax(rw, 1), rh = fmax(rh, 1);
      gh = sr ? sr : (int)ceil(rh / OH), gw = sr ? sr : (int)ceil(rw / OW);
      for (c = 0; c < C; c++)
        for (ph = 0; ph < OH; ph++)
          for (pw = 0; pw < OW; pw++) {
            const float *p = x + ((size_t)batch[r] * C + c) * H * W;
            double acc = 0;
            for (iy = 0; iy < gh; iy++)
              for (ix = 0; ix < gw; ix++) {
                double yy = y0 + ph * rh / OH + (iy + 0.5) * rh / OH / gh;
                double xx = x0 + pw * rw / OW + (ix + 0.5) * rw / OW / gw;
                long yl, xl;
                if (yy < -1 || yy > H || xx < -1 || xx > W) continue;
                yy = fmin(fmax(yy, 0), H - 1), xx = fmin(fmax(xx, 0), W - 1);
                yl = (long)yy, xl = (long)xx;
                {
                  const long yh = yl + 1 < H ? yl + 1 : yl, xh = xl + 1 < W ? xl + 1 : xl;
                  const double ly = yy - yl, lx = xx - xl;
                  acc += (1 - ly) * (1 - lx) * p[yl * W + xl] + (1 - ly) * lx * p[yl * W + xh] +
                         ly * (1 - lx) * p[yh * W + xl] + ly * lx * p[yh * W + xh];
                }
              }
            acc /= gh * gw > 1 ? gh * gw : 1;
            expect_near(y[(((size_t)r * C + c) * OH + ph) * OW + pw], acc, 1e-5, "roi_align", (size_t)r);
          }
    }
    out_check_free(y, ny);
    free(x), free(rois);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rnn),          cmocka_unit_test(test_convnd),
      cmocka_unit_test(test_conv_transpose_nd), cmocka_unit_test(test_pools_nd),
      cmocka_unit_test(test_maxpool_any),  cmocka_unit_test(test_maxunpool),
      cmocka_unit_test(test_grid_sample),  cmocka_unit_test(test_roi_align),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
