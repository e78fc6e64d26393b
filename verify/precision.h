/* What a lower precision costs a model, layer by layer, and which layers must stay
 * float32 to meet a budget (issue 17, "the error budget").
 *
 * The yardstick is the reference interpreter at float32. A layer "at P" (float16 or
 * bfloat16) is emulated the way a mixed-precision kernel with float32 accumulation
 * behaves: each float32 input it reads and each float32 output it writes is rounded
 * to P (round to nearest even, through a Cast to P and back inserted into a clone of
 * the model), while its arithmetic stays as the interpreter does it. Rounding is
 * idempotent, so two adjacent layers at P see exactly what one P tensor between them
 * would hold, and a layer kept float32 next to one at P sees what a cast at their
 * boundary gives.
 *
 * Error of a run: per graph output, max |got - ref| / max |ref| ("relative to the
 * output's range", the measure of the parity suites) and the cosine; over several
 * samples and outputs, the largest relative error and the smallest cosine. A NaN or
 * Inf that the reference does not have makes the error infinite. */
#ifndef MG_PRECISION_H
#define MG_PRECISION_H
#include "interp.h"

typedef enum { PREC_FP32, PREC_FP16, PREC_BF16, PREC_INT8 } prec_kind;

/* "fp32", "fp16", "bf16", "int8" -> *out; 0, or -1 for any other text. */
int prec_parse(const char *text, prec_kind *out);
const char *prec_name(prec_kind p);

/* Whether node n of the top graph is a layer the profile assigns precision p to,
 * writing a float32 tensor. fp16/bf16: any node that computes (not a view, a cast
 * or a pure data movement, whose result on rounded inputs is already rounded).
 * int8: a Conv, Gemm or MatMul, the ops int8 kernels take. */
int prec_is_layer(const mg_node *n, prec_kind p);

struct prec_set;
/* A prepared copy of m (which must be prepared) in which every top-graph node i
 * with at_low[i] set runs at p; int8 takes its activation ranges from s (see
 * prec_calibrate), fp16/bf16 ignore s. NULL with a diagnostic when the copy or its
 * preparation fails. Free with mg_model_free.
 *
 * int8 is static post-training quantisation as QDQ: a layer's activation input and
 * its output pass through QuantizeLinear/DequantizeLinear per tensor, uint8 with a
 * zero point over [min(0, lo), max(0, hi)] of the calibrated range; its constant
 * weight per output channel, int8 symmetric (max |w| / 127); a weight computed at
 * run time (attention's products) per tensor like an activation. The bias stays
 * float, as an int32 bias at scale s_x * s_w is within float32 rounding of it. */
mg_model *prec_emulate(const mg_model *m, const unsigned char *at_low, prec_kind p, const struct prec_set *s,
                       mg_diags *d);

/* The inputs the measures run: n_samples sets of n_inputs arrays (sample-major:
 * inputs[s * n_inputs + k] feeds graph input k), and the float32 interpreter's
 * outputs for each (ref[s * n_outputs + j]), filled by prec_set_reference. */
typedef struct prec_set {
  mg_array *inputs;
  int n_samples, n_inputs;
  mg_array *ref;
  int n_outputs;
  /* int8: the range of every float32 value of the top graph over the calibration
   * samples, by value id of the model calibrated (lo > hi: never seen) */
  float *lo, *hi;
  int n_values;
  /* Only the weights (constant inputs) at P; activations and outputs stay float32:
   * what the CPU target's --precision fp16|bf16 does (16-bit weights widened per
   * layer), and MindSpore Lite's WEIGHT_QUANT at int8. */
  int weights_only;
} prec_set;

/* n_samples seeded inputs for every graph input of m (static shapes, float or int
 * dtypes): normal(0, scale) for floats, from splitmix64 and Box-Muller, so the same
 * seed gives the same inputs on every machine; names set. 0, or -1 with a
 * diagnostic (a symbolic dim, an unsupported dtype, memory). */
int prec_set_random(const mg_model *m, int n_samples, double scale, uint64_t seed, prec_set *s, mg_diags *d);
/* Runs m (prepared, unmodified) on every sample and keeps the outputs as ref. */
int prec_set_reference(mg_model *m, prec_set *s, mg_diags *d);
void prec_set_free(prec_set *s);
/* Runs m (prepared, unmodified) on the samples of calib and records into s->lo/hi
 * the range of every float32 value (graph inputs included): min-max calibration.
 * calib may be s itself; the ranges are then measured on the inputs they judge. */
int prec_calibrate(mg_model *m, const prec_set *calib, prec_set *s, mg_diags *d);

typedef struct {
  double max_rel;  /* largest max|got - ref| / max|ref| over samples and outputs */
  double min_cos;  /* smallest cosine */
} prec_error;

/* The error of m with the nodes of at_low at p, over the samples of s. */
int prec_measure(const mg_model *m, const unsigned char *at_low, prec_kind p, const prec_set *s, prec_error *e,
                 mg_diags *d);

typedef struct {
  int node;        /* id in the top graph */
  prec_error err;  /* the error of the model with only this layer at p */
} prec_layer;

/* Called after each layer of a profile with the count done and the total. */
typedef void (*prec_progress)(void *ctx, int done, int total);

/* The profile: for every layer, the error the model shows with that layer alone at
 * p. *out (malloc'd, *n entries) comes sorted by decreasing max_rel, ties by node
 * order. 0, or -1 with a diagnostic. */
int prec_profile(const mg_model *m, prec_kind p, const prec_set *s, prec_progress progress, void *ctx,
                 prec_layer **out, int *n, mg_diags *d);

/* The error with every layer at p except the first `kept` of the profile, which
 * stay float32 (kept = 0: every layer at p). */
int prec_measure_kept(const mg_model *m, prec_kind p, const prec_set *s, const prec_layer *profile, int n_profile,
                      int kept, prec_error *e, mg_diags *d);

/* The mixed assignment for a budget on max_rel: every layer at p, then, greedily in
 * the profile's order, layers kept float32 (keep[node] = 1) until the error is
 * within budget; then each kept layer, last kept first, is tried at p again and
 * stays there when the budget still holds, so no kept layer is superfluous on its
 * own. *all_low is the error with every layer at p, *mixed the error of the result.
 * Every layer kept float32 is the interpreter's own float32 run, error 0, so any
 * budget is met. Returns the number of layers kept, or -1 with a diagnostic when a
 * run fails. */
int prec_budget(const mg_model *m, prec_kind p, const prec_set *s, const prec_layer *profile, int n_profile,
                double budget, unsigned char *keep, prec_error *all_low, prec_error *mixed, mg_diags *d);
#endif
