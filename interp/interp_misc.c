/* Miscellaneous kernels: quantisation (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear), signal processing (DFT, STFT, Hann/Hamming/Blackman
 * windows, MelWeightMatrix), random generators (RandomNormal/Uniform, their
 * ...Like forms, Bernoulli, Multinomial), the losses SoftmaxCrossEntropyLoss and
 * NegativeLogLikelihoodLoss, StringNormalizer (strings are unsupported) and
 * TfIdfVectorizer over integer tokens. */
#include "interp_internal.h"
#include <math.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

/* v rounded to dtype dt and read back: reproduces a computation that the ONNX
 * reference performs in the tensor's own precision (e.g. float32 x / scale
 * before rounding to an integer, where double would round a tie differently). */
static double round_to(mg_dtype dt, double v) {
  unsigned char buf[16];
  mg_array t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.data = buf;
  it_set_f64(&t, 0, v);
  return it_get_f64(&t, 0);
}

/* ---- quantisation ---- */

/* The representable range of an integer quantised dtype; 0 if dt is not one. */
static int qrange(mg_dtype dt, double *lo, double *hi) {
  switch (dt) {
  case MG_U8: *lo = 0, *hi = 255; return 1;
  case MG_I8: *lo = -128, *hi = 127; return 1;
  case MG_U16: *lo = 0, *hi = 65535; return 1;
  case MG_I16: *lo = -32768, *hi = 32767; return 1;
  case MG_I32: *lo = -2147483648.0, *hi = 2147483647.0; return 1;
  default: return 0;
  }
}

/* The index into a per-axis parameter for element k of x (0 when per-tensor).
 * blk is the product of x's dims after axis, len the axis length. */
static int64_t param_index(int64_t k, int per_axis, int64_t blk, int64_t len) {
  return per_axis ? (k / blk) % len : 0;
}

/* Checks the scale/zero-point shapes against x and axis; sets per_axis, blk, len. */
static int quant_params(interp_ctx *c, const mg_node *n, const mg_array *x, const mg_array *s,
                        const mg_array *z, int *per_axis, int64_t *blk, int64_t *len) {
  *per_axis = 0, *blk = 1, *len = 1;
  if (it_numel(s) == 1 && s->rank <= 1) {
    if (z && it_numel(z) != 1) return it_fail(c, n, "zero point and scale differ in size");
    return 0;
  }
  if (s->rank != 1) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "blocked quantisation (scale of rank %d)", s->rank);
    return -1;
  }
  int64_t axis = mg_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank) return it_fail(c, n, "axis out of range");
  if (s->dims[0] != x->dims[axis]) return it_fail(c, n, "scale has %lld entries; axis has %lld", (long long)s->dims[0], (long long)x->dims[axis]);
  if (z && it_numel(z) != s->dims[0]) return it_fail(c, n, "zero point and scale differ in size");
  *per_axis = 1;
  *len = s->dims[0];
  for (int d = (int)axis + 1; d < x->rank; d++) *blk *= x->dims[d];
  return 0;
}

/* QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point), with
 * y's dtype that of the zero point (uint8 without one). */
static int quantize(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *s = it_in(in, n, 1), *z = it_in(in, n, 2);
  if (!x || !s) return it_fail(c, n, "x and y_scale are required");
  mg_dtype ot = z ? z->dtype : MG_U8;
  double lo, hi;
  if (!qrange(ot, &lo, &hi) || ot == MG_I32) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "quantising to %s", mg_dtype_name(ot));
    return -1;
  }
  int per_axis;
  int64_t blk, len;
  if (quant_params(c, n, x, s, z, &per_axis, &blk, &len)) return -1;
  mg_array *y = it_out(c, n, out, 0, ot, x->rank, x->dims);
  if (!y) return -1;
  mg_dtype ct = it_is_float(x->dtype) ? x->dtype : MG_F32;
  int64_t k = it_numel(x);
  for (int64_t i = 0; i < k; i++) {
    int64_t p = param_index(i, per_axis, blk, len);
    double q = nearbyint(round_to(ct, it_get_f64(x, i) / it_get_f64(s, p)));
    q += z ? (double)it_get_i64(z, p) : 0;
    it_set_f64(y, i, isnan(q) ? 0 : q < lo ? lo : q > hi ? hi : q);
  }
  return 0;
}

/* DequantizeLinear: y = (x - zero_point) * scale, in the scale's dtype. */
static int dequantize(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *s = it_in(in, n, 1), *z = it_in(in, n, 2);
  if (!x || !s) return it_fail(c, n, "x and x_scale are required");
  double lo, hi;
  if (!qrange(x->dtype, &lo, &hi)) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "dequantising %s", mg_dtype_name(x->dtype));
    return -1;
  }
  if (!it_is_float(s->dtype)) return it_fail(c, n, "x_scale must be floating point");
  int per_axis;
  int64_t blk, len;
  if (quant_params(c, n, x, s, z, &per_axis, &blk, &len)) return -1;
  mg_array *y = it_out(c, n, out, 0, s->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t k = it_numel(x);
  for (int64_t i = 0; i < k; i++) {
    int64_t p = param_index(i, per_axis, blk, len);
    double v = (double)it_get_i64(x, i) - (z ? (double)it_get_i64(z, p) : 0);
    it_set_f64(y, i, v * it_get_f64(s, p));
  }
  return 0;
}

/* DynamicQuantizeLinear: uint8 quantisation over [min(0, min x), max(0, max x)],
 * each step rounded to float32 as the spec's numpy definition computes it. */
static int dynamic_quantize(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x || !it_is_float(x->dtype)) return it_fail(c, n, "x must be a float tensor");
  int64_t k = it_numel(x);
  double mn = 0, mx = 0;
  for (int64_t i = 0; i < k; i++) {
    double v = it_get_f64(x, i);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  double scale = round_to(MG_F32, round_to(MG_F32, mx - mn) / 255.0);
  double zp = scale > 0 ? nearbyint(0 - round_to(MG_F32, mn / scale)) : 0;
  zp = zp < 0 ? 0 : zp > 255 ? 255 : zp;
  mg_array *y = it_out(c, n, out, 0, MG_U8, x->rank, x->dims);
  mg_array *ys = it_out(c, n, out, 1, MG_F32, 0, NULL);
  mg_array *yz = it_out(c, n, out, 2, MG_U8, 0, NULL);
  if ((out[0] && !y) || (n->n_out > 1 && out[1] && !ys) || (n->n_out > 2 && out[2] && !yz)) return -1;
  for (int64_t i = 0; y && i < k; i++) {
    double q = scale > 0 ? nearbyint(round_to(MG_F32, it_get_f64(x, i) / scale)) + zp : zp;
    it_set_f64(y, i, q < 0 ? 0 : q > 255 ? 255 : q);
  }
  if (ys) it_set_f64(ys, 0, scale);
  if (yz) it_set_f64(yz, 0, zp);
  return 0;
}

/* ---- signal processing ---- */

/* out[k] (complex, k < n_out) = sum_j in[j] e^{-+2 pi i jk/L} over j < n_in with
 * in zero-padded to L; scaled by 1/L when inverse. Twiddles index (j*k) mod L so
 * large products keep their precision. tw holds 2*L doubles of scratch. */
static void dft1(const double *in, int64_t n_in, int64_t L, int64_t n_out, int inverse, double *tw,
                 double *out) {
  for (int64_t m = 0; m < L; m++) {
    double a = 2 * M_PI * (double)m / (double)L;
    tw[2 * m] = cos(a);
    tw[2 * m + 1] = inverse ? sin(a) : -sin(a);
  }
  int64_t used = n_in < L ? n_in : L;
  for (int64_t k = 0; k < n_out; k++) {
    double re = 0, im = 0;
    for (int64_t j = 0; j < used; j++) {
      int64_t m = (int64_t)(((unsigned long long)j * (unsigned long long)k) % (unsigned long long)L);
      double xr = in[2 * j], xi = in[2 * j + 1], c = tw[2 * m], s = tw[2 * m + 1];
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    out[2 * k] = inverse ? re / (double)L : re;
    out[2 * k + 1] = inverse ? im / (double)L : im;
  }
}

/* DFT (opset-17 form, axis an attribute): along `axis` of [..., 1|2]-shaped x,
 * with optional dft_length (pad or truncate), inverse and onesided. */
static int dft(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *dl = it_in(in, n, 1);
  if (!x || x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2))
    return it_fail(c, n, "input must end in a dimension of 1 (real) or 2 (complex)");
  int64_t axis = mg_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank - 2) return it_fail(c, n, "axis out of range");
  int inverse = mg_attr_int(n, "inverse", 0) != 0, onesided = mg_attr_int(n, "onesided", 0) != 0;
  if (inverse && onesided) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "onesided inverse DFT");
    return -1;
  }
  if (dl && it_numel(dl) != 1) return it_fail(c, n, "dft_length must be a scalar");
  int64_t N = x->dims[axis], L = dl ? it_get_i64(dl, 0) : N, cin = x->dims[x->rank - 1];
  if (L < 1) return it_fail(c, n, "dft_length must be positive");
  int64_t K = onesided ? L / 2 + 1 : L;
  int64_t dims[MG_ARRAY_MAX_RANK], outer = 1, inner = 1;
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = K;
  dims[x->rank - 1] = 2;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = (int)axis + 1; d < x->rank - 1; d++) inner *= x->dims[d];
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, dims);
  if (!y) return -1;
  double *buf = mg_calloc((size_t)(2 * N + 4 * L + 2 * K + 1), sizeof(double));
  if (!buf) return it_fail(c, n, "out of memory");
  double *sig = buf, *tw = sig + 2 * N, *res = tw + 2 * L;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t j = 0; j < N; j++) {
        int64_t base = ((o * N + j) * inner + i) * cin;
        sig[2 * j] = it_get_f64(x, base);
        sig[2 * j + 1] = cin == 2 ? it_get_f64(x, base + 1) : 0;
      }
      dft1(sig, N, L, K, inverse, tw, res);
      for (int64_t k = 0; k < K; k++) {
        int64_t base = ((o * K + k) * inner + i) * 2;
        it_set_f64(y, base, res[2 * k]);
        it_set_f64(y, base + 1, res[2 * k + 1]);
      }
    }
  mg_free(buf);
  return 0;
}

/* STFT: frames of frame_length every frame_step samples, each multiplied by the
 * window (ones when absent) and transformed; output [batch, frames, bins, 2]. */
static int stft(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *st = it_in(in, n, 1), *w = it_in(in, n, 2), *fl = it_in(in, n, 3);
  if (!x || !st) return it_fail(c, n, "signal and frame_step are required");
  /* [batch, length] is accepted as a real signal too, as onnxruntime does. */
  if (x->rank != 2 && (x->rank != 3 || (x->dims[2] != 1 && x->dims[2] != 2)))
    return it_fail(c, n, "signal must be [batch, length] or [batch, length, 1 or 2]");
  if (w && w->rank != 1) return it_fail(c, n, "window must be 1-D");
  if (it_numel(st) != 1 || (fl && it_numel(fl) != 1)) return it_fail(c, n, "frame_step and frame_length must be scalars");
  int64_t step = it_get_i64(st, 0), F = fl ? it_get_i64(fl, 0) : w ? w->dims[0] : -1;
  if (F < 1) return it_fail(c, n, "frame_length (or a window) is required");
  if (w && w->dims[0] != F) return it_fail(c, n, "window length differs from frame_length");
  if (step < 1) return it_fail(c, n, "frame_step must be positive");
  int64_t B = x->dims[0], S = x->dims[1], cin = x->rank == 3 ? x->dims[2] : 1;
  if (S < F) return it_fail(c, n, "signal shorter than a frame");
  int onesided = mg_attr_int(n, "onesided", 1) != 0;
  int64_t frames = (S - F) / step + 1, K = onesided ? F / 2 + 1 : F;
  int64_t dims[4] = {B, frames, K, 2};
  mg_array *y = it_out(c, n, out, 0, x->dtype, 4, dims);
  if (!y) return -1;
  double *buf = mg_calloc((size_t)(4 * F + 2 * K + 1), sizeof(double));
  if (!buf) return it_fail(c, n, "out of memory");
  double *sig = buf, *tw = sig + 2 * F, *res = tw + 2 * F;
  for (int64_t b = 0; b < B; b++)
    for (int64_t f = 0; f < frames; f++) {
      for (int64_t j = 0; j < F; j++) {
        int64_t base = (b * S + f * step + j) * cin;
        double wv = w ? it_get_f64(w, j) : 1;
        sig[2 * j] = it_get_f64(x, base) * wv;
        sig[2 * j + 1] = cin == 2 ? it_get_f64(x, base + 1) * wv : 0;
      }
      dft1(sig, F, F, K, 0, tw, res);
      for (int64_t k = 0; k < K; k++) {
        it_set_f64(y, ((b * frames + f) * K + k) * 2, res[2 * k]);
        it_set_f64(y, ((b * frames + f) * K + k) * 2 + 1, res[2 * k + 1]);
      }
    }
  mg_free(buf);
  return 0;
}

/* Reads an output_datatype attribute; 0 (after a diagnostic) when not a float type. */
static mg_dtype out_dtype(interp_ctx *c, const mg_node *n) {
  int64_t dt = mg_attr_int(n, "output_datatype", 1);
  if (!mg_dtype_valid((int)dt) || !mg_dtype_size((mg_dtype)dt) || dt == MG_C64 || dt == MG_C128) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "output_datatype %lld", (long long)dt);
    return MG_UNDEFINED;
  }
  return (mg_dtype)dt;
}

/* Hann, Hamming and Blackman windows of `size` points; periodic windows divide
 * by size, symmetric ones by size - 1. */
static int window(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *sz = it_in(in, n, 0);
  if (!sz || it_numel(sz) != 1) return it_fail(c, n, "size must be a scalar");
  int64_t size = it_get_i64(sz, 0);
  if (size < 0) return it_fail(c, n, "negative size");
  mg_dtype dt = out_dtype(c, n);
  if (!dt) return -1;
  mg_array *y = it_out(c, n, out, 0, dt, 1, &size);
  if (!y) return -1;
  double N = mg_attr_int(n, "periodic", 1) ? (double)size : (double)(size - 1);
  for (int64_t i = 0; i < size; i++) {
    double a = N > 0 ? 2 * M_PI * (double)i / N : 0, v;
    if (n->op == MG_OP_HannWindow) v = 0.5 - 0.5 * cos(a);
    else if (n->op == MG_OP_HammingWindow) v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a);
    else v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
    it_set_f64(y, i, v);
  }
  return 0;
}

/* MelWeightMatrix, transcribed from the ONNX reference implementation
 * (op_mel_weight_matrix.py) including its precisions: the mel edges are float32
 * arithmetic (the inputs' type), the bin centres float64, truncated to int. */
static int mel_weight_matrix(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *t[5];
  for (int i = 0; i < 5; i++)
    if (!(t[i] = it_in(in, n, i)) || it_numel(t[i]) != 1) return it_fail(c, n, "input %d must be a scalar", i);
  int64_t mel = it_get_i64(t[0], 0), dftl = it_get_i64(t[1], 0), rate = it_get_i64(t[2], 0);
  if (mel < 1 || dftl < 1 || rate < 1) return it_fail(c, n, "num_mel_bins, dft_length and sample_rate must be positive");
  mg_dtype ft = it_is_float(t[3]->dtype) ? t[3]->dtype : MG_F64;
  double lo = it_get_f64(t[3], 0), hi = it_get_f64(t[4], 0);
  double lo_mel = round_to(ft, 2595 * round_to(ft, log10(round_to(ft, 1 + round_to(ft, lo / 700)))));
  double hi_mel = round_to(ft, 2595 * round_to(ft, log10(round_to(ft, 1 + round_to(ft, hi / 700)))));
  double step = round_to(ft, round_to(ft, hi_mel - lo_mel) / (double)(mel + 2));
  mg_dtype dt = out_dtype(c, n);
  if (!dt) return -1;
  int64_t bins = dftl / 2 + 1, dims[2] = {bins, mel};
  int64_t *fb = mg_malloc(sizeof(int64_t) * (size_t)(mel + 2));
  double *w = mg_calloc((size_t)(bins * mel), sizeof(double));
  if (!fb || !w) {
    mg_free(fb), mg_free(w);
    return it_fail(c, n, "out of memory");
  }
  for (int64_t i = 0; i < mel + 2; i++) {
    double f = (double)i * step + lo_mel;
    f = 700 * (pow(10, f / 2595) - 1);
    fb[i] = (int64_t)floor((double)(dftl + 1) * f / (double)rate);
  }
  int rc = 0;
  for (int64_t i = 0; i < mel && !rc; i++) {
    int64_t l = fb[i], ce = fb[i + 1], r = fb[i + 2];
    if (l < 0 || r > bins || ce >= bins || ce < 0) {
      rc = it_fail(c, n, "mel band %lld falls outside the spectrogram bins", (long long)i);
      break;
    }
    if (ce == l) w[ce * mel + i] = 1;
    else
      for (int64_t j = l; j <= ce; j++) w[j * mel + i] = (double)(j - l) / (double)(ce - l);
    for (int64_t j = ce; j < r && r > ce; j++) w[j * mel + i] = (double)(r - j) / (double)(r - ce);
  }
  mg_array *y = rc ? NULL : it_out(c, n, out, 0, dt, 2, dims);
  if (y) it_store_f64(y, w);
  else rc = -1;
  mg_free(fb), mg_free(w);
  return rc;
}

/* ---- random ---- */

/* The generator state: a node with a seed gets its own stream (so reruns agree);
 * otherwise the run's shared xorshift stream advances. */
typedef struct {
  uint64_t s, *shared;
} rng;

static void rng_init(interp_ctx *c, const mg_node *n, rng *r) {
  const mg_attr *seed = mg_node_attr(n, "seed");
  r->shared = NULL;
  if (seed && seed->kind == MG_ATTR_FLOAT) {
    uint64_t z = (uint64_t)(int64_t)seed->f + 0x9E3779B97F4A7C15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->s = (z ^ (z >> 31)) | 1;
  } else {
    r->s = c->rng;
    r->shared = &c->rng;
  }
}

/* Writes a shared stream's state back to the run. */
static void rng_done(rng *r) {
  if (r->shared) *r->shared = r->s;
}

/* Uniform in [0, 1), the same xorshift step as Dropout's. */
static double uniform01(rng *r) {
  r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
  return (double)(r->s >> 11) / 9007199254740992.0;
}

/* Standard normal by Box-Muller (u1 in (0, 1] keeps the log finite). */
static double normal01(rng *r) {
  double u1 = 1 - uniform01(r), u2 = uniform01(r);
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* RandomNormal/Uniform (shape attribute), their ...Like forms (input's shape,
 * dtype attribute defaulting to the input's), and Bernoulli (1 with the input's
 * probability). Values do not reproduce numpy's generator; shapes and dtypes do. */
static int random_op(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = n->n_in > 0 ? it_in(in, n, 0) : NULL;
  int64_t dims[MG_ARRAY_MAX_RANK];
  int rank;
  mg_dtype dt;
  if (n->op == MG_OP_RandomNormal || n->op == MG_OP_RandomUniform) {
    const int64_t *shp;
    size_t k = mg_attr_ints(n, "shape", &shp);
    if (!mg_node_attr(n, "shape") || k > MG_ARRAY_MAX_RANK) return it_fail(c, n, "shape attribute required");
    rank = (int)k;
    memcpy(dims, shp, sizeof(int64_t) * k);
    dt = (mg_dtype)mg_attr_int(n, "dtype", 1);
  } else {
    if (!x) return it_fail(c, n, "input is not a tensor");
    rank = x->rank;
    memcpy(dims, x->dims, sizeof dims);
    dt = (mg_dtype)mg_attr_int(n, "dtype", x->dtype);
  }
  if (!mg_dtype_valid(dt) || !mg_dtype_size(dt) || dt == MG_C64 || dt == MG_C128) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "dtype %d", (int)dt);
    return -1;
  }
  mg_array *y = it_out(c, n, out, 0, dt, rank, dims);
  if (!y) return -1;
  rng r;
  rng_init(c, n, &r);
  int normal = n->op == MG_OP_RandomNormal || n->op == MG_OP_RandomNormalLike;
  int uniform = !normal && n->op != MG_OP_Bernoulli;
  double a = normal ? mg_attr_float(n, "mean", 0) : uniform ? mg_attr_float(n, "low", 0) : 0;
  double b = normal ? mg_attr_float(n, "scale", 1) : uniform ? mg_attr_float(n, "high", 1) : 1;
  int64_t k = it_numel(y);
  for (int64_t i = 0; i < k; i++) {
    if (n->op == MG_OP_Bernoulli) it_set_f64(y, i, uniform01(&r) < it_get_f64(x, i) ? 1 : 0);
    else if (normal) it_set_f64(y, i, a + b * normal01(&r));
    else it_set_f64(y, i, a + (b - a) * uniform01(&r));
  }
  rng_done(&r);
  return 0;
}

/* Multinomial: sample_size draws per batch row from the softmax of the row's
 * unnormalised log-probabilities. */
static int multinomial(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x || x->rank != 2) return it_fail(c, n, "input must be [batch, classes]");
  int64_t S = mg_attr_int(n, "sample_size", 1), B = x->dims[0], C = x->dims[1];
  mg_dtype dt = (mg_dtype)mg_attr_int(n, "dtype", MG_I32);
  if (dt != MG_I32 && dt != MG_I64) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "dtype %d", (int)dt);
    return -1;
  }
  if (S < 1 || C < 1) return it_fail(c, n, "sample_size and the class count must be positive");
  int64_t dims[2] = {B, S};
  mg_array *y = it_out(c, n, out, 0, dt, 2, dims);
  if (!y) return -1;
  double *p = mg_malloc(sizeof(double) * (size_t)C);
  if (!p) return it_fail(c, n, "out of memory");
  rng r;
  rng_init(c, n, &r);
  for (int64_t b = 0; b < B; b++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < C; j++) mx = fmax(mx, it_get_f64(x, b * C + j));
    for (int64_t j = 0; j < C; j++) sum += p[j] = exp(it_get_f64(x, b * C + j) - mx);
    for (int64_t s = 0; s < S; s++) {
      double u = uniform01(&r) * sum, acc = 0;
      int64_t j = 0;
      for (; j < C - 1; j++)
        if ((acc += p[j]) > u) break;
      it_set_i64(y, b * S + s, j);
    }
  }
  rng_done(&r);
  mg_free(p);
  return 0;
}

/* ---- losses ---- */

/* NegativeLogLikelihoodLoss over log-probabilities lp of shape [N, C, d...] (as
 * doubles), targets t [N, d...]: loss = -w[t] * lp[n, t, d], 0 where t equals
 * ignore_index. reduction mean divides by the sum of the weights of the targets
 * that are not ignored (their count without weights), as the spec defines it. */
static int nll(interp_ctx *c, const mg_node *n, const double *lp, const mg_array *x,
               const mg_array *t, const mg_array *w, mg_rvalue **out) {
  if (x->rank < 2 || t->rank != x->rank - 1 || t->dims[0] != x->dims[0])
    return it_fail(c, n, "target must be [N, d...] for input [N, C, d...]");
  for (int d = 1; d < t->rank; d++)
    if (t->dims[d] != x->dims[d + 1]) return it_fail(c, n, "target and input disagree on the spatial dims");
  int64_t C = x->dims[1], D = 1, N = x->dims[0];
  for (int d = 2; d < x->rank; d++) D *= x->dims[d];
  if (w && (w->rank != 1 || w->dims[0] != C)) return it_fail(c, n, "weight must be [C]");
  const mg_attr *ii = mg_node_attr(n, "ignore_index");
  int has_ii = ii && ii->kind == MG_ATTR_INT;
  const char *red = mg_attr_str(n, "reduction", "mean");
  int mode = !strcmp(red, "none") ? 0 : !strcmp(red, "sum") ? 1 : !strcmp(red, "mean") ? 2 : -1;
  if (mode < 0) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "reduction '%s'", red);
    return -1;
  }
  int64_t k = N * D;
  double *loss = mg_malloc(sizeof(double) * (size_t)(k ? k : 1)), sum = 0, wsum = 0;
  if (!loss) return it_fail(c, n, "out of memory");
  for (int64_t i = 0; i < k; i++) {
    int64_t b = i / D, s = i % D, tg = it_get_i64(t, i);
    if (has_ii && tg == ii->i) {
      loss[i] = 0;
      continue;
    }
    if (tg < 0 || tg >= C) {
      mg_free(loss);
      return it_fail(c, n, "target %lld out of range [0, %lld)", (long long)tg, (long long)C);
    }
    double wt = w ? it_get_f64(w, tg) : 1;
    loss[i] = -lp[(b * C + tg) * D + s] * wt;
    sum += loss[i];
    wsum += wt;
  }
  mg_array *y = mode == 0 ? it_out(c, n, out, 0, x->dtype, t->rank, t->dims) : it_out(c, n, out, 0, x->dtype, 0, NULL);
  if (y) {
    if (mode == 0) it_store_f64(y, loss);
    else it_set_f64(y, 0, mode == 1 ? sum : sum / wsum);
  }
  mg_free(loss);
  return y ? 0 : -1;
}

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the NLL of the
 * log-softmax over axis 1, which is also the optional second output). */
static int loss_op(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *t = it_in(in, n, 1), *w = it_in(in, n, 2);
  if (!x || !t || x->rank < 2) return it_fail(c, n, "input [N, C, ...] and target are required");
  if (!out[0]) return 0;
  double *lp = it_f64(c, n, x);
  if (!lp) return -1;
  if (n->op == MG_OP_SoftmaxCrossEntropyLoss) {
    int64_t N = x->dims[0], C = x->dims[1], D = N > 0 && C > 0 ? it_numel(x) / (N * C) : 0;
    for (int64_t b = 0; b < N; b++)
      for (int64_t s = 0; s < D; s++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < C; j++) mx = fmax(mx, lp[(b * C + j) * D + s]);
        for (int64_t j = 0; j < C; j++) sum += exp(lp[(b * C + j) * D + s] - mx);
        double lse = mx + log(sum);
        for (int64_t j = 0; j < C; j++) lp[(b * C + j) * D + s] -= lse;
      }
    if (n->n_out > 1 && out[1]) {
      mg_array *y = it_out(c, n, out, 1, x->dtype, x->rank, x->dims);
      if (!y) {
        mg_free(lp);
        return -1;
      }
      it_store_f64(y, lp);
    }
  }
  int rc = nll(c, n, lp, x, t, w, out);
  mg_free(lp);
  return rc;
}

/* ---- text ---- */

/* TfIdfVectorizer over int32/int64 tokens, [N] or [B, N]. For each n-gram length
 * in [min_gram_length, max_gram_length] and each skip in [0, max_skip_count]
 * (unigrams only once), every window of tokens spaced skip+1 apart that matches
 * a pool n-gram counts towards that n-gram's output index. TF gives counts, IDF
 * the weight (1 without weights) where the count is nonzero, TFIDF count times
 * weight; weights are looked up by output index, as onnxruntime and the ONNX
 * reference do. */
static int tfidf(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "input is not a tensor");
  if (x->dtype != MG_I32 && x->dtype != MG_I64) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "TfIdfVectorizer over %s", mg_dtype_name(x->dtype));
    return -1;
  }
  if (x->rank != 1 && x->rank != 2) return it_fail(c, n, "input must be 1-D or 2-D");
  const int64_t *counts, *idx, *pool;
  size_t n_counts = mg_attr_ints(n, "ngram_counts", &counts), n_idx = mg_attr_ints(n, "ngram_indexes", &idx);
  size_t n_pool = mg_attr_ints(n, "pool_int64s", &pool);
  int64_t mn = mg_attr_int(n, "min_gram_length", 1), mx = mg_attr_int(n, "max_gram_length", 1);
  int64_t skip = mg_attr_int(n, "max_skip_count", 0);
  const char *mode = mg_attr_str(n, "mode", "TF");
  int m = !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1 : !strcmp(mode, "TFIDF") ? 2 : -1;
  if (m < 0 || mn < 1 || mx < mn || skip < 0) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "mode '%s' with gram lengths [%lld, %lld], skip %lld",
             mode, (long long)mn, (long long)mx, (long long)skip);
    return -1;
  }
  const mg_attr *wa = mg_node_attr(n, "weights");
  const float *wts = wa && wa->kind == MG_ATTR_FLOATS ? wa->floats : NULL;
  size_t n_w = wts ? wa->n : 0;
  int64_t C = 0;
  for (size_t i = 0; i < n_idx; i++) {
    if (idx[i] < 0) return it_fail(c, n, "negative ngram index");
    C = idx[i] + 1 > C ? idx[i] + 1 : C;
  }
  int64_t B = x->rank == 2 ? x->dims[0] : 1, L = x->dims[x->rank - 1];
  int64_t dims[2] = {B, C};
  mg_array *y = x->rank == 2 ? it_out(c, n, out, 0, MG_F32, 2, dims) : it_out(c, n, out, 0, MG_F32, 1, &C);
  if (!y) return -1;
  double *cnt = mg_calloc((size_t)(C ? C : 1), sizeof(double));
  if (!cnt) return it_fail(c, n, "out of memory");
  int rc = 0;
  for (int64_t b = 0; b < B && !rc; b++) {
    memset(cnt, 0, sizeof(double) * (size_t)C);
    size_t ord = 0; /* ordinal of the first n-gram of the current length */
    for (size_t g = 0; g < n_counts && !rc; g++) {
      int64_t len = (int64_t)g + 1;
      size_t start = (size_t)counts[g], end = g + 1 < n_counts ? (size_t)counts[g + 1] : n_pool;
      if (start > end || end > n_pool || (end - start) % (size_t)len) {
        rc = it_fail(c, n, "ngram_counts does not partition the pool");
        break;
      }
      size_t grams = (end - start) / (size_t)len;
      if (ord + grams > n_idx) {
        rc = it_fail(c, n, "ngram_indexes is shorter than the pool");
        break;
      }
      if (len >= mn && len <= mx)
        for (int64_t sk = 0; sk <= (len == 1 ? 0 : skip); sk++)
          for (int64_t s0 = 0; s0 + (len - 1) * (sk + 1) < L; s0++)
            for (size_t q = 0; q < grams; q++) {
              int match = 1;
              for (int64_t e = 0; match && e < len; e++)
                match = it_get_i64(x, b * L + s0 + e * (sk + 1)) == pool[start + q * (size_t)len + (size_t)e];
              if (match) cnt[idx[ord + q]] += 1;
            }
      ord += grams;
    }
    for (int64_t o = 0; o < C && !rc; o++) {
      double wv = (size_t)o < n_w ? wts[o] : 1, v = cnt[o];
      if (m == 1) v = v > 0 ? wv : 0;
      else if (m == 2) v *= wv;
      it_set_f64(y, b * C + o, v);
    }
  }
  mg_free(cnt);
  return rc;
}

/* StringNormalizer: drops stopwords (ASCII case-insensitively unless
 * is_case_sensitive), then applies case_change_action (ASCII). Input [C] or [1, C];
 * when every string is dropped the output is one empty string, as the spec says. */
static int string_normalizer(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x || x->dtype != MG_STRING) return it_fail(c, n, "input must be a string tensor");
  if (!(x->rank == 1 || (x->rank == 2 && x->dims[0] == 1)))
    return it_fail(c, n, "input must have shape [C] or [1, C]");
  int64_t cnt = x->dims[x->rank - 1];
  const mg_attr *sw = mg_node_attr(n, "stopwords");
  int sensitive = (int)mg_attr_int(n, "is_case_sensitive", 0);
  const char *action = mg_attr_str(n, "case_change_action", "NONE");
  if (strcmp(action, "NONE") && strcmp(action, "LOWER") && strcmp(action, "UPPER")) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "case_change_action '%s'", action);
    return -1;
  }
  char *const *src = x->data;
  int64_t kept = 0;
  char *keep = mg_calloc((size_t)cnt + 1, 1);
  if (!keep) return it_fail(c, n, "out of memory");
  for (int64_t i = 0; i < cnt; i++) {
    int stop = 0;
    for (size_t k = 0; sw && sw->kind == MG_ATTR_STRINGS && k < sw->n && !stop; k++)
      stop = sensitive ? !strcmp(src[i], sw->strings[k]) : !strcasecmp(src[i], sw->strings[k]);
    keep[i] = !stop;
    kept += !stop;
  }
  int64_t dims[2] = {1, kept ? kept : 1};
  mg_array *y = x->rank == 1 ? it_out(c, n, out, 0, MG_STRING, 1, &dims[1])
                             : it_out(c, n, out, 0, MG_STRING, 2, dims);
  int rc = y ? 0 : -1;
  for (int64_t i = 0, j = 0; !rc && i < cnt; i++) {
    if (!keep[i]) continue;
    rc = it_set_str(c, n, y, j, src[i]);
    char *s = rc ? NULL : ((char **)y->data)[j];
    for (; s && *s; s++) {
      if (!strcmp(action, "LOWER")) *s = (char)tolower((unsigned char)*s);
      else if (!strcmp(action, "UPPER")) *s = (char)toupper((unsigned char)*s);
    }
    j++;
  }
  if (!rc && !kept) rc = it_set_str(c, n, y, 0, "");
  mg_free(keep);
  return rc;
}

/* Dispatches one node of the misc family (see interp_families.def). */
int interp_misc(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                interp_frame *frame) {
  (void)frame;
  switch (n->op) {
  case MG_OP_QuantizeLinear: return quantize(c, n, in, out);
  case MG_OP_DequantizeLinear: return dequantize(c, n, in, out);
  case MG_OP_DynamicQuantizeLinear: return dynamic_quantize(c, n, in, out);
  case MG_OP_DFT: return dft(c, n, in, out);
  case MG_OP_STFT: return stft(c, n, in, out);
  case MG_OP_HannWindow: case MG_OP_HammingWindow: case MG_OP_BlackmanWindow: return window(c, n, in, out);
  case MG_OP_MelWeightMatrix: return mel_weight_matrix(c, n, in, out);
  case MG_OP_Multinomial: return multinomial(c, n, in, out);
  case MG_OP_SoftmaxCrossEntropyLoss: case MG_OP_NegativeLogLikelihoodLoss: return loss_op(c, n, in, out);
  case MG_OP_TfIdfVectorizer: return tfidf(c, n, in, out);
  case MG_OP_StringNormalizer: return string_normalizer(c, n, in, out);
  default: return random_op(c, n, in, out);
  }
}
