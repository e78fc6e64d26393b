#include "coverage.h"
#include "onnx_import.h"
#include "passes.h"
#include <stdio.h>
#include <string.h>

static int rank_of(map_status s) {
  /* worse statuses rank higher; an op takes the worst of its nodes */
  static const int r[MAP_STATUS_COUNT] = {0, 1, 5, 4, 3, 2};
  return r[s];
}

double coverage_rate(const cov_model *cm, int t) {
  return cm->n_nodes ? (double)cm->converted[t] / cm->n_nodes : 1.0;
}

static int in_graph(const mg_graph *g, const mg_node *n) {
  return n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

int coverage_analyze(const char *path, rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d) {
  return coverage_analyze_shaped(path, NULL, 0, rs, cm, d);
}

int coverage_analyze_shaped(const char *path, const mg_shape_override *ov, int n_ov,
                            rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d) {
  mg_model *m = NULL;
  size_t first = d->count;
  if (onnx_import(path, d, &m)) {
    memset(cm, 0, sizeof *cm);
    mg_arena_init(&cm->arena, 64 * 1024);
    cm->model = mg_arena_strdup(&cm->arena, path);
    char line[1024] = "cannot be read";
    if (d->count > first) mg_diag_format(&d->items[first], line, sizeof line);
    cm->error = mg_arena_strdup(&cm->arena, line);
    return -1;
  }
  int rc = coverage_analyze_model(m, path, ov, n_ov, rs, cm, d);
  mg_model_free(m);
  return rc;
}

int coverage_analyze_model(mg_model *m, const char *path, const mg_shape_override *ov, int n_ov,
                           rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d) {
  memset(cm, 0, sizeof *cm);
  mg_arena_init(&cm->arena, 64 * 1024);
  cm->model = mg_arena_strdup(&cm->arena, path);
  /* The model's own nodes, before folding removes any. */
  mg_graph *g = m->graph;
  int n = g->n_nodes;
  mg_node **orig = mg_arena_alloc(&cm->arena, sizeof(mg_node *) * (size_t)(n + 1));
  if (!orig) goto oom;
  if (n) memcpy(orig, g->nodes, sizeof(mg_node *) * (size_t)n);
  const char *saved = d->file;
  d->file = path;
  if (mg_prepare(m, ov, n_ov, d)) { /* shapes stay partly unknown; mapping still runs */
    cm->prepare_failed = 1;
    mg_warn(d, SHAPE, NULL, NULL, "shape inference failed; statuses that need shapes say dynamic-shape");
  }
  d->file = saved;
  cm->ops = mg_arena_alloc(&cm->arena, sizeof(cov_op) * (size_t)(n + 1));
  if (!cm->ops) goto oom;
  for (int i = 0; i < n; i++) {
    mg_node *node = orig[i];
    if (node->synthetic) continue;
    char name[512];
    snprintf(name, sizeof name, "%s%s%s", node->op == MG_OP_UNKNOWN ? node->domain : "",
             node->op == MG_OP_UNKNOWN && *node->domain ? "::" : "", node->op_type);
    cov_op *op = NULL;
    for (int k = 0; k < cm->n_ops; k++)
      if (!strcmp(cm->ops[k].op, name)) op = &cm->ops[k];
    if (!op) {
      op = &cm->ops[cm->n_ops++];
      memset(op, 0, sizeof *op);
      op->op = mg_arena_strdup(&cm->arena, name);
      op->nodes = mg_arena_alloc(&cm->arena, sizeof(char *) * (size_t)(n + 1));
      if (!op->op || !op->nodes) goto oom;
      for (int t = 0; t < MAP_TARGET_COUNT; t++) op->status[t] = MAP_SUPPORTED;
    }
    op->nodes[op->count++] = node->name;
    cm->n_nodes++;
    int folded = !in_graph(g, node);
    for (int t = 0; t < MAP_TARGET_COUNT; t++) {
      node_map nm;
      if (folded) {
        nm.status = MAP_SUPPORTED;
        nm.detail = NULL;
      } else {
        nm = map_node(node, t == MAP_TARGET_CPU ? NULL : rs[t]);
      }
      if (nm.status == MAP_SUPPORTED || nm.status == MAP_DECOMPOSED) cm->converted[t]++;
      if (!op->reason[t] || rank_of(nm.status) > rank_of(op->status[t])) {
        op->status[t] = nm.status;
        op->reason[t] = mg_arena_strdup(&cm->arena, folded ? "folded into a constant (or bypassed) by migc"
                                                           : nm.detail ? nm.detail : "");
      }
      node_map_free(&nm);
    }
  }
  /* node names must outlive the model */
  for (int k = 0; k < cm->n_ops; k++)
    for (int j = 0; j < cm->ops[k].count; j++) cm->ops[k].nodes[j] = mg_arena_strdup(&cm->arena, cm->ops[k].nodes[j]);
  return 0;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory");
  cm->error = "out of memory";
  return -1;
}

void coverage_free(cov_model *cm) { mg_arena_destroy(&cm->arena); }
