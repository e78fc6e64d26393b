/* Calibration for --precision int8 and quant.json (quant_calib.h). */
#include "quant_calib.h"

#include "arena.h"
#include "batch.h"
#include "export.h"
#include "interp.h"
#include "npy.h"
#include "outfile.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define QC_BINS 2048    /* TensorRT's entropy calibration histogram */
#define QC_QBINS 128    /* and its quantised bins */
#define QC_MAX_SAMPLES 100000

int qc_method_of(const char *name) {
  return !strcmp(name, "minmax") ? QC_MINMAX : !strcmp(name, "percentile") ? QC_PERCENTILE
                                           : !strcmp(name, "kl") ? QC_KL : -1;
}

const char *qc_method_name(qc_method m) {
  return m == QC_MINMAX ? "minmax" : m == QC_PERCENTILE ? "percentile" : "kl";
}

int qc_model_hash(const char *model, const char *weights, char hex[65]) {
  char two[130] = {0};
  if (batch_sha256_file(model, two)) return -1;
  if (weights && batch_sha256_file(weights, two + 64)) return -1;
  batch_sha256_hex(two, strlen(two), hex);
  return 0;
}

void qc_free(qc_params *q) {
  for (int i = 0; i < q->n_acts; i++) mg_free((void *)q->acts[i].name);
  mg_free(q->acts);
  mg_free(q->ranges);
  q->acts = NULL, q->ranges = NULL, q->n_acts = 0;
}

/* ---------------------------------------------------------------- statistics */

/* What one calibrated tensor has shown so far: exact extremes, and a histogram
 * of |x| over [0, range) that doubles its range (merging bin pairs) when a
 * sample exceeds it, as TensorRT's and PyTorch's histogram observers grow. */
typedef struct {
  const mg_value *v;
  double min, max, amax, range;
  double *hist;          /* QC_BINS, or NULL for min-max */
} qc_stat;

typedef struct {
  qc_stat *st;
  int n;
  int *of_value;         /* by value id: index in st, or -1 */
  int nv;
  int fail;
} qc_run;

static void grow(qc_stat *s, double amax) {
  if (s->range <= 0) {
    s->range = amax;
    return;
  }
  while (s->range < amax) {
    for (int b = 0; b < QC_BINS / 2; b++) s->hist[b] = s->hist[2 * b] + s->hist[2 * b + 1];
    memset(s->hist + QC_BINS / 2, 0, QC_BINS / 2 * sizeof *s->hist);
    s->range *= 2;
  }
}

static void observe_data(qc_stat *s, const float *x, size_t n) {
  double lo = s->min, hi = s->max, amax = 0;
  for (size_t i = 0; i < n; i++) {
    const double v = x[i];
    if (v < lo) lo = v;
    if (v > hi) hi = v;
    if (fabs(v) > amax) amax = fabs(v);
  }
  s->min = lo, s->max = hi;
  if (amax > s->amax) s->amax = amax;
  if (!s->hist || amax <= 0) {
    if (s->hist) s->hist[0] += (double)n;
    return;
  }
  grow(s, amax);
  const double per = QC_BINS / s->range;
  for (size_t i = 0; i < n; i++) {
    int b = (int)(fabs((double)x[i]) * per);
    s->hist[b < QC_BINS ? b : QC_BINS - 1] += 1;
  }
}

/* interp_observer: the outputs of node n that are calibrated tensors. */
static int observe(void *ctx, const mg_node *n, mg_rvalue *const *outs) {
  qc_run *r = ctx;
  for (int k = 0; k < n->n_out; k++) {
    const mg_value *v = n->out[k];
    if (!v || v->id < 0 || v->id >= r->nv || r->of_value[v->id] < 0 || !outs[k]) continue;
    if (outs[k]->kind != MG_RV_TENSOR || outs[k]->t.dtype != MG_F32) {
      r->fail = 1;
      return 1;
    }
    observe_data(&r->st[r->of_value[v->id]], outs[k]->t.data, outs[k]->t.nbytes / sizeof(float));
  }
  return 0;
}

/* The |x| below which `pct` percent of the samples lie (a bin's upper edge). */
static double percentile_threshold(const qc_stat *s, double pct) {
  double total = 0, cum = 0;
  for (int b = 0; b < QC_BINS; b++) total += s->hist[b];
  for (int b = 0; b < QC_BINS; b++) {
    cum += s->hist[b];
    if (cum >= pct / 100.0 * total) return fmin(s->amax, (b + 1) * s->range / QC_BINS);
  }
  return s->amax;
}

/* TensorRT's entropy calibration: for each candidate clipping bin i in
 * [QC_QBINS, QC_BINS), the reference distribution P is the histogram's first i
 * bins with the outliers added to the last; Q is those i bins merged into
 * QC_QBINS levels and expanded back over their non-empty bins. The threshold is
 * (i + 0.5) bin widths for the i with the least KL(P || Q). As NVIDIA's
 * pytorch-quantization does, bin 0 counts as bin 1 does: a ReLU's exact zeros
 * (half its outputs) would otherwise dominate both distributions and pull the
 * threshold far down. */
static double kl_threshold(const qc_stat *src) {
  double best = INFINITY, t = src->amax;
  double *p = mg_malloc(3 * QC_BINS * sizeof *p), *q = p ? p + QC_BINS : NULL;
  if (!p) return src->amax;
  qc_stat h = *src, *s = &h;
  h.hist = q + QC_BINS;
  memcpy(h.hist, src->hist, QC_BINS * sizeof *h.hist);
  h.hist[0] = h.hist[1];
  double outliers = 0;
  for (int b = QC_QBINS; b < QC_BINS; b++) outliers += s->hist[b];
  for (int i = QC_QBINS; i <= QC_BINS; i++) {
    if (i > QC_QBINS) outliers -= s->hist[i - 1];
    memcpy(p, s->hist, (size_t)i * sizeof *p);
    p[i - 1] += outliers;
    const double merged = (double)i / QC_QBINS;
    for (int j = 0; j < QC_QBINS; j++) {
      const int b0 = (int)(j * merged), b1 = j == QC_QBINS - 1 ? i : (int)((j + 1) * merged);
      double sum = 0;
      int nonzero = 0;
      for (int b = b0; b < b1; b++) sum += s->hist[b], nonzero += s->hist[b] != 0;
      for (int b = b0; b < b1; b++) q[b] = nonzero && s->hist[b] != 0 ? sum / nonzero : 0;
    }
    double sp = 0, sq = 0, kl = 0;
    for (int b = 0; b < i; b++) sp += p[b], sq += q[b];
    if (sp <= 0 || sq <= 0) continue;
    for (int b = 0; b < i; b++) {
      if (p[b] <= 0) continue;
      const double pb = p[b] / sp, qb = q[b] > 0 ? q[b] / sq : 1e-12;
      kl += pb * log(pb / qb);
    }
    if (kl < best) best = kl, t = (i + 0.5) * s->range / QC_BINS;
  }
  mg_free(p);
  return fmin(t, s->amax);
}

/* The u8 encoding of a tensor clipped at |x| <= t (quant.json's schema). */
static void encode(double min, double t, cg_q8_act *a) {
  a->zp = min >= 0 ? 0 : 128;
  a->scale = t > 0 ? (float)(t / (a->zp ? 127.0 : 255.0)) : 1.0f;
}

/* ---------------------------------------------------------------- samples */

/* Appends the samples array a holds for input in (one, or a stack along a
 * leading dim that in has as 1) to *s. 0, or -1 with a diagnostic. */
static int add_samples(const mg_value *in, mg_array *a, const char *what, mg_array **s, int *n, int *cap,
                       mg_diags *d) {
  const int r = in->shape.rank;
  int stack = 0;
  if (a->dtype != MG_F32) {
    mg_error(d, INVALID, what, NULL, "calibration sample is %s, the input '%s' is float32", mg_dtype_name(a->dtype),
             in->name);
    return -1;
  }
  if (a->rank != r) goto bad;
  for (int k = 0; k < r; k++) {
    const int64_t want = in->shape.d[k].v >= 0 ? in->shape.d[k].v : 1;
    if (a->dims[k] == want) continue;
    if (k == 0 && want == 1) {
      stack = 1;
      continue;
    }
    goto bad;
  }
  {
    const int64_t count = stack ? a->dims[0] : 1;
    const size_t each = a->nbytes / (size_t)(count ? count : 1);
    for (int64_t i = 0; i < count; i++) {
      if (*n >= QC_MAX_SAMPLES) {
        mg_error(d, LIMIT, what, NULL, "more than %d calibration samples", QC_MAX_SAMPLES);
        return -1;
      }
      if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        mg_array *g = mg_realloc(*s, (size_t)nc * sizeof *g);
        if (!g) return mg_error(d, OOM, NULL, NULL, "out of memory reading calibration samples"), -1;
        *s = g, *cap = nc;
      }
      mg_array *o = &(*s)[(*n)++];
      memset(o, 0, sizeof *o);
      o->dtype = MG_F32, o->rank = r, o->nbytes = each;
      for (int k = 0; k < r; k++) o->dims[k] = a->dims[k];
      if (stack) o->dims[0] = 1;
      o->name = mg_malloc(strlen(in->name) + 1);
      o->data = mg_malloc(each ? each : 1);
      if (!o->name || !o->data) return mg_error(d, OOM, NULL, NULL, "out of memory reading calibration samples"), -1;
      strcpy(o->name, in->name);
      memcpy(o->data, (const char *)a->data + (size_t)i * each, each);
    }
  }
  return 0;
bad:;
  char got[128] = "", want[128];
  for (int k = 0, o = 0; k < a->rank && o < 100; k++) o += snprintf(got + o, sizeof got - o, k ? "x%lld" : "%lld", (long long)a->dims[k]);
  mg_error(d, SHAPE, what, NULL, "calibration sample has shape [%s], the input '%s' is %s", got, in->name,
           mg_shape_str(&in->shape, want, sizeof want));
  return -1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every sample under path (a folder of .npy files, sorted by name, or one .npz). */
static int read_samples(const mg_value *in, const char *path, mg_array **s, int *n, mg_diags *d) {
  struct stat sb;
  int cap = 0, rc = 0;
  *s = NULL, *n = 0;
  if (stat(path, &sb)) return mg_error(d, IO, path, NULL, "--calibrate: no such file or folder"), -1;
  if (!S_ISDIR(sb.st_mode)) {
    mg_array *arr = NULL;
    int count = 0;
    if (npz_read_file(path, &arr, &count, d)) return -1;
    for (int i = 0; !rc && i < count; i++) rc = add_samples(in, &arr[i], path, s, n, &cap, d);
    mg_arrays_free(arr, count);
  } else {
    DIR *dp = opendir(path);
    if (!dp) return mg_error(d, IO, path, NULL, "--calibrate: cannot read the folder"), -1;
    char **names = NULL;
    int nn = 0, ncap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
      size_t l = strlen(e->d_name);
      if (l < 5 || strcmp(e->d_name + l - 4, ".npy")) continue;
      if (nn == ncap) {
        ncap = ncap ? 2 * ncap : 64;
        char **g = mg_realloc(names, (size_t)ncap * sizeof *g);
        if (!g) break;
        names = g;
      }
      if (!(names[nn] = mg_malloc(strlen(path) + l + 2))) break;
      sprintf(names[nn++], "%s/%s", path, e->d_name);
    }
    closedir(dp);
    if (names) qsort(names, (size_t)nn, sizeof *names, by_name);
    for (int i = 0; !rc && i < nn; i++) {
      mg_array a;
      if (npy_read_file(names[i], &a, d)) {
        rc = -1;
        break;
      }
      rc = add_samples(in, &a, names[i], s, n, &cap, d);
      mg_array_free(&a);
    }
    for (int i = 0; i < nn; i++) mg_free(names[i]);
    mg_free(names);
  }
  if (!rc && !*n) {
    mg_error(d, INVALID, path, NULL, "--calibrate: no calibration samples (a folder of .npy files, or an .npz)");
    rc = -1;
  }
  return rc;
}

/* ---------------------------------------------------------------- calibrate */

int qc_calibrate(mg_model *m, const char *path, qc_method method, double percentile, qc_params *q, mg_diags *d) {
  mg_graph *g = m->graph;
  qc_run r = {0};
  mg_array *samples = NULL;
  int ns = 0, rc = -1;
  q->method = method, q->percentile = percentile;
  if (g->n_inputs != 1) {
    mg_error(d, UNSUPPORTED, NULL, NULL, "--calibrate: the model has %d inputs (one is supported)", g->n_inputs);
    return -1;
  }
  if (read_samples(g->inputs[0], path, &samples, &ns, d)) goto out;
  r.nv = g->n_values + 1;
  r.of_value = mg_malloc((size_t)r.nv * sizeof *r.of_value);
  r.st = mg_calloc((size_t)g->n_nodes + 1, sizeof *r.st);
  if (!r.of_value || !r.st) goto oom;
  for (int i = 0; i < r.nv; i++) r.of_value[i] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    const mg_value *x = n->n_in ? n->in[0] : NULL;
    if (n->op != MG_OP_Conv || !x || x->id < 0 || x->id >= r.nv || r.of_value[x->id] >= 0) continue;
    if (x->dtype != MG_F32) continue;
    qc_stat *s = &r.st[r.n];
    s->v = x, s->min = INFINITY, s->max = -INFINITY;
    if (method != QC_MINMAX && !(s->hist = mg_calloc(QC_BINS, sizeof *s->hist))) goto oom;
    r.of_value[x->id] = r.n++;
  }
  interp_options io = {.observe = observe, .observe_ctx = &r};
  const int in_stat = g->inputs[0]->id >= 0 && g->inputs[0]->id < r.nv ? r.of_value[g->inputs[0]->id] : -1;
  for (int i = 0; i < ns; i++) {
    mg_array *outs = NULL;
    if (in_stat >= 0) observe_data(&r.st[in_stat], samples[i].data, samples[i].nbytes / sizeof(float));
    if (interp_run(m, &samples[i], 1, &io, &outs, d) || r.fail) {
      mg_error(d, INVALID, path, NULL, "--calibrate: the float32 model failed on sample %d", i);
      goto out;
    }
    mg_arrays_free(outs, g->n_outputs);
  }
  q->samples = ns;
  q->acts = mg_calloc((size_t)r.n + 1, sizeof *q->acts);
  q->ranges = mg_calloc((size_t)r.n + 1, sizeof *q->ranges);
  if (!q->acts || !q->ranges) goto oom;
  for (int i = 0; i < r.n; i++) {
    qc_stat *s = &r.st[i];
    const double t = method == QC_MINMAX ? s->amax : method == QC_PERCENTILE ? percentile_threshold(s, percentile)
                                                                               : kl_threshold(s);
    char *name = mg_malloc(strlen(s->v->name) + 1);
    if (!name) goto oom;
    strcpy(name, s->v->name);
    q->acts[i].name = name;
    encode(s->min, t, &q->acts[i]);
    q->ranges[i] = (qc_range){s->min, s->max, t};
    q->n_acts = i + 1;
  }
  rc = 0;
  goto out;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory calibrating");
out:
  for (int i = 0; r.st && i < r.n; i++) mg_free(r.st[i].hist);
  mg_free(r.st);
  mg_free(r.of_value);
  mg_arrays_free(samples, ns);
  return rc;
}

/* ---------------------------------------------------------------- quant.json */

int qc_write(const char *path, const char *model, const qc_params *q, const cg_quant *layers, mg_diags *d) {
  json_t *acts = json_object(), *ws = json_object();
  for (int i = 0; i < q->n_acts; i++)
    json_object_set_new(acts, q->acts[i].name,
                        json_pack("{s:f,s:i,s:f,s:f,s:f}", "scale", (double)q->acts[i].scale, "zero_point",
                                  q->acts[i].zp, "min", q->ranges[i].min, "max", q->ranges[i].max, "threshold",
                                  q->ranges[i].threshold));
  for (int i = 0; layers && i < layers->n_layers; i++) {
    const cg_q8_layer *l = &layers->layers[i];
    if (!l->int8) continue;
    json_t *s = json_array();
    for (int k = 0; k < l->n_w_scale; k++) json_array_append_new(s, json_real(l->w_scale[k]));
    json_object_set_new(ws, l->node, json_pack("{s:s,s:i,s:b,s:o}", "op", l->op, "axis", 0, "symmetric", 1, "scales", s));
  }
  json_t *j = json_pack("{s:i,s:s,s:s,s:s,s:i,s:{s:s,s:s},s:o,s:{s:s},s:o}", "migc_quant", 1, "model", model,
                        "model_hash", q->model_hash, "method", qc_method_name(q->method), "samples", q->samples,
                        "activation_encoding", "type", "u8",
                        "rule", "x = scale * (q - zero_point); zero_point 0 (q in 0..255) for a tensor never "
                                "negative in calibration, 128 (q in 1..255) otherwise",
                        "activations", acts, "weight_encoding", "rule",
                        "int8 symmetric per output channel (axis 0): w = scale[c] * q, q in -127..127; "
                        "after BatchNorm folding",
                        "weights", ws);
  if (q->method == QC_PERCENTILE) json_object_set_new(j, "percentile", json_real(q->percentile));
  int rc = wt_write_json(path, j, JSON_INDENT(1) | JSON_PRESERVE_ORDER, d);
  json_decref(j);
  return rc;
}

int qc_read(const char *path, const char *model_hash, qc_params *q, mg_diags *d) {
  json_error_t e;
  json_t *j = json_load_file(path, 0, &e), *acts, *v;
  const char *name, *hash, *method;
  int rc = -1;
  memset(q, 0, sizeof *q);
  if (!j) return mg_error(d, MALFORMED, path, NULL, "--quant-params: %s (line %d)", e.text, e.line), -1;
  if (json_unpack(j, "{s:i,s:s,s:s,s:i,s:o}", "migc_quant", &rc, "model_hash", &hash, "method", &method, "samples",
                  &q->samples, "activations", &acts) || rc != 1 || !json_is_object(acts) || qc_method_of(method) < 0) {
    mg_error(d, INVALID, path, NULL, "--quant-params: not a migc quant.json (version 1)");
    rc = -1;
    goto out;
  }
  rc = -1;
  if (strcmp(hash, model_hash)) {
    mg_error(d, INVALID, path, NULL, "--quant-params: made for another model or weights (model_hash %.12s..., this "
             "model %.12s...): calibrate again", hash, model_hash);
    goto out;
  }
  snprintf(q->model_hash, sizeof q->model_hash, "%s", hash);
  q->method = (qc_method)qc_method_of(method);
  json_t *pc = json_object_get(j, "percentile");
  q->percentile = pc ? json_number_value(pc) : 0;
  size_t n = json_object_size(acts);
  q->acts = mg_calloc(n + 1, sizeof *q->acts);
  q->ranges = mg_calloc(n + 1, sizeof *q->ranges);
  if (!q->acts || !q->ranges) goto oom;
  json_object_foreach(acts, name, v) {
    double scale, mn = 0, mx = 0, t = 0;
    int zp;
    if (json_unpack(v, "{s:F,s:i,s?F,s?F,s?F}", "scale", &scale, "zero_point", &zp, "min", &mn, "max", &mx,
                    "threshold", &t) || !(scale > 0) || !isfinite(scale) || (zp != 0 && zp != 128)) {
      mg_error(d, INVALID, path, NULL, "--quant-params: activation '%s' needs a positive scale and zero_point 0 or "
               "128", name);
      goto out;
    }
    char *nm = mg_malloc(strlen(name) + 1);
    if (!nm) goto oom;
    strcpy(nm, name);
    q->acts[q->n_acts] = (cg_q8_act){nm, (float)scale, zp};
    q->ranges[q->n_acts++] = (qc_range){mn, mx, t};
  }
  rc = 0;
  goto out;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory reading %s", path);
out:
  json_decref(j);
  if (rc) qc_free(q);
  return rc;
}

json_t *qc_layers_json(const cg_quant *q) {
  json_t *i8 = json_array(), *f32 = json_array();
  for (int i = 0; i < q->n_layers; i++) {
    const cg_q8_layer *l = &q->layers[i];
    if (l->int8) json_array_append_new(i8, json_pack("{s:s,s:s}", "node", l->node, "op", l->op));
    else json_array_append_new(f32, json_pack("{s:s,s:s,s:s}", "node", l->node, "op", l->op, "why", l->why));
  }
  return json_pack("{s:o,s:o,s:s}", "int8_layers", i8, "float32_layers", f32, "other_ops",
                   "every other node computes float32 on the dequantised outputs");
}

const char *qc_lite_method(qc_method m) {
  return m == QC_MINMAX ? "MAX_MIN" : m == QC_KL ? "KL" : "REMOVAL_OUTLIER";
}

int qc_write_lite_samples(mg_model *m, const char *path, const char *dir, int *count, mg_diags *d) {
  mg_array *s = NULL;
  int n = 0, rc = 0;
  if (m->graph->n_inputs != 1) return mg_error(d, UNSUPPORTED, NULL, NULL, "int8 calibration needs one input"), -1;
  if (read_samples(m->graph->inputs[0], path, &s, &n, d)) return -1;
  if (mkdir(dir, 0777) && errno != EEXIST) rc = (mg_error(d, IO, dir, NULL, "cannot create the folder"), -1);
  for (int i = 0; !rc && i < n; i++) {
    char file[4096];
    mg_out_file o;
    snprintf(file, sizeof file, "%s/sample_%05d.bin", dir, i);
    if (mg_out_fopen(&o, file, d)) {
      rc = -1;
      break;
    }
    const float *x = s[i].data;
    size_t ok = 1;
    if (s[i].rank == 4) { /* NCHW to NHWC */
      const int64_t N = s[i].dims[0], C = s[i].dims[1], H = s[i].dims[2], W = s[i].dims[3];
      for (int64_t a = 0; a < N && ok; a++)
        for (int64_t h = 0; h < H && ok; h++)
          for (int64_t w = 0; w < W && ok; w++)
            for (int64_t c = 0; c < C && ok; c++) ok = fwrite(&x[((a * C + c) * H + h) * W + w], 4, 1, o.f) == 1;
    } else {
      ok = fwrite(x, 1, s[i].nbytes, o.f) == s[i].nbytes;
    }
    if (!ok) {
      mg_error(d, IO, file, NULL, "cannot write");
      mg_out_abort(&o);
      rc = -1;
    } else if (mg_out_commit(&o, d)) {
      rc = -1;
    }
  }
  *count = n;
  mg_arrays_free(s, n);
  return rc;
}
