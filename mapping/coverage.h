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

typedef struct {
  const char *model;
  const char *error;        /* the model could not be read: the first diagnostic */
  int n_nodes;
  int converted[MAP_TARGET_COUNT]; /* supported or decomposed nodes */
  int prepare_failed;       /* shape inference or a pass recorded errors */
  cov_op *ops;
  int n_ops;
  mg_arena arena;
} cov_model;

/* Imports and analyses one model; never fails on unsupported ops (they are the
 * point). Returns 0, or -1 when the model cannot be read (cm->error says why). The
 * rule sets are indexed by target; rs[MAP_TARGET_CPU] is unused. */
int coverage_analyze(const char *path, rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d);
/* The same with input shapes fixed as `migc convert --input-shape` fixes them. */
int coverage_analyze_shaped(const char *path, const mg_shape_override *ov, int n_ov,
                            rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d);
/* The same over an imported model that has not been prepared yet: it runs
 * mg_prepare (with the shape overrides) on m, which the caller keeps and frees.
 * Node names are copied, so cm outlives m. */
int coverage_analyze_model(mg_model *m, const char *path, const mg_shape_override *ov, int n_ov,
                           rule_set *const rs[MAP_TARGET_COUNT], cov_model *cm, mg_diags *d);
void coverage_free(cov_model *cm);
/* Converted rate (0..1) of target t. */
double coverage_rate(const cov_model *cm, int t);
#endif
