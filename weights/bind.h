/* Binding a graph's initializers to the tensors of a weights source.
 *
 * Names preserved by TrainingMode.PRESERVE exports bind directly. Default eval
 * exports fold BatchNorm into Conv and rename initializers (onnx::Conv_193); those
 * bind by value: W*g/sqrt(v+eps) and (b-m)*g/sqrt(v+eps)+beta are rebuilt from the
 * source and compared within a tolerance. Transposed 2-D weights (MatMul exports)
 * bind too. An initializer that cannot be bound is reported, never guessed. */
#ifndef MG_WEIGHTS_BIND_H
#define MG_WEIGHTS_BIND_H
#include "rename.h"

typedef enum {
  WT_UNBOUND,
  WT_BY_NAME,       /* same name and equal values */
  WT_BY_VALUE,      /* another name, equal values */
  WT_BY_TRANSPOSE,  /* equal to the source's transpose */
  WT_BN_FOLD_WEIGHT,/* conv weight with a BatchNorm folded in */
  WT_BN_FOLD_BIAS,  /* conv bias with a BatchNorm folded in */
  WT_CONSTANT       /* not a parameter: an integer or shape constant */
} wt_bind_kind;

typedef struct {
  const mg_value *init;
  wt_bind_kind kind;
  const wt_tensor *src;       /* the weight (or the conv bias for folded biases; may be NULL) */
  const wt_tensor *bn[4];     /* folds: gamma, beta, running_mean, running_var */
  double eps;                 /* folds: the BatchNorm epsilon that reproduces the values */
  double max_err;             /* largest absolute difference found */
} wt_binding;

const char *wt_bind_kind_name(wt_bind_kind k);

/* Binds every initializer of m's top graph that a node reads. *out has one entry
 * per such initializer. 0 on success (unbound initializers are not errors here). */
int wt_bind(const wt_source *s, const mg_model *m, wt_binding **out, int *n_out, mg_diags *d);

/* Module types that the graph shows for source tensors (BatchNormalization ->
 * BatchNorm1d/2d/3d by rank, LayerNormalization -> LayerNorm, Gather data ->
 * Embedding, PRelu slope -> PReLU, rank-3 Conv weight -> Conv1d, ...). *out is
 * mg_malloc'd; names point into s and m. */
int wt_graph_types(const wt_source *s, const mg_model *m, const wt_binding *b, int nb,
                   wt_type_hint **out, int *n_out, mg_diags *d);
#endif
