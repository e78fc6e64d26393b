/* C emitters of the recurrent ops RNN, GRU and LSTM (runtime/rnn.c; contract in
 * codegen/cg.h). Everything the ONNX spec lets vary is resolved here into one
 * static mg_rnn_params: direction, layout, clip, linear_before_reset,
 * input_forget and the activation list with its alpha/beta values (consumed in
 * list order by the functions that take them, as onnxruntime and the reference
 * interpreter read them). float32 only. */
#include "c_nn_util.h"

#include <strings.h>

/* The activation functions the recurrent ops accept, with their runtime names and
 * the defaults of the ONNX operators of the same name. */
static const struct {
  const char *name, *rt;
  int uses_alpha, uses_beta;
  float alpha, beta;
} rnn_fns[] = {
    {"Relu", "MG_RNN_RELU", 0, 0, 0.0f, 0.0f},
    {"Tanh", "MG_RNN_TANH", 0, 0, 0.0f, 0.0f},
    {"Sigmoid", "MG_RNN_SIGMOID", 0, 0, 0.0f, 0.0f},
    {"Affine", "MG_RNN_AFFINE", 1, 1, 1.0f, 0.0f},
    {"LeakyRelu", "MG_RNN_LEAKYRELU", 1, 0, 0.01f, 0.0f},
    {"ThresholdedRelu", "MG_RNN_THRESHOLDEDRELU", 1, 0, 1.0f, 0.0f},
    {"ScaledTanh", "MG_RNN_SCALEDTANH", 1, 1, 1.0f, 1.0f},
    {"HardSigmoid", "MG_RNN_HARDSIGMOID", 1, 1, 0.2f, 0.5f},
    {"Elu", "MG_RNN_ELU", 1, 0, 1.0f, 0.0f},
    {"Softsign", "MG_RNN_SOFTSIGN", 0, 0, 0.0f, 0.0f},
    {"Softplus", "MG_RNN_SOFTPLUS", 0, 0, 0.0f, 0.0f},
};

/* Appends the initialiser of acts[0 .. per_dir*dirs) to buf ("{F, a, b}, ...").
 * Returns 0, or -1 after reporting. */
static int rnn_acts(cg_ctx *c, const mg_node *n, int per_dir, int dirs, char *buf, size_t cap) {
  static const char *const defaults[3][3] = {
      {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const mg_attr *names = mg_node_attr(n, "activations");
  const mg_attr *al = mg_node_attr(n, "activation_alpha"), *be = mg_node_attr(n, "activation_beta");
  const size_t n_al = al && al->kind == MG_ATTR_FLOATS ? al->n : 0;
  const size_t n_be = be && be->kind == MG_ATTR_FLOATS ? be->n : 0;
  const int has_names = names && names->kind == MG_ATTR_STRINGS && names->n > 0;
  size_t ia = 0, ib = 0, used = 0;
  int k, total = per_dir * dirs;
  if (names && !has_names && names->n > 0) return cg_unsupported(c, n, "activations is not a string list");
  if (has_names && (int)names->n != total && (int)names->n != per_dir)
    return cg_unsupported(c, n, "activations lists %zu functions; %d expected", names->n, total);
  buf[0] = 0;
  for (k = 0; k < total; k++) {
    const char *name = has_names ? names->strings[(size_t)k % names->n] : defaults[per_dir - 1][k % per_dir];
    size_t t = 0, nt = sizeof rnn_fns / sizeof rnn_fns[0];
    float a, b;
    char fa[40], fb[40];
    int w;
    while (t < nt && strcasecmp(rnn_fns[t].name, name)) t++;
    if (t == nt) return cg_unsupported(c, n, "activation function '%s'", name);
    a = rnn_fns[t].alpha, b = rnn_fns[t].beta;
    if (rnn_fns[t].uses_alpha && ia < n_al) a = al->floats[ia++];
    if (rnn_fns[t].uses_beta && ib < n_be) b = be->floats[ib++];
    w = snprintf(buf + used, cap - used, "%s{%s, %s, %s}", k ? ", " : "", rnn_fns[t].rt,
                 nn_flit(fa, a), nn_flit(fb, b));
    if (w < 0 || (size_t)w >= cap - used) return cg_unsupported(c, n, "activation list too long");
    used += (size_t)w;
  }
  if (ia < n_al || ib < n_be)
    return cg_unsupported(c, n, "activation_alpha/beta list more values than the functions take");
  return 0;
}

/* Whether optional input/output i of n is present. */
static const mg_value *opt_in(const mg_node *n, int i) { return i < n->n_in ? n->in[i] : NULL; }
static const mg_value *opt_out(const mg_node *n, int i) { return i < n->n_out ? n->out[i] : NULL; }

/* Whether v (when present) is float32 with exactly the given dims. */
static int f32_dims(const mg_value *v, int rank, const int64_t *dims) {
  int64_t d[MG_MAX_RANK];
  int i;
  if (!v) return 1;
  if (v->dtype != MG_F32 || cg_dims(v, d) != rank) return 0;
  for (i = 0; i < rank; i++)
    if (d[i] != dims[i]) return 0;
  return 1;
}

/* RNN (gates 1), GRU (3), LSTM (4). */
static int emit_recurrent(cg_ctx *c, const mg_node *n, int G) {
  const mg_value *X = opt_in(n, 0), *W = opt_in(n, 1), *R = opt_in(n, 2), *B = opt_in(n, 3);
  const mg_value *SL = opt_in(n, 4), *H0 = opt_in(n, 5);
  const mg_value *C0 = G == 4 ? opt_in(n, 6) : NULL, *P = G == 4 ? opt_in(n, 7) : NULL;
  const mg_value *Y = opt_out(n, 0), *YH = opt_out(n, 1), *YC = G == 4 ? opt_out(n, 2) : NULL;
  const char *dir = mg_attr_str(n, "direction", "forward");
  const mg_attr *cl = mg_node_attr(n, "clip");
  int64_t xd[MG_MAX_RANK], rd[MG_MAX_RANK], S, Bn, I, H, D, layout = mg_attr_int(n, "layout", 0);
  int64_t lbr = G == 3 ? mg_attr_int(n, "linear_before_reset", 0) : 0;
  int64_t inf = G == 4 ? mg_attr_int(n, "input_forget", 0) : 0;
  int reverse = 0, per_dir = G == 1 ? 1 : G == 3 ? 2 : 3;
  float clip = 0.0f;
  char acts[1024], fc[40];
  const char *prm;
  if (!X || !W || !R) return cg_unsupported(c, n, "X, W and R are required");
  if (X->dtype != MG_F32) return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(X->dtype));
  if (!strcmp(dir, "forward")) D = 1;
  else if (!strcmp(dir, "reverse")) D = 1, reverse = 1;
  else if (!strcmp(dir, "bidirectional")) D = 2;
  else return cg_unsupported(c, n, "direction '%s'", dir);
  if (layout != 0 && layout != 1) return cg_unsupported(c, n, "layout %lld", (long long)layout);
  if (cg_dims(X, xd) != 3 || cg_dims(R, rd) != 3) return cg_unsupported(c, n, "X and R must be 3-D");
  S = layout ? xd[1] : xd[0], Bn = layout ? xd[0] : xd[1], I = xd[2], H = rd[2];
  if (mg_attr_int(n, "hidden_size", H) != H) return cg_unsupported(c, n, "hidden_size differs from R");
  if (cl) {
    if (cl->kind != MG_ATTR_FLOAT) return cg_unsupported(c, n, "clip is not a float");
    clip = cl->f;
    if (!(clip > 0.0f)) return cg_unsupported(c, n, "clip %g (must be positive)", (double)clip);
  }
  if (lbr != 0 && lbr != 1) return cg_unsupported(c, n, "linear_before_reset %lld", (long long)lbr);
  if (inf != 0 && inf != 1) return cg_unsupported(c, n, "input_forget %lld", (long long)inf);
  {
    const int64_t wd[3] = {D, G * H, I}, rr[3] = {D, G * H, H}, bd[2] = {D, 2 * G * H},
                  pd[2] = {D, 3 * H}, sd[3] = {D, Bn, H}, sdl[3] = {Bn, D, H},
                  yd[4] = {S, D, Bn, H}, ydl[4] = {Bn, S, D, H};
    int64_t ld[MG_MAX_RANK];
    if (!f32_dims(W, 3, wd) || !f32_dims(R, 3, rr) || !f32_dims(B, 2, bd) || !f32_dims(P, 2, pd) ||
        !f32_dims(H0, 3, layout ? sdl : sd) || !f32_dims(C0, 3, layout ? sdl : sd))
      return cg_unsupported(c, n, "inputs are not float32 of the shapes X, direction and hidden_size imply");
    if (!f32_dims(Y, 4, layout ? ydl : yd) || !f32_dims(YH, 3, layout ? sdl : sd) ||
        !f32_dims(YC, 3, layout ? sdl : sd))
      return cg_unsupported(c, n, "outputs are not float32 of the expected shapes");
    if (SL && (SL->dtype != MG_I32 || cg_dims(SL, ld) != 1 || ld[0] != Bn))
      return cg_unsupported(c, n, "sequence_lens must be int32 [batch_size]");
  }
  if (SL && cg_is_const(SL)) {
    /* out-of-range lengths are an error in the reference; the runtime would clamp */
    int64_t lens[4096], k, m = cg_const_ints(SL, lens, 4096);
    for (k = 0; k < m; k++)
      if (lens[k] < 0 || lens[k] > S) return cg_unsupported(c, n, "sequence_lens outside [0, %lld]", (long long)S);
  }
  if (!nn_fits_int(S * Bn * G * H) || !nn_fits_int(S * Bn * I) || !nn_fits_int(D * G * H * (I + H)))
    return cg_unsupported(c, n, "tensor too large");
  if (rnn_acts(c, n, per_dir, (int)D, acts, sizeof acts)) return -1;
  prm = cg_static(c, "mg_rnn_params",
                  "{%d, %lld, %lld, %lld, %lld, %lld, %d, %lld, %s, %lld, %lld, {%s}}", G,
                  (long long)S, (long long)Bn, (long long)I, (long long)H, (long long)D, reverse,
                  (long long)layout, nn_flit(fc, clip), (long long)lbr, (long long)inf, acts);
  cg_need(c, "rnn.c");
  cg_need(c, "sgemm.c");
  cg_line(c, "mg_rnn(&%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);", prm, cg_in(c, X),
          cg_in(c, W), cg_in(c, R), B ? cg_in(c, B) : "NULL", SL ? cg_in(c, SL) : "NULL",
          H0 ? cg_in(c, H0) : "NULL", C0 ? cg_in(c, C0) : "NULL", P ? cg_in(c, P) : "NULL",
          Y ? cg_out(c, Y) : "NULL", YH ? cg_out(c, YH) : "NULL", YC ? cg_out(c, YC) : "NULL",
          cg_scratch(c, "mg_rnn_scratch(&%s)", prm));
  return 0;
}

int cg_emit_RNN(cg_ctx *c, const mg_node *n) { return emit_recurrent(c, n, 1); }
int cg_emit_GRU(cg_ctx *c, const mg_node *n) { return emit_recurrent(c, n, 3); }
int cg_emit_LSTM(cg_ctx *c, const mg_node *n) { return emit_recurrent(c, n, 4); }
