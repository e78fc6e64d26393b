/* migc coverage MODEL.onnx... [--target cpu,ascend,mindspore] [--format md|json|html]
 *                [-o FILE] [--rules R.xml]... */
#include "cli.h"
#include "outfile.h"
#include "ascend_step.h"
#include "mindspore_step.h"
#include "codegen.h"
#include "coverage.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

static void help(FILE *f) {
  fprintf(f,
          "usage: migc coverage MODEL.onnx... [--target cpu,ascend,mindspore] [--format md|json|html]\n"
          "                     [-o FILE] [--rules R.xml]... [--input-shape NAME=DIMS]...\n"
          "\n"
          "Maps every node of every model for every target and reports, per op: its count,\n"
          "its status on each target (supported, decomposed, unsupported-op,\n"
          "unsupported-attribute, unsupported-dtype, dynamic-shape; for mindspore custom-op\n"
          "(cpu kernel): an ops.Custom call to the CPU kernel; for ascend host-fallback: the\n"
          "CPU kernel on the host between device copies), the node names, the\n"
          "reason and the way forward; per model the converted rate per target; across\n"
          "models the ops that block the most models. Unsupported ops are the point of\n"
          "the report, not an error: the exit status is 0 unless a model cannot be read (2).\n"
          "\n"
          "  --target LIST   targets to report (default cpu,ascend,mindspore)\n"
          "  --format F      md (default, for pull requests), json (docs/coverage-schema.json)\n"
          "                  or html (one self-contained page)\n"
          "  -o FILE         write there (atomically) instead of stdout\n"
          "  --force         replace an existing FILE\n"
          "  --input-shape N=DIMS  fix graph input N's shape, as convert does (repeatable)\n"
          "  --rules R.xml   extra rules, overriding the built-in ones for the ops they name\n");
}

typedef struct {
  int on[MAP_TARGET_COUNT];
  cov_model *models;
  int n_models;
} report;

static const char *suggestion(map_status s, int t) {
  switch (s) {
  case MAP_SUPPORTED: case MAP_DECOMPOSED: return "";
  case MAP_UNSUPPORTED_OP:
    return t == MAP_TARGET_CPU ? "add a CPU runtime kernel" : t == MAP_TARGET_ASCEND ? "custom op (Ascend C kernel)" : "custom op (ops.Custom)";
  case MAP_UNSUPPORTED_ATTR: return "add a rule for this attribute value, or a custom op";
  case MAP_UNSUPPORTED_DTYPE: return "cast around the op, or add a rule for this dtype";
  case MAP_DYNAMIC_SHAPE: return "fix the input shape with --input-shape, unless the reason says it depends on the data";
  case MAP_CUSTOM_OP: return "runs on the CPU device as it is; add a rule, or an Ascend C kernel (func=\"aclnn<Op>\")";
  case MAP_HOST_FALLBACK: return "runs on the host between device copies; add a rule, or build ascend/custom_ops/<Op>/";
  default: return "";
  }
}

/* Whether a status stops the model on that target (a custom op runs). */
static int blocks(map_status s) { return s >= MAP_UNSUPPORTED_OP && s != MAP_CUSTOM_OP && s != MAP_HOST_FALLBACK; }

typedef struct {
  const char *op;
  int models[MAP_TARGET_COUNT];
  int total;
} blocker;

static int blocking(const report *r, blocker **out) {
  int cap = 64, n = 0;
  blocker *b = calloc((size_t)cap, sizeof *b);
  for (int i = 0; b && i < r->n_models; i++)
    for (int k = 0; k < r->models[i].n_ops; k++) {
      const cov_op *o = &r->models[i].ops[k];
      int blocked = 0;
      for (int t = 0; t < MAP_TARGET_COUNT; t++) blocked |= r->on[t] && blocks(o->status[t]);
      if (!blocked) continue;
      int j;
      for (j = 0; j < n; j++)
        if (!strcmp(b[j].op, o->op)) break;
      if (j == n) {
        if (n == cap) {
          blocker *nb = realloc(b, sizeof *b * (size_t)(cap *= 2));
          if (!nb) break;
          b = nb;
        }
        memset(&b[n], 0, sizeof b[n]);
        b[n++].op = o->op;
      }
      b[j].total++;
      for (int t = 0; t < MAP_TARGET_COUNT; t++) b[j].models[t] += r->on[t] && blocks(o->status[t]);
    }
  /* most models blocked first */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (b[j].total > b[i].total || (b[j].total == b[i].total && strcmp(b[j].op, b[i].op) < 0)) {
        blocker t = b[i];
        b[i] = b[j];
        b[j] = t;
      }
  *out = b;
  return n;
}

static json_t *to_json(const report *r) {
  json_t *root = json_object(), *models = json_array();
  json_object_set_new(root, "tool", json_string("migc coverage"));
  json_t *targets = json_array();
  for (int t = 0; t < MAP_TARGET_COUNT; t++)
    if (r->on[t]) json_array_append_new(targets, json_string(map_target_name(t)));
  json_object_set_new(root, "targets", targets);
  for (int i = 0; i < r->n_models; i++) {
    const cov_model *cm = &r->models[i];
    json_t *m = json_object(), *tg = json_object(), *ops = json_array();
    json_object_set_new(m, "model", json_string(cm->model));
    if (cm->error) json_object_set_new(m, "error", json_string(cm->error));
    json_object_set_new(m, "nodes", json_integer(cm->n_nodes));
    for (int t = 0; t < MAP_TARGET_COUNT; t++) {
      if (!r->on[t]) continue;
      json_t *o = json_object();
      json_object_set_new(o, "converted_rate", json_real(coverage_rate(cm, t)));
      json_object_set_new(o, "converted_nodes", json_integer(cm->converted[t]));
      json_t *custom = json_array();
      for (int k = 0; k < cm->n_nodes; k++)
        if (cm->nodes[k].status[t] == MAP_CUSTOM_OP) json_array_append_new(custom, json_string(cm->nodes[k].name));
      json_object_set_new(o, "custom_op_nodes", custom);
      json_t *host = json_array();
      for (int k = 0; k < cm->n_nodes; k++)
        if (cm->nodes[k].status[t] == MAP_HOST_FALLBACK) json_array_append_new(host, json_string(cm->nodes[k].name));
      json_object_set_new(o, "host_fallback_nodes", host);
      json_object_set_new(tg, map_target_name(t), o);
    }
    json_object_set_new(m, "targets", tg);
    for (int k = 0; k < cm->n_ops; k++) {
      const cov_op *op = &cm->ops[k];
      json_t *o = json_object(), *st = json_object(), *re = json_object(), *sg = json_object(), *nodes = json_array();
      json_object_set_new(o, "op", json_string(op->op));
      json_object_set_new(o, "count", json_integer(op->count));
      for (int t = 0; t < MAP_TARGET_COUNT; t++) {
        if (!r->on[t]) continue;
        json_object_set_new(st, map_target_name(t), json_string(map_status_name(op->status[t])));
        json_object_set_new(re, map_target_name(t), json_string(op->reason[t] ? op->reason[t] : ""));
        json_object_set_new(sg, map_target_name(t), json_string(suggestion(op->status[t], t)));
      }
      for (int j = 0; j < op->count; j++) json_array_append_new(nodes, json_string(op->nodes[j]));
      json_object_set_new(o, "status", st);
      json_object_set_new(o, "reason", re);
      json_object_set_new(o, "suggestion", sg);
      json_object_set_new(o, "nodes", nodes);
      json_array_append_new(ops, o);
    }
    json_object_set_new(m, "ops", ops);
    json_array_append_new(models, m);
  }
  json_object_set_new(root, "models", models);
  blocker *b;
  int nb = blocking(r, &b);
  json_t *summary = json_object(), *bl = json_array();
  for (int i = 0; i < nb; i++) {
    json_t *o = json_object(), *per = json_object();
    json_object_set_new(o, "op", json_string(b[i].op));
    json_object_set_new(o, "models_blocked", json_integer(b[i].total));
    for (int t = 0; t < MAP_TARGET_COUNT; t++)
      if (r->on[t]) json_object_set_new(per, map_target_name(t), json_integer(b[i].models[t]));
    json_object_set_new(o, "by_target", per);
    json_array_append_new(bl, o);
  }
  free(b);
  json_object_set_new(summary, "models", json_integer(r->n_models));
  json_object_set_new(summary, "blocking_ops", bl);
  json_object_set_new(root, "summary", summary);
  return root;
}

static void md_escape(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|') fputs("\\|", f);
    else if (*s == '\n') fputc(' ', f);
    else fputc(*s, f);
  }
}

/* The nodes of cm a target runs as custom ops, one line each with the reason: the
 * op table shows only each op's worst node. */
static void custom_nodes_md(const cov_model *cm, const int *on, FILE *f) {
  int any = 0;
  for (int t = 0; t < MAP_TARGET_COUNT; t++)
    for (int k = 0; k < cm->n_nodes; k++) {
      const cov_node *c = &cm->nodes[k];
      if (!on[t] || (c->status[t] != MAP_CUSTOM_OP && c->status[t] != MAP_HOST_FALLBACK)) continue;
      if (!any++) fprintf(f, "\nCustom ops and host fallbacks (cpu kernel): the nodes that run through the CPU target's kernel:\n\n");
      fprintf(f, "- %s: `", map_target_name(t));
      md_escape(f, c->name);
      fprintf(f, "` (%s): %s: ", cm->ops[c->op].op, map_status_name(c->status[t]));
      md_escape(f, c->reason[t]);
      fprintf(f, "\n");
    }
}

static void to_md(const report *r, FILE *f) {
  fprintf(f, "# migc coverage\n\n");
  fprintf(f, "| model | nodes |");
  for (int t = 0; t < MAP_TARGET_COUNT; t++) if (r->on[t]) fprintf(f, " %s |", map_target_name(t));
  fprintf(f, "\n|---|---|");
  for (int t = 0; t < MAP_TARGET_COUNT; t++) if (r->on[t]) fprintf(f, "---|");
  fprintf(f, "\n");
  for (int i = 0; i < r->n_models; i++) {
    const cov_model *cm = &r->models[i];
    fprintf(f, "| %s | %d |", cm->model, cm->n_nodes);
    for (int t = 0; t < MAP_TARGET_COUNT; t++)
      if (r->on[t]) fprintf(f, cm->error ? " error |" : " %.1f%% |", 100 * coverage_rate(cm, t));
    fprintf(f, "\n");
  }
  blocker *b;
  int nb = blocking(r, &b);
  fprintf(f, "\n## Ops that block the most models\n\n");
  if (!nb) fprintf(f, "None: every op of every model converts on every target reported.\n");
  for (int i = 0; i < nb && i < 30; i++) {
    fprintf(f, "- **%s**: %d model(s) (", b[i].op, b[i].total);
    int first = 1;
    for (int t = 0; t < MAP_TARGET_COUNT; t++)
      if (r->on[t] && b[i].models[t]) fprintf(f, "%s%s %d", first ? "" : ", ", map_target_name(t), b[i].models[t]), first = 0;
    fprintf(f, ")\n");
  }
  free(b);
  for (int i = 0; i < r->n_models; i++) {
    const cov_model *cm = &r->models[i];
    fprintf(f, "\n## %s\n\n", cm->model);
    if (cm->error) {
      fprintf(f, "Could not be read: ");
      md_escape(f, cm->error);
      fprintf(f, "\n");
      continue;
    }
    fprintf(f, "| op | count |");
    for (int t = 0; t < MAP_TARGET_COUNT; t++) if (r->on[t]) fprintf(f, " %s |", map_target_name(t));
    fprintf(f, " reason |\n|---|---|");
    for (int t = 0; t < MAP_TARGET_COUNT; t++) if (r->on[t]) fprintf(f, "---|");
    fprintf(f, "---|\n");
    for (int k = 0; k < cm->n_ops; k++) {
      const cov_op *o = &cm->ops[k];
      fprintf(f, "| %s | %d |", o->op, o->count);
      int worst = -1;
      for (int t = 0; t < MAP_TARGET_COUNT; t++) {
        if (!r->on[t]) continue;
        fprintf(f, " %s |", map_status_name(o->status[t]));
        if (o->status[t] >= MAP_UNSUPPORTED_OP && worst < 0) worst = t;
      }
      fprintf(f, " ");
      if (worst >= 0) {
        fprintf(f, "%s: ", map_target_name(worst));
        md_escape(f, o->reason[worst]);
        fprintf(f, " (e.g. node `%s`)", o->nodes[0]);
      }
      fprintf(f, " |\n");
    }
    custom_nodes_md(cm, r->on, f);
  }
}

static void html_escape(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else if (*s == '"') fputs("&quot;", f);
    else fputc(*s, f);
  }
}

static void to_html(const report *r, FILE *f) {
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>migc coverage</title>\n"
             "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0 24px}"
             "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3;cursor:pointer}"
             ".bar{background:#eee;width:240px;height:14px;display:inline-block;vertical-align:middle}"
             ".fill{background:#3a7;height:14px}.supported,.decomposed{color:#176}.unsupported-op,.unsupported-attribute,"
             ".unsupported-dtype{color:#b22}.dynamic-shape,.custom-op,.host-fallback{color:#a60}</style></head><body>\n<h1>migc coverage</h1>\n");
  for (int i = 0; i < r->n_models; i++) {
    const cov_model *cm = &r->models[i];
    fprintf(f, "<h2>");
    html_escape(f, cm->model);
    fprintf(f, "</h2>\n");
    if (cm->error) {
      fprintf(f, "<p>Could not be read: ");
      html_escape(f, cm->error);
      fprintf(f, "</p>\n");
      continue;
    }
    fprintf(f, "<div class=\"rates\">");
    for (int t = 0; t < MAP_TARGET_COUNT; t++)
      if (r->on[t])
        fprintf(f, "<div data-target=\"%s\">%-10s <span class=\"bar\"><span class=\"fill\" style=\"display:block;width:%.1f%%\"></span></span> %.1f%%</div>\n",
                map_target_name(t), map_target_name(t), 100 * coverage_rate(cm, t), 100 * coverage_rate(cm, t));
    fprintf(f, "</div>\n<table class=\"sortable\"><thead><tr><th>op</th><th>count</th>");
    for (int t = 0; t < MAP_TARGET_COUNT; t++) if (r->on[t]) fprintf(f, "<th>%s</th>", map_target_name(t));
    fprintf(f, "<th>reason</th><th>nodes</th></tr></thead><tbody>\n");
    for (int k = 0; k < cm->n_ops; k++) {
      const cov_op *o = &cm->ops[k];
      fprintf(f, "<tr><td>");
      html_escape(f, o->op);
      fprintf(f, "</td><td>%d</td>", o->count);
      int worst = -1;
      for (int t = 0; t < MAP_TARGET_COUNT; t++) {
        if (!r->on[t]) continue;
        fprintf(f, "<td class=\"%s\">%s</td>", map_status_name(o->status[t]), map_status_name(o->status[t]));
        if (o->status[t] >= MAP_UNSUPPORTED_OP && worst < 0) worst = t;
      }
      fprintf(f, "<td>");
      if (worst >= 0) {
        fprintf(f, "%s: ", map_target_name(worst));
        html_escape(f, o->reason[worst]);
      }
      fprintf(f, "</td><td>");
      for (int j = 0; j < o->count && j < 5; j++) {
        if (j) fprintf(f, ", ");
        html_escape(f, o->nodes[j]);
      }
      if (o->count > 5) fprintf(f, ", ... (%d more)", o->count - 5);
      fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</tbody></table>\n");
  }
  fprintf(f, "%s</body></html>\n", CLI_SORTABLE_JS);
}

int cli_coverage_write(void *models, int n, const int *on, const char *format, const char *out) {
  report r = {{0}, models, n};
  memcpy(r.on, on, sizeof r.on);
  FILE *f = stdout;
  mg_out_file o;
  mg_diags d;
  mg_diags_init(&d);
  if (out) {
    if (mg_out_fopen(&o, out, &d)) {
      cli_report(&d);
      mg_diags_free(&d);
      return -1;
    }
    f = o.f;
  }
  if (!strcmp(format, "json")) {
    json_t *j = to_json(&r);
    json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(j);
  } else if (!strcmp(format, "html")) {
    to_html(&r, f);
  } else {
    to_md(&r, f);
  }
  int rc = out && mg_out_commit(&o, &d) ? -1 : 0;
  cli_report(&d);
  mg_diags_free(&d);
  return rc;
}

int cli_coverage_rules(rule_set **rs, mg_diags *d) {
  rs[MAP_TARGET_CPU] = NULL;
  rs[MAP_TARGET_ASCEND] = rules_new("ascend");
  rs[MAP_TARGET_MINDSPORE] = rules_new("mindspore");
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/aclnn.xml", dir);
  if (!rs[1] || !rs[2]) {
    mg_error(d, OOM, NULL, NULL, "out of memory loading the rules");
    return -1;
  }
  if (rules_load(rs[1], path, d)) return -1;
  snprintf(path, sizeof path, "%s/mindspore.xml", dir);
  return rules_load(rs[2], path, d) ? -1 : 0;
}

int cmd_coverage(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  report r = {{1, 1, 1}, NULL, 0};
  const char *format = "md", *out = NULL, *models[4096], *user_rules[16];
  int n_models = 0, n_rules = 0, n_ov = 0, force = 0;
  mg_shape_override ov[32];
  char ov_names[32][256];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--target") && more) {
      memset(r.on, 0, sizeof r.on);
      char *list = strdup(argv[++i]);
      for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int k = 0; k < MAP_TARGET_COUNT; k++)
          if (!strcmp(t, map_target_name(k))) r.on[k] = found = 1;
        if (!found) {
          fprintf(stderr, "migc coverage: unknown target '%s' (cpu, ascend, mindspore)\n", t);
          free(list);
          return EXIT_BAD_INPUT;
        }
      }
      free(list);
    } else if (!strcmp(a, "--format") && more) {
      format = argv[++i];
      if (strcmp(format, "md") && strcmp(format, "json") && strcmp(format, "html")) {
        fprintf(stderr, "migc coverage: --format must be md, json or html\n");
        return EXIT_BAD_INPUT;
      }
    } else if (!strcmp(a, "-o") && more) out = argv[++i];
    else if (!strcmp(a, "--force")) force = 1;
    else if (!strcmp(a, "--input-shape") && more && n_ov < 32) {
      const char *eq = strchr(argv[++i], '=');
      size_t len = eq ? (size_t)(eq - argv[i]) : 0;
      if (!eq || !len || len >= sizeof ov_names[0] || mg_shape_parse(eq + 1, &ov[n_ov].shape)) {
        fprintf(stderr, "migc coverage: --input-shape wants NAME=1x3x224x224, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      memcpy(ov_names[n_ov], argv[i], len); /* argv stays as given: convert passes it twice */
      ov_names[n_ov][len] = 0;
      ov[n_ov].name = ov_names[n_ov];
      n_ov++;
    }
    else if (!strcmp(a, "--rules") && more && n_rules < 16) user_rules[n_rules++] = argv[++i];
    else if (a[0] == '-') {
      fprintf(stderr, "migc coverage: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (n_models < 4096) models[n_models++] = a;
  }
  if (!n_models) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  const char *clash = cli_input_named(out, models, n_models);
  if (!clash) clash = cli_input_named(out, user_rules, n_rules);
  if (clash) {
    fprintf(stderr, "migc coverage: -o %s is the input %s; refusing to write the report over it\n", out, clash);
    return EXIT_BAD_INPUT;
  }
  cli_output_rule(force, user_rules, n_rules);
  mg_diags d;
  mg_diags_init(&d);
  if (out && mg_out_check(out, 1, &d)) { /* before the analysis, not after it */
    cli_report(&d);
    mg_diags_free(&d);
    return EXIT_BAD_INPUT;
  }
  int rc = EXIT_OK;
  rule_set *rs[MAP_TARGET_COUNT];
  if (cli_coverage_rules(rs, &d)) rc = EXIT_BAD_INPUT;
  for (int i = 0; i < n_rules && !rc; i++) {
    /* a user file says its target in its root element; load it into that set */
    mg_diags probe;
    mg_diags_init(&probe);
    int loaded = 0;
    for (int t = 1; t < MAP_TARGET_COUNT && !loaded; t++) {
      rule_set *tmp = rules_new(rules_target(rs[t]));
      if (tmp && !rules_load(tmp, user_rules[i], &probe)) loaded = t;
      rules_free(tmp);
    }
    if (!loaded || rules_load(rs[loaded], user_rules[i], &d)) {
      if (!loaded && probe.count) mg_diag_add(&d, MG_SEV_ERROR, probe.items[probe.count - 1].code, NULL, NULL, "%s", probe.items[probe.count - 1].message);
      rc = EXIT_BAD_INPUT;
    }
    mg_diags_free(&probe);
  }
  if (rc) goto done;
  r.models = calloc((size_t)n_models, sizeof *r.models);
  if (!r.models) {
    mg_error(&d, OOM, NULL, NULL, "out of memory");
    rc = EXIT_INTERNAL;
    goto done;
  }
  for (int i = 0; i < n_models; i++) {
    if (n_models > 1) fprintf(stderr, "coverage: [%d/%d] %s\n", i + 1, n_models, models[i]);
    /* the CPU column is the C emitter's own check, as convert runs it */
    if (coverage_analyze(models[i], ov, n_ov, rs, r.on[MAP_TARGET_CPU] ? cg_check_model : NULL,
                         r.on[MAP_TARGET_MINDSPORE] ? cli_mindspore_check : NULL,
                         r.on[MAP_TARGET_ASCEND] ? cli_ascend_check : NULL, &r.models[i], &d))
      rc = EXIT_BAD_INPUT;
    r.n_models++;
  }
  if (cli_coverage_write(r.models, r.n_models, r.on, format, out)) rc = EXIT_BAD_INPUT;
done:
  cli_report(&d);
  for (int i = 0; i < r.n_models; i++) coverage_free(&r.models[i]);
  free(r.models);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(rs[t]);
  mg_diags_free(&d);
  return rc;
}
