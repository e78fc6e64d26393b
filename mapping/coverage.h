/* The coverage analysis of one model: every node mapped for every target, grouped
 * by op type, with converted rates. cli/cmd_coverage.c formats it. */
#ifndef MG_COVERAGE_H
#define MG_COVERAGE_H
#include "infer.h"
#include "mapping.h"

typedef struct {
  const char *op;           /* op type as in the model ("Conv", "com.example::MyOp") */
  int count;
  map_status status[MAP_TARGET_COUNT];  /* the worst over its nodes */
  const char *reason[MAP_TARGET_COUNT]; /* the detail of that worst node */
  const char **nodes;       /* node names */
} cov_op;

/* One node of the model as it was read (synthetic normalisation nodes excluded). */
typedef struct {
  const char *name;
  int op;                   /* index into cov_model.ops */
  int folded;               /* preparation computed it away */
  map_status status[MAP_TARGET_COUNT];
  const char *reason[MAP_TARGET_COUNT];
} cov_node;

typedef struct {
  const char *model;
  const char *error;        /* the model could not be read: the first diagnostic */
  int n_nodes;
  int converted[MAP_TARGET_COUNT]; /* supported or decomposed nodes */
  int prepare_failed;       /* shape inference or a pass recorded errors */
  cov_op *ops;
  int n_ops;
  cov_node *nodes;          /* n_nodes of them, in model order */
  struct mg_node **orig;    /* the model's nodes while it is being analysed */
  const char **body_names;  /* names of nodes inside subgraphs ... */
  int *body_owner;          /* ... and the index of the top-level node holding each */
  int n_body;
  mg_arena arena;
} cov_model;

/* The CPU target's own check: the C emitter run on the prepared model without
 * writing anything (codegen's cg_check_model), recording one unsupported
 * diagnostic per node it cannot take. It may rewrite m. */
typedef int (*cov_cpu_check)(mg_model *m, mg_diags *d);
/* A rules target's emitter check: the nodes it refuses, as unsupported diagnostics. */
typedef int (*cov_rules_check)(mg_model *m, const rule_set *rs, mg_diags *d);

/* The analysis in steps, for a caller that also converts the model:
 *   coverage_begin     before mg_prepare: records the model's own nodes;
 *   coverage_map       after mg_prepare: statuses of the rule-driven targets
 *                      (and which nodes preparation folded);
 *   coverage_cpu       after the C emitter ran on m: the CPU statuses from its
 *                      unsupported diagnostics d->items[first..] (a node is
 *                      unsupported exactly when the emitter said so, naming it or
 *                      a node in one of its subgraphs);
 *   coverage_end       the per-op summary and converted counts.
 * Each returns 0, or -1 on OOM (cm->error set). */
int coverage_begin(cov_model *cm, mg_model *m, const char *path);
int coverage_map(cov_model *cm, mg_model *m, rule_set *const rs[MAP_TARGET_COUNT]);
int coverage_cpu(cov_model *cm, const mg_diags *d, size_t first);
/* After a rules target's emitter ran (the MindSpore one): the nodes it reported
 * in d->items[first..] (messages "mindspore: ...") take its status and reason;
 * the others keep the rules' verdict, except that a node the rules could not take
 * and the emitter did not refuse is converted (the emitter computed it at
 * conversion time from constants). */
int coverage_emitter(cov_model *cm, int target, const mg_diags *d, size_t first);
/* Instead of coverage_cpu when the emitter failed as a whole (no C written):
 * every node not folded is unsupported, with the first error as the reason. */
int coverage_cpu_failed(cov_model *cm, const mg_diags *d, size_t first);
int coverage_end(cov_model *cm);

/* Imports and analyses one model; never fails on unsupported ops (they are the
 * point). Returns 0, or -1 when the model cannot be read (cm->error says why). The
 * rule sets are indexed by target; rs[MAP_TARGET_CPU] is unused. cpu_check NULL:
 * the CPU target is reported as not checked (dynamic-shape, "not checked").
 * ms_check (may be NULL: the rules alone decide) is the MindSpore emitter's check,
 * run on the prepared model before the CPU check rewrites it; the nodes it refuses
 * take its reason (coverage_emitter). asc_check, likewise, is the Ascend emitter's
 * (its host fallbacks and the nodes it refuses), on a copy of the prepared model. */
int coverage_analyze(const char *path, const mg_shape_override *ov, int n_ov, rule_set *const rs[MAP_TARGET_COUNT],
                     cov_cpu_check cpu_check, cov_rules_check ms_check, cov_rules_check asc_check, cov_model *cm,
                     mg_diags *d);
/* The same over an imported model that has not been prepared yet: it runs
 * mg_prepare (with the shape overrides) on m, which the caller keeps and frees;
 * the CPU check then rewrites m. Node names are copied, so cm outlives m. */
int coverage_analyze_model(mg_model *m, const char *path, const mg_shape_override *ov, int n_ov,
                           rule_set *const rs[MAP_TARGET_COUNT], cov_cpu_check cpu_check, cov_rules_check ms_check,
                           cov_rules_check asc_check, cov_model *cm, mg_diags *d);
void coverage_free(cov_model *cm);
/* Converted rate (0..1) of target t. */
double coverage_rate(const cov_model *cm, int t);
#endif
