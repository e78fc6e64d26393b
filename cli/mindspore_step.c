/* The MindSpore emitter as convert runs it and as coverage checks it: parameters
 * named as the checkpoint names them (the weights' binding and naming plan). */
#include "mindspore_step.h"
#include "mindspore_unfold.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

typedef struct {
  const wt_binding *b;
  int nb;
  const wt_plan_entry *plan;
  int n_plan;
} ms_tags;

/* ms_param_tag_fn: an initializer's checkpoint tag, through its binding to the
 * weights and the naming plan; what the script cannot hold as it is says why. */
static const char *ms_param_tag(void *ctx, const mg_value *init, int *transposed, const char **why) {
  const ms_tags *t = ctx;
  const wt_binding *b = NULL;
  for (int i = 0; i < t->nb && !b; i++)
    if (!strcmp(t->b[i].init->name, init->name)) b = &t->b[i];
  if (!b || b->kind == WT_UNBOUND || b->kind == WT_CONSTANT) return NULL;
  switch (b->kind) {
  case WT_BY_NAME: case WT_BY_VALUE: case WT_BY_SCOPE: break;
  case WT_BY_TRANSPOSE: *transposed = 1; break;
  case WT_BN_FOLD_WEIGHT: case WT_BN_FOLD_BIAS:
    *why = "the export folded a BatchNorm into this Conv, and the source's Conv and BatchNorm tensors "
           "cannot be read in the Conv's dtype to unfold it";
    return NULL;
  case WT_RNN_GATES: *why = "the export reorders this recurrent layer's gates"; return NULL;
  default: *why = "the export computed this constant from a parameter"; return NULL;
  }
  for (int i = 0; i < t->n_plan; i++)
    if (t->plan[i].src == b->src) {
      if (t->plan[i].unsqueeze_axis >= 0) {
        *why = "the checkpoint changes this parameter's layout (Conv1d as Conv2d)";
        return NULL;
      }
      return t->plan[i].ms_name;
    }
  return NULL;
}

int cli_emit_mindspore(mg_model *copy, const mg_model *m, const wt_source *src, const wt_binding *b, int nb,
                       const wt_rules *rules, const rule_set *rs, const char *dir, ms_report *r, mg_diags *d) {
  wt_type_hint *hints = NULL;
  wt_plan_entry *plan = NULL;
  int n_hints = 0, n_plan = 0;
  int rc = wt_graph_types(src, m, b, nb, &hints, &n_hints, d) || wt_plan(src, rules, hints, n_hints, &plan, &n_plan, d);
  wt_binding *unfolded = NULL;
  int n_unfolded_b = 0, n_bn = 0;
  rc = rc || ms_unfold_batchnorm(copy, src, b, nb, &unfolded, &n_unfolded_b, &n_bn, d);
  if (!rc) {
    ms_tags t = {unfolded, n_unfolded_b, plan, n_plan};
    rc = emit_mindspore(copy, rs, ms_param_tag, &t, dir, r, d);
    r->n_bn_unfolded = n_bn;
  }
  mg_free(unfolded);
  wt_plan_free(plan, n_plan);
  mg_free(hints);
  return rc ? -1 : 0;
}

int cli_mindspore_check(mg_model *m, const rule_set *rs, mg_diags *d) {
  wt_source *src = NULL;
  wt_rules *rules = NULL;
  wt_binding *b = NULL;
  int nb = 0, rc = -1;
  char builtin[PATH_MAX];
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  mg_model *copy = mg_model_clone(m);
  ms_report r;
  if (copy && !onnx_weights_open(m, &src, d) && !wt_bind(src, m, &b, &nb, d) && (rules = wt_rules_new()) &&
      !wt_rules_load(rules, builtin, d) && !cli_emit_mindspore(copy, m, src, b, nb, rules, rs, NULL, &r, d))
    rc = r.n_unsupported;
  mg_model_free(copy);
  mg_free(b);
  wt_rules_free(rules);
  wt_close(src);
  return rc;
}
