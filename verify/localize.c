/* Localisation of the first diverging node (see localize.h). */
#include "localize.h"
#include "arena.h"
#include "weights.h"
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* True when a value diverges from its reference (the test of localize.h): its
 * relative norm error exceeds both the floor and PARITY_LAYER_GROWTH times the
 * error its inputs carried in (`carried`), or its cosine or NaN/Inf disagree. */
static int diverges(const parity_metrics *m, const parity_tol *tol, double carried) {
  double floor = tol->max_rel_norm >= 0 ? tol->max_rel_norm : PARITY_LAYER_REL_NORM;
  double bound = fmax(floor, PARITY_LAYER_GROWTH * carried);
  return m->n_nonfinite || m->rel_norm > bound || (tol->min_cosine >= 0 && m->cosine < tol->min_cosine);
}

/* The error the run-time inputs of n carry in: the largest estimate over them.
 * est[] holds, per value of g, its measured relative norm error when it was
 * compared, else the largest over its producer's inputs (graph inputs are exact,
 * parameters are not the localisation's concern). */
static double carried_error(const mg_graph *g, const mg_node *n, const double *est) {
  double e = 0;
  for (int j = 0; j < n->n_in; j++) {
    const mg_value *v = n->in[j];
    if (v && v->producer && v->producer->graph == g && v->id >= 0 && v->id < g->n_values) e = fmax(e, est[v->id]);
  }
  return e;
}

/* Records the estimate of every output of n (see carried_error). */
static void carry_forward(const mg_node *n, double *est, double carried) {
  for (int i = 0; i < n->n_out; i++)
    if (n->out[i] && n->out[i]->id >= 0) est[n->out[i]->id] = carried;
}

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

/* Compares initializer v with the tensor of the same name in w (the .pth). */
static int compare_param(const mg_value *v, const wt_source *w, loc_input *in, mg_diags *d) {
  const wt_tensor *t = w ? wt_find(w, v->name) : NULL;
  if (!t || !v->data || !mg_dtype_size(t->dtype) || !mg_dtype_size(v->dtype)) return 0;
  int64_t n = wt_numel(t);
  if ((size_t)n * mg_dtype_size(v->dtype) != v->nbytes) return 0;
  mg_array got = {.dtype = v->dtype, .rank = 1, .dims = {n}, .data = (void *)v->data, .nbytes = v->nbytes};
  mg_array ref = {.dtype = t->dtype, .rank = 1, .dims = {n}, .nbytes = (size_t)n * mg_dtype_size(t->dtype)};
  ref.data = mg_malloc(ref.nbytes ? ref.nbytes : 1);
  if (!ref.data) return 0;
  parity_tol tol = parity_default_forward();
  int ok = !wt_read(w, t, 0, n, ref.data, d) && !parity_compare(&got, &ref, &tol, &in->m, v->name, d);
  mg_free(ref.data);
  if (ok) in->known = 1, copy_str(in->source, sizeof in->source, "weights");
  return ok;
}

/* ---- against torch module outputs ---- */

typedef struct {
  mg_model *m;
  const mg_array *inputs;
  int n_inputs;
  const mg_array *refs;
  int n_refs;
  const wt_source *weights;
  const parity_tol *tol;
  loc_result *r;
  mg_diags *d;
  char (*node_module)[LOC_NAME]; /* per top-level node: its module path */
  int *end;                      /* per ref: index of the node producing it, -1 none */
  parity_metrics *vm;            /* per top-level value: comparison made */
  int *vm_ref;                   /* per top-level value: the ref it was compared with, -1 none */
  double *est;                   /* per top-level value: estimated error (carried_error) */
} torch_ctx;

/* The key a "modules/<key>" reference names ("layer1.0.relu@1" for a module's
 * second call), or NULL for other members and for tuple leaves ("#i"), which no
 * single node output stands for. */
static const char *module_of_ref(const mg_array *a) {
  return a->name && !strncmp(a->name, "modules/", 8) && !strchr(a->name, '#') ? a->name + 8 : NULL;
}

/* Whether some module's path (call suffixes "@k" ignored) is `path` or below it. */
static int ref_known(const torch_ctx *c, const char *path) {
  size_t n = strlen(path);
  for (int k = 0; k < c->n_refs; k++) {
    const char *mp = module_of_ref(&c->refs[k]);
    if (!mp) continue;
    char plain[LOC_NAME];
    size_t j = 0;
    for (const char *q = mp; *q && j + 1 < sizeof plain; q++) {
      if (*q == '@')
        while (q[1] && q[1] != '.') q++;
      else plain[j++] = *q;
    }
    plain[j] = 0;
    if (!strncmp(plain, path, n) && (plain[n] == 0 || plain[n] == '.')) return 1;
  }
  return 0;
}

/* The module key of a node. torch names the scope of a module's second call
 * "relu_1" where the forward hooks keyed it "relu@1": a "_N" suffix becomes "@N"
 * when only the bare name is a module. */
static void canonical_path(const torch_ctx *c, const char *node_name, char *out, size_t n) {
  char raw[LOC_NAME], plain[LOC_NAME] = "";
  mg_scope_module(node_name, raw, sizeof raw);
  out[0] = 0;
  for (char *save, *comp = strtok_r(raw, ".", &save); comp; comp = strtok_r(NULL, ".", &save)) {
    char cand[LOC_NAME], key[LOC_NAME];
    /* a path longer than LOC_NAME keeps its leading components */
    if (snprintf(cand, sizeof cand, "%s%s%s", plain, plain[0] ? "." : "", comp) >= (int)sizeof cand ||
        snprintf(key, sizeof key, "%s%s%s", out, out[0] ? "." : "", comp) >= (int)sizeof key)
      break;
    if (!ref_known(c, cand)) {
      char *us = strrchr(comp, '_');
      int digits = us && us[1];
      for (char *q = us ? us + 1 : NULL; q && *q; q++) digits &= isdigit((unsigned char)*q) != 0;
      if (digits) {
        *us = 0;
        if (snprintf(cand, sizeof cand, "%s%s%s", plain, plain[0] ? "." : "", comp) >= (int)sizeof cand ||
            snprintf(key, sizeof key, "%s%s%s@%s", out, out[0] ? "." : "", comp, us + 1) >= (int)sizeof key)
          break;
      }
    }
    copy_str(plain, sizeof plain, cand);
    copy_str(out, n, key);
  }
}

static int in_scope(const char *node_module, const char *module) {
  size_t n = strlen(module);
  return !strncmp(node_module, module, n) && (node_module[n] == 0 || node_module[n] == '.');
}

/* Adds v to r->inputs (once), with its agreement when something to compare with
 * is known. */
static void add_input(torch_ctx *c, const mg_value *v) {
  loc_result *r = c->r;
  for (int k = 0; k < r->n_inputs; k++)
    if (!strcmp(r->inputs[k].name, v->name)) return;
  if (r->n_inputs >= LOC_MAX_INPUTS) return;
  loc_input *in = &r->inputs[r->n_inputs++];
  memset(in, 0, sizeof *in);
  copy_str(in->name, sizeof in->name, v->name);
  mg_graph *g = c->m->graph;
  if (v->kind == MG_V_INPUT) {
    for (int k = 0; k < c->n_inputs; k++)
      if (c->inputs[k].name && !strcmp(c->inputs[k].name, v->name)) {
        parity_tol t = parity_default_forward();
        if (!parity_compare(&c->inputs[k], &c->inputs[k], &t, &in->m, v->name, c->d))
          in->known = 1, copy_str(in->source, sizeof in->source, "graph input");
      }
  } else if (v->kind == MG_V_INIT) {
    compare_param(v, c->weights, in, c->d);
  } else if (v->producer && v->producer->graph == g && v->id >= 0 && v->id < g->n_values && c->vm_ref[v->id] >= 0) {
    in->m = c->vm[v->id];
    in->known = 1;
    copy_str(in->source, sizeof in->source, "torch module");
    copy_str(in->module, sizeof in->module, module_of_ref(&c->refs[c->vm_ref[v->id]]));
  }
}

/* Fills r->inputs with the values flowing into `module` from outside it
 * (constants aside): what the module computed from. */
static void module_inputs(torch_ctx *c, const char *module) {
  mg_graph *g = c->m->graph;
  for (int i = 0; i < g->n_nodes; i++) {
    if (!in_scope(c->node_module[i], module)) continue;
    const mg_node *n = g->nodes[i];
    for (int j = 0; j < n->n_in; j++) {
      const mg_value *v = n->in[j];
      if (!v || v->kind == MG_V_CONST) continue;
      if (v->producer && v->producer->graph == g && in_scope(c->node_module[v->producer->id], module)) continue;
      add_input(c, v);
    }
  }
}

/* Whether n reads an initializer torch's exporter made by constant folding
 * ("onnx::Conv_46": a BatchNorm folded into a Conv): its output is then no longer
 * the module's own, so comparing it would blame a correct node. */
static int reads_folded_constant(const mg_node *n) {
  for (int j = 0; j < n->n_in; j++)
    if (n->in[j] && n->in[j]->kind == MG_V_INIT && !strncmp(n->in[j]->name, "onnx::", 6)) return 1;
  return 0;
}

static int float_tensor(const mg_rvalue *v) {
  return v && v->kind == MG_RV_TENSOR && mg_dtype_is_float(v->t.dtype);
}

static int64_t numel(const mg_array *a) {
  int64_t n = 1;
  for (int i = 0; i < a->rank; i++) n *= a->dims[i];
  return n;
}

/* Records a comparison of `name` (error err, carried in: carried) for the summary
 * of accumulated error. */
static void note_growth(loc_result *r, const char *name, double err, double carried) {
  if (r->compared == 1) copy_str(r->first, sizeof r->first, name), r->first_err = err;
  double growth = err / fmax(carried, 1e-12);
  if (carried > 0 && growth > r->growth)
    r->growth = growth, r->grew_err = err, r->grew_carried = carried, copy_str(r->grew, sizeof r->grew, name);
}

static int torch_observe(void *ctx, const mg_node *n, mg_rvalue *const *outs) {
  torch_ctx *c = ctx;
  mg_graph *g = c->m->graph;
  if (n->graph != g) return 0;
  double carried = carried_error(g, n, c->est);
  carry_forward(n, c->est, carried);
  if (!n->n_out || !n->out[0] || !float_tensor(outs[0])) return 0;
  const mg_array *got = &outs[0]->t;
  /* deepest module first: a parent ending at the same node names less */
  int best = -1;
  for (;;) {
    int pick = -1;
    for (int k = 0; k < c->n_refs; k++) {
      if (c->end[k] != n->id) continue;
      if (best >= 0 && strlen(module_of_ref(&c->refs[k])) >= strlen(module_of_ref(&c->refs[best]))) continue;
      if (pick < 0 || strlen(module_of_ref(&c->refs[k])) > strlen(module_of_ref(&c->refs[pick]))) pick = k;
    }
    if (pick < 0) return 0;
    best = pick;
    const mg_array *ref = &c->refs[pick];
    if (numel(ref) != numel(got)) continue; /* not this node's output after all */
    parity_metrics m;
    if (parity_compare(got, ref, c->tol, &m, n->name, c->d)) return 0;
    c->r->compared++;
    if (c->r->compared == 1 || m.rel_norm > c->r->worst_m.rel_norm)
      c->r->worst_m = m, copy_str(c->r->worst, sizeof c->r->worst, module_of_ref(ref));
    note_growth(c->r, module_of_ref(ref), m.rel_norm, carried);
    int id = n->out[0]->id;
    if (c->vm_ref[id] < 0) c->vm[id] = m, c->vm_ref[id] = pick, c->est[id] = m.rel_norm;
    if (!diverges(&m, c->tol, carried)) continue;
    loc_result *r = c->r;
    r->found = 1;
    r->m = m;
    copy_str(r->node, sizeof r->node, n->name);
    copy_str(r->op, sizeof r->op, n->op_type);
    copy_str(r->value, sizeof r->value, n->out[0]->name);
    copy_str(r->module, sizeof r->module, module_of_ref(ref));
    module_inputs(c, r->module);
    return 1;
  }
}

int loc_against_torch(mg_model *m, const mg_array *inputs, int n_inputs, const mg_array *refs, int n_refs,
                      const wt_source *weights, const parity_tol *tol, loc_result *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  mg_graph *g = m->graph;
  torch_ctx c = {m, inputs, n_inputs, refs, n_refs, weights, tol, r, d, NULL, NULL, NULL, NULL, NULL};
  c.node_module = mg_calloc((size_t)g->n_nodes + 1, sizeof *c.node_module);
  c.end = mg_calloc((size_t)n_refs + 1, sizeof *c.end);
  c.vm = mg_calloc((size_t)g->n_values + 1, sizeof *c.vm);
  c.vm_ref = mg_calloc((size_t)g->n_values + 1, sizeof *c.vm_ref);
  c.est = mg_calloc((size_t)g->n_values + 1, sizeof *c.est);
  int rc = -1;
  if (!c.node_module || !c.end || !c.vm || !c.vm_ref || !c.est) {
    mg_error(d, OOM, NULL, NULL, "no memory for localisation");
    goto done;
  }
  for (int v = 0; v < g->n_values; v++) c.vm_ref[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) canonical_path(&c, g->nodes[i]->name, c.node_module[i], LOC_NAME);
  for (int k = 0; k < n_refs; k++) {
    c.end[k] = -1;
    const char *mp = module_of_ref(&refs[k]);
    if (!mp) continue;
    for (int i = 0; i < g->n_nodes; i++)
      if (in_scope(c.node_module[i], mp)) c.end[k] = i;
    if (c.end[k] >= 0 && reads_folded_constant(g->nodes[c.end[k]])) c.end[k] = -1;
  }
  interp_options opt = {.observe = torch_observe, .observe_ctx = &c};
  mg_array *outs = NULL;
  size_t errors = d->errors;
  int irc = interp_run(m, inputs, n_inputs, &opt, &outs, d);
  if (outs) mg_arrays_free(outs, g->n_outputs);
  rc = irc && !r->found && d->errors > errors ? -1 : 0;
done:
  mg_free(c.node_module);
  mg_free(c.end);
  mg_free(c.vm);
  mg_free(c.vm_ref);
  mg_free(c.est);
  return rc;
}

/* ---- against a runner's trace ---- */

typedef struct {
  mg_model *m;
  const char *dir;
  const parity_tol *tol;
  loc_result *r;
  mg_diags *d;
  parity_metrics *vm;
  int *vm_known;
  double *est;
} trace_ctx;

/* The trace file name of a value: the rule of cli_safe_name and the generated
 * runner ('/', '\\', ':' and control characters become '_'). */
static void trace_path(const char *dir, const char *value, char *out, size_t n) {
  char safe[LOC_NAME];
  size_t k = 0;
  for (const char *p = value; *p && k + 1 < sizeof safe; p++)
    safe[k++] = (*p == '/' || *p == '\\' || *p == ':' || (unsigned char)*p < 32) ? '_' : *p;
  safe[k] = 0;
  if (!k || !strcmp(safe, ".") || !strcmp(safe, "..")) snprintf(safe, sizeof safe, "output");
  snprintf(out, n, "%s/%s.npy", dir, safe);
}

static int trace_observe(void *ctx, const mg_node *n, mg_rvalue *const *outs) {
  trace_ctx *c = ctx;
  mg_graph *g = c->m->graph;
  if (n->graph != g) return 0;
  double carried = carried_error(g, n, c->est);
  carry_forward(n, c->est, carried);
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i] || !float_tensor(outs[i])) continue;
    char path[PATH_MAX];
    trace_path(c->dir, n->out[i]->name, path, sizeof path);
    if (access(path, R_OK)) continue; /* fused away or a view: not traced */
    mg_array traced;
    mg_diags quiet;
    mg_diags_init(&quiet);
    int bad = npy_read_file(path, &traced, &quiet);
    mg_diags_free(&quiet);
    if (bad) continue;
    parity_metrics m;
    int cmp = parity_compare(&traced, &outs[i]->t, c->tol, &m, n->name, c->d);
    mg_array_free(&traced);
    if (cmp) continue;
    c->r->compared++;
    if (c->r->compared == 1 || m.rel_norm > c->r->worst_m.rel_norm)
      c->r->worst_m = m, copy_str(c->r->worst, sizeof c->r->worst, n->out[i]->name);
    note_growth(c->r, n->out[i]->name, m.rel_norm, carried);
    c->vm[n->out[i]->id] = m;
    c->vm_known[n->out[i]->id] = 1;
    c->est[n->out[i]->id] = m.rel_norm;
    if (!diverges(&m, c->tol, carried)) continue;
    loc_result *r = c->r;
    r->found = 1;
    r->m = m;
    copy_str(r->node, sizeof r->node, n->name);
    copy_str(r->op, sizeof r->op, n->op_type);
    copy_str(r->value, sizeof r->value, n->out[i]->name);
    mg_scope_module(n->name, r->module, sizeof r->module);
    for (int j = 0; j < n->n_in && r->n_inputs < LOC_MAX_INPUTS; j++) {
      const mg_value *v = n->in[j];
      if (!v) continue;
      loc_input *in = &r->inputs[r->n_inputs++];
      memset(in, 0, sizeof *in);
      copy_str(in->name, sizeof in->name, v->name);
      if (v->kind == MG_V_INPUT) in->known = 1, in->m.cosine = 1, copy_str(in->source, sizeof in->source, "graph input");
      else if (v->producer && v->producer->graph == g && c->vm_known[v->id]) {
        in->m = c->vm[v->id];
        in->known = 1;
        copy_str(in->source, sizeof in->source, "trace");
      } else
        copy_str(in->source, sizeof in->source, v->kind == MG_V_NODE   ? "not traced (fused or a view)"
                                                : v->kind == MG_V_INIT ? "parameter (not traced)"
                                                                       : "constant");
      if (v->producer) mg_scope_module(v->producer->name, in->module, sizeof in->module);
    }
    return 1;
  }
  return 0;
}

int loc_against_trace(mg_model *m, const mg_array *inputs, int n_inputs, const char *trace_dir,
                      const parity_tol *tol, loc_result *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  mg_graph *g = m->graph;
  trace_ctx c = {m, trace_dir, tol, r, d, mg_calloc((size_t)g->n_values + 1, sizeof(parity_metrics)),
                 mg_calloc((size_t)g->n_values + 1, sizeof(int)), mg_calloc((size_t)g->n_values + 1, sizeof(double))};
  int rc = -1;
  if (!c.vm || !c.vm_known || !c.est) {
    mg_error(d, OOM, NULL, NULL, "no memory for localisation");
  } else {
    interp_options opt = {.observe = trace_observe, .observe_ctx = &c};
    mg_array *outs = NULL;
    size_t errors = d->errors;
    int irc = interp_run(m, inputs, n_inputs, &opt, &outs, d);
    if (outs) mg_arrays_free(outs, g->n_outputs);
    rc = irc && !r->found && d->errors > errors ? -1 : 0;
  }
  mg_free(c.vm);
  mg_free(c.vm_known);
  mg_free(c.est);
  return rc;
}
