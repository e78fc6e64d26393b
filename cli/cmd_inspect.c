/* migc inspect MODEL.onnx [--json] [--input-shape NAME=DIMS]... */
#include "cli.h"
#include "ascend_step.h"
#include "mindspore_step.h"
#include "codegen.h"
#include "coverage.h"
#include "onnx_import.h"
#include "passes.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

static void help(FILE *f) {
  fprintf(f,
          "usage: migc inspect MODEL.onnx [--json] [--input-shape NAME=1x3x224x224]...\n"
          "\n"
          "Prints the model's producer and opsets, its inputs and outputs (dtype and\n"
          "shape after inference), an op histogram, the parameter count and bytes, how\n"
          "many intermediate tensors have static shapes, and the ops and domains that\n"
          "migc does not know.\n"
          "\n"
          "  --json                 machine-readable output\n"
          "  --input-shape N=DIMS   fix graph input N's shape (e.g. input=1x3x224x224)\n");
}

typedef struct {
  int counts[MG_OP_COUNT];
  /* unknown ops: "domain::op_type" and count */
  const char *unknown[256];
  int unknown_count[256];
  int n_unknown;
} histogram;

static int count_graph(mg_graph *g, void *ctx) {
  histogram *h = ctx;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    if (n->op != MG_OP_UNKNOWN) {
      h->counts[n->op]++;
      continue;
    }
    int k;
    for (k = 0; k < h->n_unknown; k++)
      if (!strcmp(h->unknown[k], n->op_type)) break;
    if (k == h->n_unknown && k < 256) {
      h->unknown[k] = mg_arena_printf(&g->model->arena, "%s%s%s", n->domain,
                                      *n->domain ? "::" : "", n->op_type);
      h->n_unknown++;
    }
    if (k < 256) h->unknown_count[k]++;
  }
  return 0;
}

typedef struct {
  int total, fixed;
  const char *first_dynamic[8];
  int n_first;
} static_stats;

static int shape_graph(mg_graph *g, void *ctx) {
  static_stats *s = ctx;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_out; k++) {
      const mg_value *v = g->nodes[i]->out[k];
      if (!v || v->vtype != MG_VT_TENSOR) continue;
      s->total++;
      if (mg_shape_is_static(&v->shape)) s->fixed++;
      else if (s->n_first < 8) s->first_dynamic[s->n_first++] = v->name;
    }
  return 0;
}

static json_t *shape_json(const mg_shape *s) {
  if (s->rank < 0) return json_null();
  json_t *a = json_array();
  for (int i = 0; i < s->rank; i++)
    json_array_append_new(a, s->d[i].v >= 0 ? json_integer(s->d[i].v)
                                            : s->d[i].sym ? json_string(s->d[i].sym) : json_null());
  return a;
}

static json_t *value_json(const mg_value *v) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(v->name));
  json_object_set_new(o, "dtype", json_string(mg_dtype_name(v->dtype)));
  json_object_set_new(o, "shape", shape_json(&v->shape));
  if (v->has_decl) {
    json_object_set_new(o, "declared_dtype", json_string(mg_dtype_name(v->decl_dtype)));
    json_object_set_new(o, "declared_shape", shape_json(&v->decl_shape));
  }
  return o;
}

static void print_value(const mg_value *v) {
  char buf[256];
  printf("  %-24s %-8s %s", v->name, mg_dtype_name(v->dtype), mg_shape_str(&v->shape, buf, sizeof buf));
  if (v->vtype == MG_VT_SEQUENCE) printf(" (sequence)");
  printf("\n");
}

static int parse_override(const char *arg, mg_shape_override *o) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg) return -1;
  o->name = strndup(arg, (size_t)(eq - arg));
  return o->name && !mg_shape_parse(eq + 1, &o->shape) ? 0 : -1;
}

int cmd_inspect(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *path = NULL;
  int json = 0, n_ov = 0, rc = EXIT_OK;
  mg_shape_override ov[32];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--input-shape") && i + 1 < argc && n_ov < 32) {
      if (parse_override(argv[++i], &ov[n_ov])) {
        fprintf(stderr, "migc inspect: --input-shape wants NAME=1x3x224x224, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      n_ov++;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "migc inspect: unknown option '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!path) path = argv[i];
    else {
      fprintf(stderr, "migc inspect: one model at a time\n");
      return EXIT_BAD_INPUT;
    }
  }
  if (!path) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  if (onnx_import(path, &d, &m)) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  histogram *h = calloc(1, sizeof *h);
  if (!h) {
    rc = EXIT_INTERNAL;
    goto out;
  }
  mg_graph_walk(m->graph, count_graph, h);
  int64_t params = 0, param_bytes = 0;
  for (int i = 0; i < m->graph->n_inits; i++) {
    int64_t k = mg_shape_numel(&m->graph->inits[i]->shape);
    params += k > 0 ? k : 0;
    param_bytes += (int64_t)m->graph->inits[i]->nbytes;
  }
  d.file = path;
  /* The coverage summary line is `migc coverage`'s analysis, on a model of its
   * own (its CPU column runs the C emitter's check, which rewrites the model);
   * m is prepared for the statistics. */
  double rate[MAP_TARGET_COUNT] = {0};
  int have_rates = 0, prepared = 0;
  {
    rule_set *rs[MAP_TARGET_COUNT] = {NULL, rules_new("ascend"), rules_new("mindspore")};
    const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
    char rp[4096];
    mg_diags quiet;
    mg_diags_init(&quiet);
    snprintf(rp, sizeof rp, "%s/aclnn.xml", dir);
    int ok = rs[1] && rs[2] && !rules_load(rs[1], rp, &quiet);
    snprintf(rp, sizeof rp, "%s/mindspore.xml", dir);
    ok = ok && !rules_load(rs[2], rp, &quiet);
    size_t errors = d.errors;
    prepared = !mg_prepare(m, ov, n_ov, &d) && d.errors == errors;
    if (ok && prepared) {
      cov_model cm;
      int r = coverage_analyze(path, ov, n_ov, rs, cg_check_model, cli_mindspore_check, cli_ascend_check, &cm, &quiet);
      have_rates = !r && !cm.prepare_failed;
      /* a line left out for want of memory is an error, not a shorter summary */
      if (r && cm.error && strstr(cm.error, "out of memory")) mg_error(&d, OOM, NULL, NULL, "coverage: %s", cm.error);
      for (int t = 0; t < MAP_TARGET_COUNT; t++) rate[t] = coverage_rate(&cm, t);
      coverage_free(&cm);
    } else if (!rs[1] || !rs[2] || (!ok && mg_diags_oom(&quiet, 0))) {
      mg_error(&d, OOM, NULL, NULL, "out of memory loading the coverage rules");
    } else if (!ok) {
      mg_warn(&d, IO, NULL, NULL, "coverage rules could not be loaded from %s", dir);
    }
    for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(rs[t]);
    mg_diags_free(&quiet);
  }
  if (!prepared) {
    rc = EXIT_BAD_INPUT;
    free(h);
    goto out;
  }
  static_stats st = {0};
  mg_graph_walk(m->graph, shape_graph, &st);
  mg_graph *g = m->graph;
  int n_nodes = 0;
  for (int i = 0; i < MG_OP_COUNT; i++) n_nodes += h->counts[i];
  for (int i = 0; i < h->n_unknown; i++) n_nodes += h->unknown_count[i];
  if (json) {
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(path));
    json_t *prod = json_object();
    json_object_set_new(prod, "name", json_string(m->producer_name));
    json_object_set_new(prod, "version", json_string(m->producer_version));
    json_object_set_new(o, "producer", prod);
    json_object_set_new(o, "ir_version", json_integer(m->ir_version));
    json_t *ops = json_array();
    for (int i = 0; i < m->n_opsets; i++) {
      json_t *e = json_object();
      json_object_set_new(e, "domain", json_string(m->opsets[i].domain));
      json_object_set_new(e, "version", json_integer(m->opsets[i].version));
      json_array_append_new(ops, e);
    }
    json_object_set_new(o, "opsets", ops);
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < g->n_inputs; i++) json_array_append_new(ins, value_json(g->inputs[i]));
    for (int i = 0; i < g->n_outputs; i++) json_array_append_new(outs, value_json(g->outputs[i]));
    json_object_set_new(o, "inputs", ins);
    json_object_set_new(o, "outputs", outs);
    json_t *hist = json_object();
    for (int i = 1; i < MG_OP_COUNT; i++)
      if (h->counts[i]) json_object_set_new(hist, mg_op_name((mg_op)i), json_integer(h->counts[i]));
    for (int i = 0; i < h->n_unknown; i++)
      json_object_set_new(hist, h->unknown[i], json_integer(h->unknown_count[i]));
    json_object_set_new(o, "ops", hist);
    json_object_set_new(o, "nodes", json_integer(n_nodes));
    json_object_set_new(o, "nodes_after_passes", json_integer(g->n_nodes));
    json_t *p = json_object();
    json_object_set_new(p, "tensors", json_integer(g->n_inits));
    json_object_set_new(p, "count", json_integer(params));
    json_object_set_new(p, "bytes", json_integer(param_bytes));
    json_object_set_new(o, "params", p);
    json_t *unk = json_array();
    for (int i = 0; i < h->n_unknown; i++) {
      json_t *e = json_object();
      json_object_set_new(e, "op", json_string(h->unknown[i]));
      json_object_set_new(e, "count", json_integer(h->unknown_count[i]));
      json_array_append_new(unk, e);
    }
    json_object_set_new(o, "unknown_ops", unk);
    json_t *sh = json_object();
    json_object_set_new(sh, "tensors", json_integer(st.total));
    json_object_set_new(sh, "static", json_integer(st.fixed));
    json_t *dyn = json_array();
    for (int i = 0; i < st.n_first; i++) json_array_append_new(dyn, json_string(st.first_dynamic[i]));
    json_object_set_new(sh, "first_dynamic", dyn);
    json_object_set_new(o, "shapes", sh);
    if (have_rates) {
      json_t *cov = json_object();
      for (int t = 0; t < MAP_TARGET_COUNT; t++) json_object_set_new(cov, map_target_name(t), json_real(rate[t]));
      json_object_set_new(o, "coverage", cov);
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
  } else {
    printf("model     %s\n", path);
    printf("producer  %s %s, ir_version %lld\n", *m->producer_name ? m->producer_name : "(none)",
           m->producer_version, (long long)m->ir_version);
    printf("opsets   ");
    for (int i = 0; i < m->n_opsets; i++)
      printf(" %s %lld", *m->opsets[i].domain ? m->opsets[i].domain : "ai.onnx",
             (long long)m->opsets[i].version);
    printf("\ninputs\n");
    for (int i = 0; i < g->n_inputs; i++) print_value(g->inputs[i]);
    printf("outputs\n");
    for (int i = 0; i < g->n_outputs; i++) print_value(g->outputs[i]);
    printf("ops       %d nodes (%d after folding and clean-up)\n", n_nodes, g->n_nodes);
    for (int i = 1; i < MG_OP_COUNT; i++)
      if (h->counts[i]) printf("  %-24s %d\n", mg_op_name((mg_op)i), h->counts[i]);
    printf("params    %lld in %d tensors, %.1f MB\n", (long long)params, g->n_inits,
           (double)param_bytes / 1e6);
    printf("shapes    %d of %d intermediate tensors static\n", st.fixed, st.total);
    if (have_rates)
      printf("coverage  cpu %.0f%%, ascend %.0f%%, mindspore %.0f%% of nodes convert (migc coverage for details)\n",
             100 * rate[MAP_TARGET_CPU], 100 * rate[MAP_TARGET_ASCEND], 100 * rate[MAP_TARGET_MINDSPORE]);
    if (h->n_unknown) {
      printf("unknown   ");
      for (int i = 0; i < h->n_unknown; i++)
        printf("%s%s x%d", i ? ", " : "", h->unknown[i], h->unknown_count[i]);
      printf("  (migc does not know these ops)\n");
    } else {
      printf("unknown   none\n");
    }
  }
  free(h);
  if (d.errors && rc == EXIT_OK) rc = EXIT_INTERNAL; /* memory ran out for the coverage line */
out:
  cli_report(&d);
  mg_model_free(m);
  mg_diags_free(&d);
  for (int i = 0; i < n_ov; i++) free((void *)ov[i].name);
  return rc;
}
