/* Layer-by-layer precision emulation, the profile and the budget (precision.h). */
#include "precision.h"
#include "arena.h"
#include "passes.h"
#include "rewrite.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prec_parse(const char *text, prec_kind *out) {
  static const char *const names[] = {"fp32", "fp16", "bf16", "int8"};
  for (int i = 0; i < 4; i++)
    if (text && !strcmp(text, names[i])) {
      *out = (prec_kind)i;
      return 0;
    }
  return -1;
}

const char *prec_name(prec_kind p) {
  return p == PREC_FP16 ? "fp16" : p == PREC_BF16 ? "bf16" : p == PREC_INT8 ? "int8" : "fp32";
}

/* Ops whose float output holds only elements of their inputs (or constants), so
 * they are exact on rounded inputs and a precision changes nothing in them. */
static int moves_data(mg_op op) {
  switch (op) {
  case MG_OP_Cast: case MG_OP_CastLike: case MG_OP_Identity: case MG_OP_Transpose: case MG_OP_Concat:
  case MG_OP_Slice: case MG_OP_Gather: case MG_OP_GatherElements: case MG_OP_GatherND: case MG_OP_Split:
  case MG_OP_Expand: case MG_OP_Tile: case MG_OP_Shape: case MG_OP_Size: case MG_OP_ConstantOfShape:
  case MG_OP_Where: case MG_OP_DepthToSpace: case MG_OP_SpaceToDepth:
    return 1;
  default:
    return mg_op_is_view(op);
  }
}

static int has_subgraph(const mg_node *n) {
  for (int i = 0; i < n->n_attr; i++)
    if (n->attr[i].kind == MG_ATTR_GRAPH) return 1;
  return 0;
}

static int is_f32_tensor(const mg_value *v) { return v && v->vtype == MG_VT_TENSOR && v->dtype == MG_F32; }

/* A weight: a constant the layer reads (an initializer, or one folded from them). */
static int is_weight(const mg_value *v) { return v->data && (v->kind == MG_V_CONST || v->kind == MG_V_INIT); }

int prec_is_layer(const mg_node *n, prec_kind p) {
  if (moves_data(n->op) || has_subgraph(n)) return 0;
  if (p == PREC_INT8 && n->op != MG_OP_Conv && n->op != MG_OP_Gemm && n->op != MG_OP_MatMul) return 0;
  for (int j = 0; j < n->n_out; j++)
    if (is_f32_tensor(n->out[j])) return 1;
  return 0;
}

/* Inputs a kernel at P would hold in P: the data, not the geometry (Resize's roi
 * and scales, a Pad's or a Clip's bounds stay as given, since they decide shapes or
 * are compared, not computed with). */
static int rounds_input(const mg_node *n, int k) {
  switch (n->op) {
  case MG_OP_Resize: case MG_OP_Pad: case MG_OP_Clip:
    return k == 0;
  default:
    return 1;
  }
}

/* x -> Cast(to P) -> Cast(to float32): the value x rounded to P. */
static mg_value *round_trip(mg_rw *w, mg_value *x, mg_value *into, prec_kind p) {
  const mg_dtype low = p == PREC_BF16 ? MG_BF16 : MG_F16;
  char base[256];
  snprintf(base, sizeof base, "%s.%s", x->name, prec_name(p));
  mg_value *lowv = mg_rw_value(w, base, low, &x->shape);
  mg_value *back = into ? into : mg_rw_value(w, base, MG_F32, &x->shape);
  if (!lowv || !back) return NULL;
  mg_node *c1 = mg_rw_node(w, MG_OP_Cast, base, 1, &x, 1, &lowv);
  if (c1) mg_rw_attr_int(w, c1, "to", low);
  mg_node *c2 = mg_rw_node(w, MG_OP_Cast, base, 1, &lowv, 1, &back);
  if (c2) mg_rw_attr_int(w, c2, "to", MG_F32);
  return w->failed ? NULL : back;
}

/* x -> QuantizeLinear -> DequantizeLinear with n_ch scales (one: per tensor, a
 * scalar; else along axis) and zero points of dtype zdt: x on the int8/uint8 grid. */
static mg_value *qdq(mg_rw *w, mg_value *x, mg_value *into, const float *scale, const void *zp, mg_dtype zdt,
                     int n_ch, int axis) {
  char base[256];
  snprintf(base, sizeof base, "%s.int8", x->name);
  mg_shape ps = {.rank = n_ch > 1};
  ps.d[0].v = n_ch;
  mg_value *sc = mg_rw_const(w, base, MG_F32, &ps, scale, sizeof(float) * (size_t)n_ch);
  mg_value *z = mg_rw_const(w, base, zdt, &ps, zp, (size_t)n_ch);
  mg_value *q = mg_rw_value(w, base, zdt, &x->shape);
  mg_value *back = into ? into : mg_rw_value(w, base, MG_F32, &x->shape);
  if (!sc || !z || !q || !back) return NULL;
  mg_value *qin[3] = {x, sc, z}, *din[3] = {q, sc, z};
  mg_node *qn = mg_rw_node(w, MG_OP_QuantizeLinear, base, 3, qin, 1, &q);
  mg_node *dn = mg_rw_node(w, MG_OP_DequantizeLinear, base, 3, din, 1, &back);
  if (qn && dn && n_ch > 1) mg_rw_attr_int(w, qn, "axis", axis), mg_rw_attr_int(w, dn, "axis", axis);
  return w->failed ? NULL : back;
}

/* The uint8 grid of an activation whose calibrated range is [lo, hi]. */
static void activation_grid(float lo, float hi, float *scale, uint8_t *zp) {
  lo = lo < 0 ? lo : 0, hi = hi > 0 ? hi : 0;
  *scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const double z = nearbyint(-lo / *scale);
  *zp = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
}

/* Per-channel symmetric int8 scales of constant weight v along axis (n_ch
 * channels, or one for the whole tensor). */
static void weight_scales(const mg_value *v, int axis, int n_ch, float *scale) {
  int64_t inner = 1, numel = mg_shape_numel(&v->shape);
  for (int k = axis + 1; n_ch > 1 && k < v->shape.rank; k++) inner *= v->shape.d[k].v;
  for (int c = 0; c < n_ch; c++) scale[c] = 0;
  for (int64_t i = 0; i < numel; i++) {
    const int c = n_ch > 1 ? (int)((i / inner) % n_ch) : 0;
    const float a = (float)fabs(mg_load_f64(MG_F32, (const char *)v->data + (size_t)i * 4));
    if (a > scale[c]) scale[c] = a;
  }
  for (int c = 0; c < n_ch; c++) scale[c] = scale[c] > 0 ? scale[c] / 127.0f : 1.0f;
}

/* The calibrated range of the value named like x in the model calibrated. */
static int range_of(const mg_model *orig, const prec_set *s, const mg_value *x, float *lo, float *hi,
                    mg_diags *d) {
  const mg_value *v = mg_graph_find(orig->graph, x->name);
  if (!s || !s->lo || !v || v->id < 0 || v->id >= s->n_values || s->lo[v->id] > s->hi[v->id]) {
    mg_error(d, USAGE, NULL, NULL, "int8: no calibrated range for '%s'", x->name);
    return -1;
  }
  *lo = s->lo[v->id], *hi = s->hi[v->id];
  return 0;
}

/* An int8 layer's input k: its weight (a constant in the weight slot) per output
 * channel, a bias as it is, anything else per tensor on its calibrated grid. */
static int quantize_input(mg_rw *w, const mg_model *orig, const prec_set *s, mg_node *n, int k, mg_diags *d) {
  mg_value *x = n->in[k];
  const int bias = (n->op == MG_OP_Conv || n->op == MG_OP_Gemm) && k == 2;
  if (bias) return 0;
  mg_value *r = NULL;
  if (is_weight(x) && x->shape.rank >= 1) {
    int axis = -1;
    if (k == 1 && n->op == MG_OP_Conv) axis = 0;
    else if (k == 1 && n->op == MG_OP_Gemm) axis = mg_attr_int(n, "transB", 0) ? 0 : 1;
    else if (k == 1 && n->op == MG_OP_MatMul && x->shape.rank >= 2) axis = x->shape.rank - 1;
    const int n_ch = axis >= 0 ? (int)x->shape.d[axis].v : 1;
    float *scale = mg_malloc(sizeof(float) * (size_t)n_ch);
    int8_t *zp = mg_calloc((size_t)n_ch, 1);
    if (scale && zp) {
      weight_scales(x, axis, n_ch, scale);
      r = qdq(w, x, NULL, scale, zp, MG_I8, n_ch, axis);
    } else {
      w->failed = 1;
    }
    mg_free(scale), mg_free(zp);
  } else {
    float lo, hi, scale;
    uint8_t zp;
    if (range_of(orig, s, x, &lo, &hi, d)) return -1;
    activation_grid(lo, hi, &scale, &zp);
    r = qdq(w, x, NULL, &scale, &zp, MG_U8, 1, 0);
  }
  if (r) n->in[k] = r;
  return r ? 0 : -1;
}

/* Rewrites node n (kept in place) to read its float32 inputs and write its float32
 * outputs on p's grid: rounded to fp16/bf16, or quantised to int8 (prec_emulate). */
static int emulate_node(mg_rw *w, const mg_model *orig, const prec_set *s, mg_node *n, prec_kind p,
                        mg_diags *d) {
  const int weights_only = s && s->weights_only;
  for (int k = 0; k < n->n_in; k++) {
    if (!is_f32_tensor(n->in[k]) || !rounds_input(n, k)) continue;
    if (weights_only && !is_weight(n->in[k])) continue;
    if (p == PREC_INT8) {
      if (quantize_input(w, orig, s, n, k, d)) return -1;
    } else {
      mg_value *r = round_trip(w, n->in[k], NULL, p);
      if (r) n->in[k] = r;
    }
  }
  mg_rw_keep(w, n);
  for (int j = 0; !weights_only && j < n->n_out; j++) {
    mg_value *y = n->out[j];
    if (!is_f32_tensor(y)) continue;
    float lo = 0, hi = 0, scale;
    uint8_t zp;
    if (p == PREC_INT8 && range_of(orig, s, y, &lo, &hi, d)) return -1;
    char base[256];
    snprintf(base, sizeof base, "%s.raw", y->name);
    mg_value *raw = mg_rw_value(w, base, MG_F32, &y->shape);
    if (!raw) return -1;
    raw->producer = n;
    raw->producer_slot = j;
    n->out[j] = raw;
    /* y keeps its name: a graph output stays one */
    if (p == PREC_INT8) {
      activation_grid(lo, hi, &scale, &zp);
      qdq(w, raw, y, &scale, &zp, MG_U8, 1, 0);
    } else {
      round_trip(w, raw, y, p);
    }
  }
  return w->failed ? -1 : 0;
}

mg_model *prec_emulate(const mg_model *m, const unsigned char *at_low, prec_kind p, const prec_set *s,
                       mg_diags *d) {
  mg_model *c = mg_model_clone(m);
  if (!c) {
    mg_error(d, OOM, NULL, NULL, "out of memory copying the model for the %s emulation", prec_name(p));
    return NULL;
  }
  mg_graph *g = c->graph;
  mg_rw w;
  mg_rw_begin(&w, c, g);
  const int n_nodes = g->n_nodes;
  mg_node **nodes = mg_malloc(sizeof *nodes * (size_t)(n_nodes ? n_nodes : 1));
  if (!nodes) w.failed = 1;
  else memcpy(nodes, g->nodes, sizeof *nodes * (size_t)n_nodes);
  int bad = 0;
  const size_t errors_before = d->errors;
  for (int i = 0; nodes && i < n_nodes; i++) {
    if (!bad && p != PREC_FP32 && at_low[i] && prec_is_layer(nodes[i], p)) bad = emulate_node(&w, m, s, nodes[i], p, d);
    else mg_rw_keep(&w, nodes[i]);
  }
  mg_free(nodes);
  if (mg_rw_end(&w) || bad) {
    if (d->errors > errors_before) {
      mg_model_free(c);
      return NULL;
    }
    mg_error(d, OOM, NULL, NULL, "out of memory rewriting the model for the %s emulation", prec_name(p));
    mg_model_free(c);
    return NULL;
  }
  ir_count_uses(c);
  if (mg_prepare(c, NULL, 0, d)) {
    mg_model_free(c);
    return NULL;
  }
  return c;
}

/* ------------------------------------------------------------------ samples */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A uniform double in (0, 1): 53 random bits, never 0 (Box-Muller takes its log). */
static double uniform01(uint64_t *state) { return ((double)(splitmix64(state) >> 11) + 0.5) / 9007199254740992.0; }

static double normal01(uint64_t *state) {
  const double u = uniform01(state), v = uniform01(state);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void prec_set_free(prec_set *s) {
  mg_free(s->lo), mg_free(s->hi);
  if (s->inputs) mg_arrays_free(s->inputs, s->n_samples * s->n_inputs);
  if (s->ref) mg_arrays_free(s->ref, s->n_samples * s->n_outputs);
  memset(s, 0, sizeof *s);
}

static int fill_random(mg_array *a, const mg_value *v, double scale, uint64_t *state, mg_diags *d) {
  a->dtype = v->dtype;
  a->rank = v->shape.rank;
  int64_t n = 1;
  for (int k = 0; k < a->rank; k++) {
    if (v->shape.d[k].v < 0) {
      mg_error(d, USAGE, NULL, NULL, "input '%s' has a symbolic dim ('%s'): give inputs of a fixed shape", v->name,
               v->shape.d[k].sym ? v->shape.d[k].sym : "?");
      return -1;
    }
    a->dims[k] = v->shape.d[k].v;
    n *= a->dims[k];
  }
  const size_t es = mg_dtype_size(v->dtype);
  if (!mg_dtype_is_float(v->dtype) && !mg_dtype_is_int(v->dtype)) {
    mg_error(d, UNSUPPORTED_DTYPE, NULL, NULL, "input '%s' is %s: seeded inputs are floats or ints", v->name,
             mg_dtype_name(v->dtype));
    return -1;
  }
  a->nbytes = (size_t)n * es;
  a->data = mg_malloc(a->nbytes ? a->nbytes : 1);
  a->name = mg_strdup(v->name);
  if (!a->data || !a->name) {
    mg_error(d, OOM, NULL, NULL, "out of memory for the seeded inputs");
    return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    const double x = normal01(state) * scale;
    unsigned char *p = (unsigned char *)a->data + (size_t)i * es;
    switch (v->dtype) {
    case MG_F32: { float f = (float)x; memcpy(p, &f, 4); break; }
    case MG_F64: memcpy(p, &x, 8); break;
    case MG_F16: { uint16_t h = mg_f32_to_f16((float)x); memcpy(p, &h, 2); break; }
    case MG_BF16: { uint16_t h = mg_f32_to_bf16((float)x); memcpy(p, &h, 2); break; }
    default: { /* ints: non-negative small values, valid as indices of length > 3 */
      const int64_t k = (int64_t)(splitmix64(state) % 4);
      memset(p, 0, es);
      memcpy(p, &k, es < 8 ? es : 8); /* little-endian: the low bytes */
      break;
    }
    }
  }
  return 0;
}

int prec_set_random(const mg_model *m, int n_samples, double scale, uint64_t seed, prec_set *s, mg_diags *d) {
  memset(s, 0, sizeof *s);
  const mg_graph *g = m->graph;
  s->n_inputs = g->n_inputs;
  s->inputs = mg_calloc((size_t)(n_samples * g->n_inputs) + 1, sizeof *s->inputs);
  if (!s->inputs) {
    mg_error(d, OOM, NULL, NULL, "out of memory for the seeded inputs");
    return -1;
  }
  s->n_samples = n_samples;
  uint64_t state = seed;
  for (int i = 0; i < n_samples * g->n_inputs; i++)
    if (fill_random(&s->inputs[i], g->inputs[i % g->n_inputs], scale, &state, d)) {
      prec_set_free(s);
      return -1;
    }
  return 0;
}

int prec_set_reference(mg_model *m, prec_set *s, mg_diags *d) {
  s->n_outputs = m->graph->n_outputs;
  s->ref = mg_calloc((size_t)(s->n_samples * s->n_outputs) + 1, sizeof *s->ref);
  if (!s->ref) {
    mg_error(d, OOM, NULL, NULL, "out of memory for the reference outputs");
    return -1;
  }
  for (int i = 0; i < s->n_samples; i++) {
    mg_array *outs = NULL;
    interp_options opt = {.seed = 0};
    if (interp_run(m, s->inputs + (size_t)i * s->n_inputs, s->n_inputs, &opt, &outs, d)) return -1;
    memcpy(s->ref + (size_t)i * s->n_outputs, outs, sizeof *outs * (size_t)s->n_outputs);
    mg_free(outs); /* the arrays' data moved into s->ref */
  }
  return 0;
}

typedef struct {
  const mg_graph *g;
  prec_set *s;
} calib_ctx;

static void widen(prec_set *s, int id, const mg_array *a) {
  if (id < 0 || id >= s->n_values || a->dtype != MG_F32) return;
  const float *x = a->data;
  const size_t n = a->nbytes / sizeof(float);
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) continue;
    if (x[i] < s->lo[id]) s->lo[id] = x[i];
    if (x[i] > s->hi[id]) s->hi[id] = x[i];
  }
}

/* interp_observer: the range of each float32 output of a top-graph node. */
static int observe_range(void *ctx, const mg_node *n, mg_rvalue *const *outs) {
  const calib_ctx *c = ctx;
  if (n->graph != c->g) return 0;
  for (int j = 0; j < n->n_out; j++)
    if (n->out[j] && outs[j] && outs[j]->kind == MG_RV_TENSOR) widen(c->s, n->out[j]->id, &outs[j]->t);
  return 0;
}

int prec_calibrate(mg_model *m, const prec_set *calib, prec_set *s, mg_diags *d) {
  const mg_graph *g = m->graph;
  mg_free(s->lo), mg_free(s->hi);
  s->n_values = g->n_values;
  s->lo = mg_malloc(sizeof(float) * (size_t)(g->n_values + 1));
  s->hi = mg_malloc(sizeof(float) * (size_t)(g->n_values + 1));
  if (!s->lo || !s->hi) {
    mg_error(d, OOM, NULL, NULL, "out of memory for the calibration ranges");
    return -1;
  }
  for (int i = 0; i < g->n_values; i++) s->lo[i] = INFINITY, s->hi[i] = -INFINITY;
  calib_ctx c = {g, s};
  for (int i = 0; i < calib->n_samples; i++) {
    const mg_array *in = calib->inputs + (size_t)i * calib->n_inputs;
    for (int k = 0; k < calib->n_inputs && k < g->n_inputs; k++) widen(s, g->inputs[k]->id, &in[k]);
    mg_array *outs = NULL;
    interp_options opt = {.observe = observe_range, .observe_ctx = &c};
    if (interp_run(m, in, calib->n_inputs, &opt, &outs, d)) return -1;
    mg_arrays_free(outs, g->n_outputs);
  }
  return 0;
}

/* ------------------------------------------------------------------ measures */

/* Folds the error of one output into e. */
static void add_error(const mg_array *got, const mg_array *ref, prec_error *e) {
  const int64_t n = (int64_t)(ref->nbytes / (mg_dtype_size(ref->dtype) ? mg_dtype_size(ref->dtype) : 1));
  if (!mg_dtype_is_float(ref->dtype) || got->nbytes != ref->nbytes) {
    if (got->nbytes != ref->nbytes || memcmp(got->data, ref->data, ref->nbytes)) e->max_rel = INFINITY;
    return;
  }
  double max_ref = 0, max_err = 0, dot = 0, gg = 0, rr = 0;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const double r = mg_load_f64(ref->dtype, (const char *)ref->data + (size_t)i * mg_dtype_size(ref->dtype));
    const double g = mg_load_f64(got->dtype, (const char *)got->data + (size_t)i * mg_dtype_size(got->dtype));
    if (!isfinite(g) && isfinite(r)) bad = 1;
    if (!isfinite(r)) continue;
    max_ref = fmax(max_ref, fabs(r));
    max_err = fmax(max_err, fabs(g - r));
    dot += g * r, gg += g * g, rr += r * r;
  }
  const double rel = bad ? INFINITY : max_ref > 0 ? max_err / max_ref : max_err;
  const double cosv = bad ? 0 : gg == 0 && rr == 0 ? 1 : gg == 0 || rr == 0 ? 0 : dot / sqrt(gg * rr);
  if (!(rel <= e->max_rel)) e->max_rel = isnan(rel) ? INFINITY : fmax(e->max_rel, rel);
  if (!(cosv >= e->min_cos)) e->min_cos = isnan(cosv) ? 0 : fmin(e->min_cos, cosv);
}

int prec_measure(const mg_model *m, const unsigned char *at_low, prec_kind p, const prec_set *s, prec_error *e,
                 mg_diags *d) {
  e->max_rel = 0, e->min_cos = 1;
  mg_model *c = prec_emulate(m, at_low, p, s, d);
  if (!c) return -1;
  int rc = 0;
  for (int i = 0; !rc && i < s->n_samples; i++) {
    mg_array *outs = NULL;
    interp_options opt = {.seed = 0};
    if (interp_run(c, s->inputs + (size_t)i * s->n_inputs, s->n_inputs, &opt, &outs, d)) {
      rc = -1;
      break;
    }
    for (int j = 0; j < s->n_outputs; j++) add_error(&outs[j], &s->ref[(size_t)i * s->n_outputs + j], e);
    mg_arrays_free(outs, s->n_outputs);
  }
  mg_model_free(c);
  return rc;
}

static int by_error(const void *a, const void *b) {
  const prec_layer *x = a, *y = b;
  if (x->err.max_rel != y->err.max_rel) return x->err.max_rel < y->err.max_rel ? 1 : -1;
  return (x->node > y->node) - (x->node < y->node);
}

int prec_profile(const mg_model *m, prec_kind p, const prec_set *s, prec_progress progress, void *ctx,
                 prec_layer **out, int *n, mg_diags *d) {
  const mg_graph *g = m->graph;
  *out = NULL, *n = 0;
  int total = 0;
  for (int i = 0; i < g->n_nodes; i++) total += prec_is_layer(g->nodes[i], p);
  prec_layer *layers = mg_malloc(sizeof *layers * (size_t)(total ? total : 1));
  unsigned char *at_low = mg_calloc((size_t)g->n_nodes + 1, 1);
  if (!layers || !at_low) {
    mg_free(layers), mg_free(at_low);
    mg_error(d, OOM, NULL, NULL, "out of memory for the precision profile");
    return -1;
  }
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (!prec_is_layer(g->nodes[i], p)) continue;
    at_low[i] = 1;
    layers[k].node = i;
    const int rc = prec_measure(m, at_low, p, s, &layers[k].err, d);
    at_low[i] = 0;
    if (rc) {
      mg_free(layers), mg_free(at_low);
      return -1;
    }
    k++;
    if (progress) progress(ctx, k, total);
  }
  mg_free(at_low);
  qsort(layers, (size_t)k, sizeof *layers, by_error);
  *out = layers, *n = k;
  return 0;
}

/* Every layer at p but the first `kept` of the profile: at_low (n_nodes entries) set
 * accordingly, then measured. */
static int measure_prefix(const mg_model *m, prec_kind p, const prec_set *s, const prec_layer *profile,
                          int n_profile, int kept, unsigned char *at_low, prec_error *e, mg_diags *d) {
  const mg_graph *g = m->graph;
  for (int i = 0; i < g->n_nodes; i++) at_low[i] = (unsigned char)prec_is_layer(g->nodes[i], p);
  for (int k = 0; k < kept && k < n_profile; k++) at_low[profile[k].node] = 0;
  return prec_measure(m, at_low, p, s, e, d);
}

int prec_measure_kept(const mg_model *m, prec_kind p, const prec_set *s, const prec_layer *profile, int n_profile,
                      int kept, prec_error *e, mg_diags *d) {
  unsigned char *at_low = mg_malloc((size_t)m->graph->n_nodes + 1);
  if (!at_low) {
    mg_error(d, OOM, NULL, NULL, "out of memory for the precision measure");
    return -1;
  }
  const int rc = measure_prefix(m, p, s, profile, n_profile, kept, at_low, e, d);
  mg_free(at_low);
  return rc;
}

int prec_budget(const mg_model *m, prec_kind p, const prec_set *s, const prec_layer *profile, int n_profile,
                double budget, unsigned char *keep, prec_error *all_low, prec_error *mixed, mg_diags *d) {
  const mg_graph *g = m->graph;
  unsigned char *at_low = mg_malloc((size_t)g->n_nodes + 1);
  int *order = mg_malloc(sizeof *order * (size_t)(n_profile + 1));
  if (!at_low || !order) {
    mg_free(at_low), mg_free(order);
    mg_error(d, OOM, NULL, NULL, "out of memory for the precision budget");
    return -1;
  }
  memset(keep, 0, (size_t)g->n_nodes);
  int rc = measure_prefix(m, p, s, profile, n_profile, 0, at_low, all_low, d), kept = 0;
  *mixed = *all_low;
  /* greedy, the layer that alone costs most back to float32 first: the shortest
   * prefix of the profile that meets the budget, found by bisection (the error
   * falls as the prefix grows; the whole profile kept is the float32 run itself,
   * error 0), so that a model of a hundred layers takes a handful of runs */
  int lo = 0, hi = n_profile; /* prefix lo misses the budget, prefix hi meets it */
  if (!rc && mixed->max_rel <= budget) hi = 0;
  while (!rc && hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    prec_error e;
    rc = measure_prefix(m, p, s, profile, n_profile, mid, at_low, &e, d);
    if (!rc && e.max_rel <= budget) hi = mid, *mixed = e;
    else lo = mid;
  }
  for (int i = 0; i < g->n_nodes; i++) at_low[i] = (unsigned char)prec_is_layer(g->nodes[i], p);
  for (int k = 0; !rc && k < hi; k++) {
    at_low[profile[k].node] = 0;
    keep[profile[k].node] = 1, order[kept++] = profile[k].node;
  }
  if (!rc && hi == n_profile && n_profile > 0) mixed->max_rel = 0, mixed->min_cos = 1;
  /* pruning: a layer kept early may be redundant once later ones are kept */
  for (int k = kept - 1; !rc && k >= 0; k--) {
    const int i = order[k];
    prec_error trial;
    at_low[i] = 1;
    rc = prec_measure(m, at_low, p, s, &trial, d);
    if (!rc && trial.max_rel <= budget) {
      keep[i] = 0;
      *mixed = trial;
    } else {
      at_low[i] = 0;
    }
  }
  mg_free(at_low), mg_free(order);
  if (rc) return -1;
  int n_kept = 0;
  for (int i = 0; i < g->n_nodes; i++) n_kept += keep[i];
  return n_kept;
}
