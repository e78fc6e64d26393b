/* The coverage analysis (contracts in coverage.h). The rule-driven targets are
 * mapped by map_node(); the CPU target's statuses are what its emitter said. */
#include "coverage.h"
#include "onnx_import.h"
#include "passes.h"
#include <stdio.h>
#include <string.h>

/* How the MindSpore emitter words a node it gave an ops.Custom kernel (emit_custom.c). */
#define CUSTOM_PREFIX "custom-op (cpu kernel): "
#define HOST_PREFIX "host-fallback (cpu kernel): "

static int rank_of(map_status s) {
  /* worse statuses rank higher; an op takes the worst of its nodes. A custom op
   * or a host fallback runs, so it ranks below every status that does not */
  static const int r[MAP_STATUS_COUNT] = {0, 1, 6, 5, 4, 3, 2, 2};
  return r[s];
}

double coverage_rate(const cov_model *cm, int t) {
  return cm->n_nodes ? (double)cm->converted[t] / cm->n_nodes : 1.0;
}

static int in_graph(const mg_graph *g, const mg_node *n) {
  return n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

static int oom(cov_model *cm) {
  cm->error = "out of memory";
  return -1;
}

static void init(cov_model *cm, const char *path) {
  memset(cm, 0, sizeof *cm);
  mg_arena_init(&cm->arena, 64 * 1024);
  cm->model = mg_arena_strdup(&cm->arena, path ? path : "");
}

/* Counts (out == NULL) or records the names of the nodes inside g's subgraphs
 * and below, each owned by top-level node `owner`. */
static int collect_body(cov_model *cm, const mg_node *n, int owner, int record) {
  int count = 0;
  for (int a = 0; a < n->n_attr; a++) {
    const mg_graph *b = n->attr[a].kind == MG_ATTR_GRAPH ? n->attr[a].g : NULL;
    for (int i = 0; b && i < b->n_nodes; i++) {
      if (record) {
        cm->body_names[cm->n_body] = mg_arena_strdup(&cm->arena, b->nodes[i]->name ? b->nodes[i]->name : "");
        cm->body_owner[cm->n_body++] = owner;
      }
      count += 1 + collect_body(cm, b->nodes[i], owner, record);
    }
  }
  return count;
}

int coverage_begin(cov_model *cm, mg_model *m, const char *path) {
  init(cm, path);
  mg_graph *g = m->graph;
  int n = g->n_nodes, nb = 0;
  cm->orig = mg_arena_alloc(&cm->arena, sizeof(mg_node *) * (size_t)(n + 1));
  cm->nodes = mg_arena_alloc(&cm->arena, sizeof(cov_node) * (size_t)(n + 1));
  cm->ops = mg_arena_alloc(&cm->arena, sizeof(cov_op) * (size_t)(n + 1));
  if (!cm->orig || !cm->nodes || !cm->ops || !cm->model) return oom(cm);
  for (int i = 0; i < n; i++) {
    mg_node *node = g->nodes[i];
    if (node->synthetic) continue;
    char name[512];
    snprintf(name, sizeof name, "%s%s%s", node->op == MG_OP_UNKNOWN ? node->domain : "",
             node->op == MG_OP_UNKNOWN && *node->domain ? "::" : "", node->op_type);
    int op = -1;
    for (int k = 0; k < cm->n_ops && op < 0; k++)
      if (!strcmp(cm->ops[k].op, name)) op = k;
    if (op < 0) {
      op = cm->n_ops++;
      memset(&cm->ops[op], 0, sizeof cm->ops[op]);
      cm->ops[op].op = mg_arena_strdup(&cm->arena, name);
      if (!cm->ops[op].op) return oom(cm);
    }
    cov_node *c = &cm->nodes[cm->n_nodes];
    memset(c, 0, sizeof *c);
    c->name = mg_arena_strdup(&cm->arena, node->name ? node->name : "");
    c->op = op;
    cm->ops[op].count++;
    cm->orig[cm->n_nodes++] = node;
    if (!c->name) return oom(cm);
    nb += collect_body(cm, node, 0, 0);
  }
  cm->body_names = mg_arena_alloc(&cm->arena, sizeof(char *) * (size_t)(nb + 1));
  cm->body_owner = mg_arena_alloc(&cm->arena, sizeof(int) * (size_t)(nb + 1));
  if (!cm->body_names || !cm->body_owner) return oom(cm);
  for (int i = 0; i < cm->n_nodes; i++) collect_body(cm, cm->orig[i], i, 1);
  for (int i = 0; i < cm->n_body; i++)
    if (!cm->body_names[i]) return oom(cm);
  return 0;
}

int coverage_map(cov_model *cm, mg_model *m, rule_set *const rs[MAP_TARGET_COUNT]) {
  for (int i = 0; i < cm->n_nodes; i++) {
    cov_node *c = &cm->nodes[i];
    c->folded = !in_graph(m->graph, cm->orig[i]);
    for (int t = 0; t < MAP_TARGET_COUNT; t++) {
      if (c->folded) {
        c->status[t] = MAP_SUPPORTED;
        c->reason[t] = "folded into a constant (or bypassed) by migc";
        continue;
      }
      if (t == MAP_TARGET_CPU) { /* until coverage_cpu says */
        c->status[t] = MAP_DYNAMIC_SHAPE;
        c->reason[t] = "not checked: the model could not be prepared for the C emitter";
        continue;
      }
      node_map nm = map_node(cm->orig[i], rs[t]);
      c->status[t] = nm.status;
      /* map_node's detail is NULL only when memory ran out: the reason would be lost */
      c->reason[t] = nm.detail ? mg_arena_strdup(&cm->arena, nm.detail) : NULL;
      node_map_free(&nm);
      if (!c->reason[t]) return oom(cm);
    }
  }
  return 0;
}

/* The status an emitter's reason stands for. */
static map_status cpu_status(const char *msg) {
  if (!strncmp(msg, CUSTOM_PREFIX, strlen(CUSTOM_PREFIX))) return MAP_CUSTOM_OP;
  if (!strncmp(msg, HOST_PREFIX, strlen(HOST_PREFIX))) return MAP_HOST_FALLBACK;
  if (strstr(msg, "dynamic-shape") || strstr(msg, "run-time length")) return MAP_DYNAMIC_SHAPE;
  if (strstr(msg, "no CPU kernel") || strstr(msg, "control flow")) return MAP_UNSUPPORTED_OP;
  if (strstr(msg, "dtype")) return MAP_UNSUPPORTED_DTYPE;
  return MAP_UNSUPPORTED_ATTR;
}

/* Whether an emitter's message is a rules target's ("mindspore: ..."), which the
 * CPU column must not take when the diagnostics of both emitters are in one list. */
static int other_target(const char *msg) {
  for (int t = 0; t < MAP_TARGET_COUNT; t++) {
    size_t len = strlen(map_target_name(t));
    if (t != MAP_TARGET_CPU && !strncmp(msg, map_target_name(t), len) && !strncmp(msg + len, ": ", 2)) return 1;
  }
  return 0;
}

static int find_node(const cov_model *cm, const char *name) {
  for (int i = 0; i < cm->n_nodes; i++)
    if (!strcmp(cm->nodes[i].name, name)) return i;
  for (int i = 0; i < cm->n_body; i++)
    if (!strcmp(cm->body_names[i], name)) return cm->body_owner[i];
  return -1;
}

/* Target t's status of every node an emitter reported in d->items[first..]
 * (its messages begin "<target>: "); the first reason stands, since a lowered node
 * may fail more than once. */
static int apply_emitter_diags(cov_model *cm, int t, const mg_diags *d, size_t first) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%s: ", map_target_name(t));
  for (size_t k = first; k < d->count; k++) {
    const mg_diag *g = &d->items[k];
    if (g->code != MG_D_UNSUPPORTED || !g->node) continue;
    int i = find_node(cm, g->node);
    if (i < 0) continue; /* a node lowering made, named after none of the model's */
    cov_node *c = &cm->nodes[i];
    const char *msg = g->message ? g->message : "";
    if (!strncmp(msg, prefix, strlen(prefix))) msg += strlen(prefix);
    else if (t != MAP_TARGET_CPU || other_target(msg)) continue; /* another target's */
    map_status st = cpu_status(msg);
    /* the rules' verdict stands unless the emitter did better with it: a custom op,
     * a host fallback */
    if (st == MAP_CUSTOM_OP && c->status[t] != MAP_CUSTOM_OP) msg += strlen(CUSTOM_PREFIX);
    else if (st == MAP_HOST_FALLBACK && c->status[t] != MAP_HOST_FALLBACK) msg += strlen(HOST_PREFIX);
    else if (c->status[t] != MAP_SUPPORTED && c->status[t] != MAP_DECOMPOSED) continue;
    c->status[t] = st;
    c->reason[t] = mg_arena_strdup(&cm->arena, msg);
    if (!c->reason[t]) return oom(cm);
  }
  return 0;
}

int coverage_cpu(cov_model *cm, const mg_diags *d, size_t first) {
  for (int i = 0; i < cm->n_nodes; i++) {
    cov_node *c = &cm->nodes[i];
    if (c->folded) continue;
    c->status[MAP_TARGET_CPU] = MAP_SUPPORTED;
    c->reason[MAP_TARGET_CPU] = "the C emitter converts it";
  }
  return apply_emitter_diags(cm, MAP_TARGET_CPU, d, first);
}

/* Whether target t's emitter refused node `name` in d->items[first..]. */
static int refused_by_emitter(int t, const mg_diags *d, size_t first, const char *name) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%s: ", map_target_name(t));
  for (size_t k = first; k < d->count; k++) {
    const mg_diag *g = &d->items[k];
    if (g->code == MG_D_UNSUPPORTED && g->node && g->message && !strcmp(g->node, name) &&
        !strncmp(g->message, prefix, strlen(prefix)))
      return 1;
  }
  return 0;
}

int coverage_emitter(cov_model *cm, int target, const mg_diags *d, size_t first) {
  /* the emitter refuses, naming it, every node it cannot take; one the rules could
   * not take that it did not refuse was computed at conversion time */
  for (int i = 0; i < cm->n_nodes; i++) {
    cov_node *c = &cm->nodes[i];
    if (c->folded || c->status[target] == MAP_SUPPORTED || c->status[target] == MAP_DECOMPOSED) continue;
    if (refused_by_emitter(target, d, first, c->name)) continue;
    c->status[target] = MAP_SUPPORTED;
    c->reason[target] = "computed at conversion time: every input is a constant";
  }
  return apply_emitter_diags(cm, target, d, first);
}

int coverage_cpu_failed(cov_model *cm, const mg_diags *d, size_t first) {
  char why[600] = "the C emitter failed";
  for (size_t k = first; k < d->count; k++)
    if (d->items[k].severity == MG_SEV_ERROR) {
      snprintf(why, sizeof why, "the C emitter failed: %s", d->items[k].message ? d->items[k].message : "");
      break;
    }
  const char *r = mg_arena_strdup(&cm->arena, why);
  if (!r) return oom(cm);
  for (int i = 0; i < cm->n_nodes; i++)
    if (!cm->nodes[i].folded) cm->nodes[i].status[MAP_TARGET_CPU] = MAP_UNSUPPORTED_OP, cm->nodes[i].reason[MAP_TARGET_CPU] = r;
  return 0;
}

int coverage_end(cov_model *cm) {
  memset(cm->converted, 0, sizeof cm->converted);
  for (int k = 0; k < cm->n_ops; k++) {
    cov_op *op = &cm->ops[k];
    op->nodes = mg_arena_alloc(&cm->arena, sizeof(char *) * (size_t)(op->count + 1));
    if (!op->nodes) return oom(cm);
    for (int t = 0; t < MAP_TARGET_COUNT; t++) op->status[t] = MAP_SUPPORTED, op->reason[t] = NULL;
    op->count = 0;
  }
  for (int i = 0; i < cm->n_nodes; i++) {
    const cov_node *c = &cm->nodes[i];
    cov_op *op = &cm->ops[c->op];
    op->nodes[op->count++] = c->name;
    for (int t = 0; t < MAP_TARGET_COUNT; t++) {
      if (c->status[t] == MAP_SUPPORTED || c->status[t] == MAP_DECOMPOSED) cm->converted[t]++;
      if (!op->reason[t] || rank_of(c->status[t]) > rank_of(op->status[t])) {
        op->status[t] = c->status[t];
        op->reason[t] = c->reason[t] ? c->reason[t] : "";
      }
    }
  }
  cm->orig = NULL; /* the model may go now */
  return 0;
}

int coverage_analyze_model(mg_model *m, const char *path, const mg_shape_override *ov, int n_ov,
                           rule_set *const rs[MAP_TARGET_COUNT], cov_cpu_check cpu_check, cov_rules_check ms_check,
                           cov_rules_check asc_check, cov_model *cm, mg_diags *d) {
  mg_model *msm = NULL;
  if (coverage_begin(cm, m, path)) goto oom;
  /* the MindSpore check runs on a copy prepared as convert prepares its MindSpore
   * model: parameter paths kept (a parameter read through Slice/Concat, an LSTM's
   * reordered gates, stays a parameter) */
  msm = ms_check && rs[MAP_TARGET_MINDSPORE] ? mg_model_clone(m) : NULL;
  if (ms_check && rs[MAP_TARGET_MINDSPORE] && !msm) goto oom;
  m->derive_shapes_only = 1; /* as convert prepares it: no shape taken on trust */
  const char *saved = d->file;
  d->file = path;
  size_t first = d->count;
  if (mg_prepare(m, ov, n_ov, d)) { /* shapes stay partly unknown; mapping still runs */
    if (mg_diags_oom(d, first)) {
      d->file = saved;
      goto oom;
    }
    cm->prepare_failed = 1;
    mg_warn(d, SHAPE, NULL, NULL, "shape inference failed; statuses that need shapes say dynamic-shape");
  }
  d->file = saved;
  if (coverage_map(cm, m, rs)) goto oom;
  if (msm && !cm->prepare_failed) {
    mg_diags quiet;
    mg_diags_init(&quiet);
    msm->derive_shapes_only = 1;
    msm->keep_param_paths = 1;
    int rc = mg_prepare(msm, ov, n_ov, &quiet) || ms_check(msm, rs[MAP_TARGET_MINDSPORE], &quiet) < 0
                 ? 0 : coverage_emitter(cm, MAP_TARGET_MINDSPORE, &quiet, 0);
    rc |= mg_diags_oom(&quiet, 0);
    mg_diags_free(&quiet);
    if (rc) goto oom;
  }
  mg_model_free(msm);
  msm = NULL;
  if (asc_check && rs[MAP_TARGET_ASCEND] && !cm->prepare_failed) {
    mg_diags quiet;
    mg_diags_init(&quiet);
    /* the check fails only for want of memory (it writes nothing): never a
     * shorter column */
    int rc = asc_check(m, rs[MAP_TARGET_ASCEND], &quiet) < 0 ? 1 : coverage_emitter(cm, MAP_TARGET_ASCEND, &quiet, 0);
    rc |= mg_diags_oom(&quiet, 0);
    mg_diags_free(&quiet);
    if (rc) goto oom;
  }
  if (cpu_check && !cm->prepare_failed) {
    /* the emitter's diagnostics are the report's, not the caller's to print */
    mg_diags quiet;
    mg_diags_init(&quiet);
    int rc = cpu_check(m, &quiet) < 0 ? coverage_cpu_failed(cm, &quiet, 0) : coverage_cpu(cm, &quiet, 0);
    rc |= mg_diags_oom(&quiet, 0);
    mg_diags_free(&quiet);
    if (rc) goto oom;
  }
  if (coverage_end(cm)) goto oom;
  return 0;
oom:
  mg_model_free(msm);
  mg_error(d, OOM, NULL, NULL, "out of memory");
  cm->error = "out of memory";
  /* the tables may be half built (coverage_end fills op->nodes op by op): a
   * failed model reports its error and nothing else */
  cm->n_ops = cm->n_nodes = 0;
  memset(cm->converted, 0, sizeof cm->converted);
  return -1;
}

int coverage_analyze(const char *path, const mg_shape_override *ov, int n_ov, rule_set *const rs[MAP_TARGET_COUNT],
                     cov_cpu_check cpu_check, cov_rules_check ms_check, cov_rules_check asc_check, cov_model *cm,
                     mg_diags *d) {
  mg_model *m = NULL;
  size_t first = d->count;
  if (onnx_import(path, d, &m)) {
    init(cm, path);
    char line[1024] = "cannot be read";
    if (d->count > first) mg_diag_format(&d->items[first], line, sizeof line);
    cm->error = mg_arena_strdup(&cm->arena, line);
    if (!cm->error) cm->error = "cannot be read (out of memory)";
    return -1;
  }
  int rc = coverage_analyze_model(m, path, ov, n_ov, rs, cpu_check, ms_check, asc_check, cm, d);
  mg_model_free(m);
  return rc;
}

void coverage_free(cov_model *cm) { mg_arena_destroy(&cm->arena); }
