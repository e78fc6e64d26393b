/* Renaming a torch state_dict to MindSpore parameter names, from rules files.
 *
 * Built-in rules (rules/torch_mindspore.xml) give, per torch module type, the
 * MindSpore name and layout change of each parameter. A user rules file (--rules)
 * may add module types, replace built-in ones, and add regex renames
 * (<rename match="REGEX" replace="TEXT with \1"/>) and exact overrides
 * (<override torch="NAME" ms="NAME"/> or drop="true"), applied after the module
 * rules, in file order. */
#ifndef MG_WEIGHTS_RENAME_H
#define MG_WEIGHTS_RENAME_H
#include "weights.h"

typedef struct wt_rules wt_rules;

/* A new, empty rule set; NULL on allocation failure. */
wt_rules *wt_rules_new(void);
/* Loads one rules file into r (later files override earlier module rules of the
 * same type). Errors name file:line and the reason. 0 on success. */
int wt_rules_load(wt_rules *r, const char *path, mg_diags *d);
void wt_rules_free(wt_rules *r);

/* Where a tensor's module type came from. */
typedef enum { WT_TYPE_NONE, WT_TYPE_GRAPH, WT_TYPE_PATTERN } wt_type_source;

typedef struct {
  const wt_tensor *src;
  char *ms_name;              /* NULL when dropped (owned by the plan) */
  const char *module_type;    /* "BatchNorm2d", ... or NULL when none applies */
  wt_type_source type_from;
  int unsqueeze_axis;         /* -1: none */
  int renamed;                /* ms_name differs from the source name */
  const char *rule;           /* "module", "regex", "override" or NULL */
} wt_plan_entry;

/* Module types of a graph's initializers, from the ops that consume them; built by
 * wt_graph_types (bind.c) and passed to wt_plan. */
typedef struct {
  const char *tensor;         /* source tensor name */
  const char *module_type;
} wt_type_hint;

/* Plans the MindSpore name of every tensor of s. hints (may be NULL) give module
 * types known from the graph, by source tensor name; other modules are recognised
 * by their parameter names and shapes (a sibling running_mean means BatchNorm).
 * Two tensors mapping to one name is an error. */
int wt_plan(const wt_source *s, const wt_rules *r, const wt_type_hint *hints, int n_hints,
            wt_plan_entry **out, int *n_out, mg_diags *d);
void wt_plan_free(wt_plan_entry *p, int n);
#endif
