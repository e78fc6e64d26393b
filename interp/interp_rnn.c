/* Recurrent kernels: RNN, GRU and LSTM, exactly as the ONNX operator spec writes
 * their equations. One direction and one batch row are computed at a time, in
 * double, straight from the spec's formulas: this is the yardstick, not a fast
 * path. Gate blocks are laid out as ONNX stores them: RNN (i), GRU (z, r, h),
 * LSTM (i, o, f, c); peepholes P are (i, o, f). */
#include "interp_internal.h"
#include <math.h>
#include <string.h>
#include <strings.h>

/* One activation function of the `activations` list with its alpha and beta. */
typedef enum {
  ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
  ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} act_kind;

typedef struct {
  act_kind kind;
  double alpha, beta;
} rnn_act;

static const struct {
  const char *name;
  act_kind kind;
  int uses_alpha, uses_beta;
  double alpha, beta; /* the defaults of the ONNX operator of the same name */
} act_table[] = {
    {"Relu", ACT_RELU, 0, 0, 0, 0},
    {"Tanh", ACT_TANH, 0, 0, 0, 0},
    {"Sigmoid", ACT_SIGMOID, 0, 0, 0, 0},
    {"Affine", ACT_AFFINE, 1, 1, 1.0, 0.0},
    {"LeakyRelu", ACT_LEAKYRELU, 1, 0, 0.01, 0},
    {"ThresholdedRelu", ACT_THRESHOLDEDRELU, 1, 0, 1.0, 0},
    {"ScaledTanh", ACT_SCALEDTANH, 1, 1, 1.0, 1.0},
    {"HardSigmoid", ACT_HARDSIGMOID, 1, 1, 0.2, 0.5},
    {"Elu", ACT_ELU, 1, 0, 1.0, 0},
    {"Softsign", ACT_SOFTSIGN, 0, 0, 0, 0},
    {"Softplus", ACT_SOFTPLUS, 0, 0, 0, 0},
};

/* Applies activation a to x. */
static double act_apply(const rnn_act *a, double x) {
  switch (a->kind) {
  case ACT_RELU: return x > 0 ? x : 0;
  case ACT_TANH: return tanh(x);
  case ACT_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
  case ACT_AFFINE: return a->alpha * x + a->beta;
  case ACT_LEAKYRELU: return x >= 0 ? x : a->alpha * x;
  case ACT_THRESHOLDEDRELU: return x > a->alpha ? x : 0;
  case ACT_SCALEDTANH: return a->alpha * tanh(a->beta * x);
  case ACT_HARDSIGMOID: return fmax(0, fmin(1, a->alpha * x + a->beta));
  case ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
  case ACT_SOFTSIGN: return x / (1 + fabs(x));
  case ACT_SOFTPLUS: return (x > 0 ? x : 0) + log1p(exp(-fabs(x)));
  }
  return x;
}

/* Fills acts[0 .. per_dir*dirs) from the activations attribute (or the op's
 * defaults, repeated per direction). activation_alpha/beta are consumed in list
 * order by the functions that take them, as onnxruntime does; a function whose
 * value the lists run out of uses its operator's default. */
static int parse_acts(interp_ctx *c, const mg_node *n, int per_dir, int dirs, rnn_act *acts) {
  static const char *const defaults[3][3] = {
      {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const mg_attr *names = mg_node_attr(n, "activations");
  const mg_attr *al = mg_node_attr(n, "activation_alpha"), *be = mg_node_attr(n, "activation_beta");
  size_t n_al = al && al->kind == MG_ATTR_FLOATS ? al->n : 0;
  size_t n_be = be && be->kind == MG_ATTR_FLOATS ? be->n : 0;
  size_t ia = 0, ib = 0;
  int total = per_dir * dirs;
  if (names && names->kind == MG_ATTR_STRINGS && names->n > 0 && (int)names->n < total &&
      (int)names->n != per_dir) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type,
             "activations lists %zu functions; %s needs %d", names->n, n->op_type, total);
    return -1;
  }
  for (int k = 0; k < total; k++) {
    const char *name = defaults[per_dir - 1][k % per_dir];
    if (names && names->kind == MG_ATTR_STRINGS && names->n > 0)
      name = names->strings[(size_t)k % names->n];
    size_t t = 0, nt = sizeof act_table / sizeof act_table[0];
    while (t < nt && strcasecmp(act_table[t].name, name)) t++;
    if (t == nt) {
      mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "unknown activation function '%s'", name);
      return -1;
    }
    acts[k].kind = act_table[t].kind;
    acts[k].alpha = act_table[t].alpha;
    acts[k].beta = act_table[t].beta;
    if (act_table[t].uses_alpha && ia < n_al) acts[k].alpha = al->floats[ia++];
    if (act_table[t].uses_beta && ib < n_be) acts[k].beta = be->floats[ib++];
  }
  return 0;
}

/* Everything one RNN/GRU/LSTM node needs, read once. */
typedef struct {
  int G;                 /* gates: 1 RNN, 3 GRU, 4 LSTM */
  int dirs, layout, reverse_only;
  int64_t S, B, I, H;
  double *x, *w, *r, *b, *h0, *c0, *p;
  int64_t *lens;
  double clip;           /* <= 0: no clip */
  int lbr, input_forget;
  rnn_act acts[6];
} rnn_job;

/* The clip attribute applied to a gate's pre-activation. */
static double clipv(const rnn_job *j, double v) {
  if (j->clip > 0) v = v < -j->clip ? -j->clip : v > j->clip ? j->clip : v;
  return v;
}

/* x_t of batch row b as a pointer into the X copy. */
static const double *x_at(const rnn_job *j, int64_t t, int64_t b) {
  return j->layout ? j->x + (b * j->S + t) * j->I : j->x + (t * j->B + b) * j->I;
}

/* Offset of (direction d, batch b) in an initial/final state tensor. */
static int64_t state_off(const rnn_job *j, int d, int64_t b) {
  return j->layout ? (b * j->dirs + d) * j->H : ((int64_t)d * j->B + b) * j->H;
}

/* Offset of (step t, direction d, batch b) in Y. */
static int64_t y_off(const rnn_job *j, int64_t t, int d, int64_t b) {
  return j->layout ? ((b * j->S + t) * j->dirs + d) * j->H : ((t * j->dirs + d) * j->B + b) * j->H;
}

/* acc_x = W x + Wb and acc_h = R h + Rb over all G*H gate rows of direction d
 * (W and R are row-major [G*H, I] and [G*H, H]); kept apart because GRU needs
 * the recurrent part of its h gate on its own. */
static void gates_linear(const rnn_job *j, int d, const double *xt, const double *h, double *acc_x,
                         double *acc_h) {
  int64_t GH = j->G * j->H;
  const double *W = j->w + (int64_t)d * GH * j->I, *R = j->r + (int64_t)d * GH * j->H;
  const double *Wb = j->b ? j->b + (int64_t)d * 2 * GH : NULL, *Rb = Wb ? Wb + GH : NULL;
  for (int64_t row = 0; row < GH; row++) {
    double sx = Wb ? Wb[row] : 0, sh = Rb ? Rb[row] : 0;
    for (int64_t i = 0; i < j->I; i++) sx += W[row * j->I + i] * xt[i];
    for (int64_t i = 0; i < j->H; i++) sh += R[row * j->H + i] * h[i];
    acc_x[row] = sx;
    acc_h[row] = sh;
  }
}

/* One step of batch row b in direction d: updates h (and cell for LSTM) in place.
 * ax/ah are scratch of G*H doubles each; hn and rg of H. */
static void step(const rnn_job *j, int d, const double *xt, double *h, double *cell, double *ax,
                 double *ah, double *hn, double *rg) {
  int64_t H = j->H;
  int per_dir = j->G == 1 ? 1 : j->G == 3 ? 2 : 3;
  const rnn_act *f = &j->acts[d * per_dir];
  gates_linear(j, d, xt, h, ax, ah);
  if (j->G == 1) {
    for (int64_t k = 0; k < H; k++) hn[k] = act_apply(&f[0], clipv(j, ax[k] + ah[k]));
  } else if (j->G == 3) {
    /* z, r, h blocks; the h block's recurrent part depends on linear_before_reset:
     * 0 applies Rh to (r (.) h_{t-1}), so that product is recomputed here. */
    const double *R = j->r + (int64_t)d * 3 * H * H;
    const double *Rbh = j->b ? j->b + (int64_t)d * 6 * H + 5 * H : NULL;
    for (int64_t k = 0; k < H; k++) rg[k] = act_apply(&f[0], clipv(j, ax[H + k] + ah[H + k]));
    for (int64_t k = 0; k < H; k++) {
      double z = act_apply(&f[0], clipv(j, ax[k] + ah[k])), rec;
      if (j->lbr) {
        rec = rg[k] * ah[2 * H + k];
      } else {
        const double *row = R + (2 * H + k) * H;
        rec = Rbh ? Rbh[k] : 0;
        for (int64_t i = 0; i < H; i++) rec += row[i] * rg[i] * h[i];
      }
      double hh = act_apply(&f[1], clipv(j, ax[2 * H + k] + rec));
      hn[k] = (1 - z) * hh + z * h[k];
    }
  } else {
    const double *P = j->p ? j->p + (int64_t)d * 3 * H : NULL;
    for (int64_t k = 0; k < H; k++) {
      double cp = cell[k];
      double gi = ax[k] + ah[k] + (P ? P[k] * cp : 0);
      double i_ = act_apply(&f[0], clipv(j, gi));
      double f_;
      if (j->input_forget) {
        f_ = 1 - i_;
      } else {
        double gf = ax[2 * H + k] + ah[2 * H + k] + (P ? P[2 * H + k] * cp : 0);
        f_ = act_apply(&f[0], clipv(j, gf));
      }
      double g = act_apply(&f[1], clipv(j, ax[3 * H + k] + ah[3 * H + k]));
      double cn = f_ * cp + i_ * g;
      double go = ax[H + k] + ah[H + k] + (P ? P[H + k] * cn : 0);
      double o = act_apply(&f[0], clipv(j, go));
      hn[k] = o * act_apply(&f[2], clipv(j, cn)); /* clips h's input, not the stored cell */
      cell[k] = cn;
    }
  }
  memcpy(h, hn, sizeof(double) * (size_t)H);
}

/* Frees the input copies of j (safe on a partly filled job). */
static void job_free(rnn_job *j) {
  mg_free(j->x), mg_free(j->w), mg_free(j->r), mg_free(j->b);
  mg_free(j->h0), mg_free(j->c0), mg_free(j->p), mg_free(j->lens);
}

/* Checks that t (if present) has exactly the given dims. */
static int dims_are(const mg_array *t, int rank, const int64_t *dims) {
  if (!t) return 1;
  if (t->rank != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != dims[i]) return 0;
  return 1;
}

/* Reads the inputs and attributes of an RNN/GRU/LSTM node into j. */
static int job_init(interp_ctx *c, const mg_node *n, mg_rvalue **in, rnn_job *j) {
  memset(j, 0, sizeof *j);
  j->G = n->op == MG_OP_RNN ? 1 : n->op == MG_OP_GRU ? 3 : 4;
  const mg_array *X = it_in(in, n, 0), *W = it_in(in, n, 1), *R = it_in(in, n, 2);
  const mg_array *B = it_in(in, n, 3), *SL = it_in(in, n, 4), *H0 = it_in(in, n, 5);
  const mg_array *C0 = j->G == 4 ? it_in(in, n, 6) : NULL, *P = j->G == 4 ? it_in(in, n, 7) : NULL;
  if (!X || !W || !R) return it_fail(c, n, "X, W and R are required");
  if (X->rank != 3 || W->rank != 3 || R->rank != 3) return it_fail(c, n, "X, W and R must be 3-D");
  const char *dir = mg_attr_str(n, "direction", "forward");
  if (!strcmp(dir, "forward")) j->dirs = 1;
  else if (!strcmp(dir, "reverse")) j->dirs = 1, j->reverse_only = 1;
  else if (!strcmp(dir, "bidirectional")) j->dirs = 2;
  else {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "direction '%s'", dir);
    return -1;
  }
  j->layout = (int)mg_attr_int(n, "layout", 0);
  if (j->layout != 0 && j->layout != 1) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "layout %d", j->layout);
    return -1;
  }
  j->S = j->layout ? X->dims[1] : X->dims[0];
  j->B = j->layout ? X->dims[0] : X->dims[1];
  j->I = X->dims[2];
  j->H = R->dims[2];
  int64_t hs = mg_attr_int(n, "hidden_size", j->H);
  if (hs != j->H) return it_fail(c, n, "hidden_size %lld but R has %lld columns", (long long)hs, (long long)j->H);
  int64_t GH = j->G * j->H, D = j->dirs;
  int64_t wd[3] = {D, GH, j->I}, rd[3] = {D, GH, j->H}, bd[2] = {D, 2 * GH}, pd[2] = {D, 3 * j->H};
  int64_t sd[3] = {D, j->B, j->H}, sdl[3] = {j->B, D, j->H}, ld[1] = {j->B};
  if (!dims_are(W, 3, wd) || !dims_are(R, 3, rd) || !dims_are(B, 2, bd) || !dims_are(P, 2, pd) ||
      !dims_are(SL, 1, ld) || !dims_are(H0, 3, j->layout ? sdl : sd) ||
      !dims_are(C0, 3, j->layout ? sdl : sd))
    return it_fail(c, n, "input shapes do not agree with X, direction and hidden_size");
  const mg_attr *cl = mg_node_attr(n, "clip");
  j->clip = cl && cl->kind == MG_ATTR_FLOAT ? cl->f : 0;
  j->lbr = n->op == MG_OP_GRU && mg_attr_int(n, "linear_before_reset", 0) != 0;
  j->input_forget = n->op == MG_OP_LSTM && mg_attr_int(n, "input_forget", 0) != 0;
  if (parse_acts(c, n, j->G == 1 ? 1 : j->G == 3 ? 2 : 3, j->dirs, j->acts)) return -1;
  if (!(j->x = it_f64(c, n, X)) || !(j->w = it_f64(c, n, W)) || !(j->r = it_f64(c, n, R)) ||
      (B && !(j->b = it_f64(c, n, B))) || (H0 && !(j->h0 = it_f64(c, n, H0))) ||
      (C0 && !(j->c0 = it_f64(c, n, C0))) || (P && !(j->p = it_f64(c, n, P))) ||
      (SL && !(j->lens = it_i64(c, n, SL)))) {
    job_free(j);
    return -1;
  }
  for (int64_t b = 0; j->lens && b < j->B; b++)
    if (j->lens[b] < 0 || j->lens[b] > j->S) {
      job_free(j);
      return it_fail(c, n, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                     (long long)j->lens[b], (long long)j->S);
    }
  return 0;
}

/* RNN, GRU, LSTM: runs every direction over every batch row. Y rows past a
 * sequence's length stay zero; Y_h/Y_c hold the state after its last valid step.
 * The spec leaves a zero-length sequence's Y_h/Y_c open; they are zero here, as
 * onnxruntime computes them. */
static int rnn_kernel(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  rnn_job j;
  if (job_init(c, n, in, &j)) return -1;
  mg_dtype dt = it_in(in, n, 0)->dtype;
  int64_t H = j.H, D = j.dirs;
  int64_t yd[4] = {j.S, D, j.B, H}, yld[4] = {j.B, j.S, D, H};
  int64_t sd[3] = {D, j.B, H}, sdl[3] = {j.B, D, H};
  int64_t ny = j.S * D * j.B * H, ns = D * j.B * H;
  double *y = mg_calloc((size_t)(ny ? ny : 1), sizeof(double));
  double *yh = mg_calloc((size_t)(ns ? ns : 1), sizeof(double));
  double *yc = mg_calloc((size_t)(ns ? ns : 1), sizeof(double));
  double *scratch = mg_calloc((size_t)(2 * j.G * H + 4 * H + 1), sizeof(double));
  int rc = 0;
  if (!y || !yh || !yc || !scratch) {
    rc = it_fail(c, n, "out of memory");
    goto done;
  }
  double *ax = scratch, *ah = ax + j.G * H, *h = ah + j.G * H, *cell = h + H, *hn = cell + H, *rg = hn + H;
  for (int d = 0; d < D; d++) {
    int rev = j.reverse_only || d == 1;
    for (int64_t b = 0; b < j.B; b++) {
      int64_t len = j.lens ? j.lens[b] : j.S, so = state_off(&j, d, b);
      for (int64_t k = 0; k < H; k++) {
        h[k] = j.h0 ? j.h0[so + k] : 0;
        cell[k] = j.c0 ? j.c0[so + k] : 0;
      }
      for (int64_t s = 0; s < len; s++) {
        int64_t t = rev ? len - 1 - s : s;
        step(&j, d, x_at(&j, t, b), h, cell, ax, ah, hn, rg);
        memcpy(y + y_off(&j, t, d, b), h, sizeof(double) * (size_t)H);
      }
      if (len > 0) { /* zero-length rows keep zero states, as onnxruntime gives */
        memcpy(yh + so, h, sizeof(double) * (size_t)H);
        memcpy(yc + so, cell, sizeof(double) * (size_t)H);
      }
    }
  }
  mg_array *t;
  if (n->n_out > 0 && out[0]) {
    if (!(t = it_out(c, n, out, 0, dt, 4, j.layout ? yld : yd))) { rc = -1; goto done; }
    it_store_f64(t, y);
  }
  if (n->n_out > 1 && out[1]) {
    if (!(t = it_out(c, n, out, 1, dt, 3, j.layout ? sdl : sd))) { rc = -1; goto done; }
    it_store_f64(t, yh);
  }
  if (n->n_out > 2 && out[2]) {
    if (!(t = it_out(c, n, out, 2, dt, 3, j.layout ? sdl : sd))) { rc = -1; goto done; }
    it_store_f64(t, yc);
  }
done:
  mg_free(y), mg_free(yh), mg_free(yc), mg_free(scratch);
  job_free(&j);
  return rc;
}

/* Dispatches RNN/GRU/LSTM; only floating-point X is defined by ONNX. */
int interp_rnn(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
               interp_frame *frame) {
  (void)frame;
  const mg_array *x = it_in(in, n, 0);
  if (x && !it_is_float(x->dtype)) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "%s of %s", n->op_type, mg_dtype_name(x->dtype));
    return -1;
  }
  return rnn_kernel(c, n, in, out);
}
