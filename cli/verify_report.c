/* migc verify's reports: the table on stdout, --json and --junit. */
#include "cli.h"
#include "export.h"
#include "junit.h"
#include "verify_cli.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *kind_name(vkind k) {
  static const char *n[] = {"output", "input-grad", "param-grad", "grad-group", "weight", "layers"};
  return n[k];
}

static const char *status_name(vstatus s) { return s == V_PASS ? "PASS" : s == V_FAIL ? "FAIL" : "ERROR"; }

static void row(const vresult *r) {
  char name[48];
  snprintf(name, sizeof name, "%.47s", r->name);
  if (strlen(r->name) > 40) snprintf(name + 37, sizeof name - 37, "...");
  if (!r->compared) {
    printf("%-10s %-40s %-10s %s: %s\n", kind_name(r->kind), name, r->shape, status_name(r->status), r->why);
    return;
  }
  char noise[16] = "-";
  if (r->tol.noise > 0) snprintf(noise, sizeof noise, "%9.2e", r->tol.noise);
  printf("%-10s %-40s %-10s %9.2e %9.2e %12.9f %9.2e %6.0f/%-6.0f/%-8.0f %6.2f%% %9s  %s", kind_name(r->kind), name,
         r->shape, r->m.max_abs, r->m.max_rel, r->m.cosine, r->m.rel_norm, r->m.ulp_median, r->m.ulp_p99,
         r->m.ulp_max, 100 * r->m.frac_over, noise, status_name(r->status));
  if (r->status != V_PASS) printf(": %s", r->why);
  printf("\n");
  if (r->precision && r->mean_rel >= 0) {
    printf("%-10s at %s: mean rel err %.3g", "", r->precision, r->mean_rel);
    if (r->topk_rows)
      printf(", top-1 agreement %.2f%%, top-5 %.2f%% over %lld rows", 100 * r->top1, 100 * r->top5,
             (long long)r->topk_rows);
    printf("\n");
  }
}

static void header(void) {
  printf("%-10s %-40s %-10s %9s %9s %12s %9s %-22s %7s %9s  %s\n", "kind", "name", "shape", "max_abs", "max_rel",
         "cosine", "rel_norm", "ulp med/p99/max", "over", "ref_noise", "verdict");
}

void verify_print(const vctx *v) {
  printf("migc verify: %s (%s) against %s, backend %s%s%s\n", v->model_name, v->onnx, v->reference, v->opt.backend,
         v->opt.precision ? ", precision " : "", v->opt.precision ? v->opt.precision : "");
  header();
  int passed = 0, total = 0;
  for (int i = 0; i < v->n_res; i++) {
    const vresult *r = &v->res[i];
    if (r->kind == V_PARAM_GRAD) continue; /* shown through their groups */
    row(r);
    total++;
    passed += r->status == V_PASS;
    if (r->kind == V_GROUP && r->status != V_PASS)
      for (int k = 0; k < v->n_res; k++)
        if (v->res[k].kind == V_PARAM_GRAD && !strcmp(v->res[k].group, r->group) && v->res[k].status != V_PASS) {
          printf("  ");
          row(&v->res[k]);
        }
  }
  if (v->opt.ckpt) {
    int wfail = 0;
    for (int i = 0; i < v->n_wres; i++) {
      if (v->wres[i].status == V_PASS) continue;
      row(&v->wres[i]);
      wfail++;
    }
    printf("weights: %d checkpoint tensors checked against the graph, %d differ\n", v->wchecked, wfail);
    if (v->wunmapped) {
      printf("weights: %d checkpoint tensors map to no graph initializer (not checked):", v->wunmapped);
      for (int i = 0; i < v->wunmapped && i < 64; i++) printf(" %s", v->wunmapped_names[i]);
      printf("%s\n", v->wunmapped > 64 ? " ..." : "");
    }
    total++;
    passed += !wfail;
  }
  if (v->localised || v->loc_note[0]) {
    const loc_result *l = &v->loc;
    if (l->found) {
      printf("first diverging node: '%s' (%s)", l->node, l->op);
      if (l->module[0]) printf(", torch module '%s'", l->module);
      printf(", value '%s': rel norm err %.3g, cosine %.9f, max abs err %.3g\n", l->value, l->m.rel_norm, l->m.cosine,
             l->m.max_abs);
      for (int i = 0; i < l->n_inputs; i++) {
        const loc_input *in = &l->inputs[i];
        printf("  input '%s'", in->name);
        if (in->module[0]) printf(" [%s]", in->module);
        if (in->known)
          printf(" (%s): max abs err %.3g, rel norm err %.3g, cosine %.9f%s\n", in->source, in->m.max_abs,
                 in->m.rel_norm, in->m.cosine, in->m.rel_norm > 1e-4 ? "  <- differs" : "");
        else printf(": %s\n", in->source[0] ? in->source : "no reference to compare with");
      }
    }
    if (v->loc_note[0]) printf("localisation: %s\n", v->loc_note);
  }
  printf("timing: forward %.2f s%s", v->t_forward, v->opt.grad ? "" : "");
  if (v->opt.grad) printf(", gradients %.2f s", v->t_grad);
  printf(", total %.2f s\n", v->t_total);
  printf("verify: %s (%d of %d checks pass)\n", passed == total ? "PASS" : "FAIL", passed, total);
}

static json_t *metrics_json(const vresult *r) {
  if (!r->compared) return json_null();
  const parity_metrics *m = &r->m;
  return json_pack("{s:I,s:f,s:f,s:f,s:f,s:{s:f,s:f,s:f},s:f,s:I,s:I}", "elements", (json_int_t)m->n, "max_abs_err",
                   m->max_abs, "max_rel_err", m->max_rel, "cosine", m->cosine, "rel_norm_err", m->rel_norm, "ulp",
                   "median", m->ulp_median, "p99", m->ulp_p99, "max", m->ulp_max, "frac_over_tol", m->frac_over,
                   "n_over_tol", (json_int_t)m->n_over, "n_nonfinite_mismatch", (json_int_t)m->n_nonfinite);
}

static json_t *tol_json(const parity_tol *t) {
  return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}", "rtol", t->rtol, "atol", t->atol, "min_cosine", t->min_cosine,
                   "max_rel_norm", t->max_rel_norm, "reference_noise", t->noise, "noise_multiple", t->noise_mult);
}

static json_t *result_json(const vresult *r) {
  json_t *j = json_pack("{s:s,s:s,s:s,s:o,s:o}", "name", r->name, "status", status_name(r->status), "shape", r->shape,
                        "tolerance", tol_json(&r->tol), "metrics", metrics_json(r));
  if (r->status != V_PASS) json_object_set_new(j, "reason", json_string(r->why));
  if (r->init[0]) json_object_set_new(j, "initializer", json_string(r->init));
  if (r->kind == V_PARAM_GRAD || r->kind == V_GROUP) json_object_set_new(j, "module", json_string(r->group));
  if (r->kind == V_GROUP) json_object_set_new(j, "parameters", json_integer(r->members));
  if (r->precision) {
    json_t *p = json_pack("{s:s,s:f}", "precision", r->precision, "mean_rel_err", r->mean_rel);
    if (r->topk_rows)
      json_object_update_new(p, json_pack("{s:I,s:f,s:f,s:f}", "rows", (json_int_t)r->topk_rows, "top1_agreement",
                                          r->top1, "top5_agreement", r->top5, "min_top1", r->tol.min_top1));
    json_object_set_new(j, "precision", p);
  }
  return j;
}

static int all_pass(const vctx *v) {
  for (int i = 0; i < v->n_res; i++)
    if (v->res[i].status != V_PASS) return 0;
  for (int i = 0; i < v->n_wres; i++)
    if (v->wres[i].status != V_PASS) return 0;
  return 1;
}

int verify_write_json(vctx *v) {
  json_t *o = json_object();
  json_object_set_new(o, "model", json_string(v->model_name));
  json_object_set_new(o, "onnx", json_string(v->onnx));
  json_object_set_new(o, "reference", json_string(v->reference));
  json_object_set_new(o, "backend", json_string(v->opt.backend));
  json_object_set_new(o, "precision", json_string(v->opt.precision ? v->opt.precision : "fp32"));
  json_object_set_new(o, "verdict", json_string(all_pass(v) ? "pass" : "fail"));
  json_t *outs = json_array(), *ig = json_array(), *pg = json_array(), *groups = json_array();
  for (int i = 0; i < v->n_res; i++) {
    const vresult *r = &v->res[i];
    if (r->kind == V_LAYERS) {
      json_object_set_new(o, "layers", result_json(r));
      continue;
    }
    json_array_append_new(r->kind == V_OUTPUT ? outs : r->kind == V_INPUT_GRAD ? ig : r->kind == V_PARAM_GRAD ? pg : groups,
                          result_json(r));
  }
  json_object_set_new(o, "outputs", outs);
  if (v->opt.grad) {
    json_t *unmapped = json_array();
    for (int i = 0; i < v->n_res; i++)
      if (v->res[i].kind == V_PARAM_GRAD && v->res[i].status == V_ERROR)
        json_array_append_new(unmapped, json_string(v->res[i].name));
    json_object_set_new(o, "gradients", json_pack("{s:o,s:o,s:o,s:o}", "inputs", ig, "groups", groups, "params", pg,
                                                   "unmapped", unmapped));
  } else {
    json_decref(ig), json_decref(pg), json_decref(groups);
  }
  if (v->opt.ckpt) {
    json_t *w = json_array();
    for (int i = 0; i < v->n_wres; i++) json_array_append_new(w, result_json(&v->wres[i]));
    json_t *un = json_array();
    for (int i = 0; i < v->wunmapped && i < 64; i++) json_array_append_new(un, json_string(v->wunmapped_names[i]));
    json_object_set_new(o, "weights", json_pack("{s:s,s:i,s:i,s:o,s:o}", "checkpoint", v->opt.ckpt, "checked",
                                                 v->wchecked, "n_unmapped", v->wunmapped, "unmapped", un, "tensors", w));
  }
  if (v->localised) {
    const loc_result *l = &v->loc;
    json_t *loc = json_pack("{s:b,s:i}", "found", l->found, "compared", l->compared);
    if (l->found) {
      vresult tmp = {.compared = 1, .m = l->m};
      json_object_set_new(loc, "node", json_string(l->node));
      json_object_set_new(loc, "op", json_string(l->op));
      json_object_set_new(loc, "value", json_string(l->value));
      json_object_set_new(loc, "module", l->module[0] ? json_string(l->module) : json_null());
      json_object_set_new(loc, "metrics", metrics_json(&tmp));
      json_t *ins = json_array();
      for (int i = 0; i < l->n_inputs; i++) {
        vresult t2 = {.compared = l->inputs[i].known, .m = l->inputs[i].m};
        json_array_append_new(ins, json_pack("{s:s,s:s,s:o,s:o}", "name", l->inputs[i].name, "compared_with",
                                             l->inputs[i].source, "module",
                                             l->inputs[i].module[0] ? json_string(l->inputs[i].module) : json_null(),
                                             "metrics", metrics_json(&t2)));
      }
      json_object_set_new(loc, "inputs", ins);
    }
    json_object_set_new(o, "localisation", loc);
  }
  if (v->loc_note[0]) json_object_set_new(o, "localisation_note", json_string(v->loc_note));
  json_object_set_new(o, "time_s", json_pack("{s:f,s:f,s:f}", "forward", v->t_forward, "gradients", v->t_grad, "total",
                                             v->t_total));
  int rc = wt_write_json(v->opt.json, o, JSON_INDENT(2) | JSON_PRESERVE_ORDER, &v->d);
  json_decref(o);
  return rc;
}

/* The failure message of a JUnit case: the reason plus the metrics. */
static void case_message(const vresult *r, char *out, size_t n) {
  if (!r->compared) snprintf(out, n, "%s", r->why);
  else
    snprintf(out, n, "%s; max_abs_err=%.3g max_rel_err=%.3g cosine=%.9f rel_norm_err=%.3g ulp_p99=%.0f frac_over_tol=%.4g",
             r->why, r->m.max_abs, r->m.max_rel, r->m.cosine, r->m.rel_norm, r->m.ulp_p99, r->m.frac_over);
}

int verify_write_junit(vctx *v) {
  int n = 0;
  junit_case *cases = calloc((size_t)v->n_res + 2, sizeof *cases);
  char (*msg)[1024] = calloc((size_t)v->n_res + 2, sizeof *msg);
  char (*names)[600] = calloc((size_t)v->n_res + 2, sizeof *names);
  if (!cases || !msg || !names) {
    free(cases), free(msg), free(names);
    mg_error(&v->d, OOM, NULL, NULL, "no memory for the JUnit report");
    return -1;
  }
  char details[4096] = "";
  if (v->loc.found) { /* the culprit, on the failing outputs */
    const loc_result *l = &v->loc;
    size_t k = (size_t)snprintf(details, sizeof details, "first diverging node: %s (%s)%s%s%s: rel norm err %.3g, cosine %.9f\n",
                                l->node, l->op, l->module[0] ? ", torch module '" : "", l->module, l->module[0] ? "'" : "",
                                l->m.rel_norm, l->m.cosine);
    for (int i = 0; i < l->n_inputs && k < sizeof details; i++)
      k += (size_t)snprintf(details + k, sizeof details - k, "  input %s (%s): %s%.3g\n", l->inputs[i].name,
                            l->inputs[i].source[0] ? l->inputs[i].source : "no reference",
                            l->inputs[i].known ? "rel norm err " : "", l->inputs[i].known ? l->inputs[i].m.rel_norm : 0.0);
  }
  char suite[600];
  snprintf(suite, sizeof suite, "migc verify %s", v->model_name);
  for (int i = 0; i < v->n_res; i++) {
    const vresult *r = &v->res[i];
    if (r->kind == V_PARAM_GRAD) continue; /* one testcase per gradient group */
    junit_case *c = &cases[n];
    snprintf(names[n], sizeof names[n], "%s %s",
             r->kind == V_OUTPUT ? "output" : r->kind == V_LAYERS ? "layers" : r->kind == V_INPUT_GRAD ? "grad input" : "grad module",
             r->name);
    c->name = names[n];
    c->classname = r->kind == V_OUTPUT || r->kind == V_LAYERS ? "verify.forward" : "verify.gradients";
    c->status = r->status == V_PASS ? JUNIT_PASS : r->status == V_FAIL ? JUNIT_FAILURE : JUNIT_ERROR;
    c->type = r->status == V_ERROR ? "unmapped" : "parity";
    case_message(r, msg[n], sizeof msg[n]);
    c->message = c->status == JUNIT_PASS ? NULL : msg[n];
    c->time = r->kind == V_OUTPUT ? v->t_forward : 0;
    if ((r->kind == V_OUTPUT || r->kind == V_LAYERS) && c->status != JUNIT_PASS && details[0]) c->details = details;
    n++;
  }
  if (v->opt.ckpt) {
    int bad = 0;
    for (int i = 0; i < v->n_wres; i++) bad += v->wres[i].status != V_PASS;
    junit_case *c = &cases[n];
    snprintf(names[n], sizeof names[n], "checkpoint %s", v->opt.ckpt);
    c->name = names[n];
    c->classname = "verify.weights";
    c->status = bad ? JUNIT_FAILURE : JUNIT_PASS;
    c->type = "weights";
    snprintf(msg[n], sizeof msg[n], "%d of %d checkpoint tensors differ from the graph", bad, v->wchecked);
    c->message = bad ? msg[n] : NULL;
    n++;
  }
  int rc = junit_write(v->opt.junit, suite, cases, n, v->t_total, &v->d);
  free(cases), free(msg), free(names);
  return rc;
}
