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
  WT_CONSTANT,      /* not a parameter: an integer or shape constant */
  WT_BY_SCOPE,      /* named by its consumer's torch scope (/layer1/layer1.0/conv1/Conv
                       reads layer1.0.conv1.weight), same shape, values not compared */
  WT_RNN_GATES,     /* an ONNX LSTM/GRU W, R or B: torch's weight_ih_lK / weight_hh_lK
                       (B: bias_ih_lK then src2 = bias_hh_lK) with the gate blocks
                       reordered (LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h) */
  WT_DERIVED        /* every value is one of src's: a constant the exporter computed
                       from that parameter by moving elements (a folded Gather);
                       named, not recomputed */
} wt_bind_kind;

typedef struct {
  const mg_value *init;
  wt_bind_kind kind;
  const wt_tensor *src;       /* the weight (or the conv bias for folded biases; may be NULL) */
  const wt_tensor *bn[4];     /* folds: gamma, beta, running_mean, running_var */
  double eps;                 /* folds: the BatchNorm epsilon that reproduces the values */
  double max_err;             /* largest absolute difference found */
  int by_structure;           /* bound by name or scope and the graph's position, not by
                                 equal values: the source differs from the export (a
                                 fine-tuned .pth with a stale export), or eps was assumed */
  int eps_assumed;            /* folds bound by structure: eps taken from another fold of
                                 the model, or torch's default 1e-5 */
  const wt_tensor *src2;      /* WT_RNN_GATES of a B: bias_hh_lK */
  int gru;                    /* WT_RNN_GATES: 1 for GRU's block order, 0 for LSTM's */
} wt_binding;

const char *wt_bind_kind_name(wt_bind_kind k);

/* The values of source tensor t as doubles, mg_malloc'd (NULL: t is not floating
 * point, or out of memory or a read error, recorded on d). */
double *wt_read_f64(const wt_source *s, const wt_tensor *t, mg_diags *d);

/* Binds every initializer of m's top graph that a node reads. *out has one entry
 * per such initializer. 0 on success (unbound initializers are not errors here).
 *
 * Equal values bind first (by name, by value, transposed, through a folded
 * BatchNorm with the eps that reproduces them). What is left binds by structure:
 * the same name and shape, or the name its consumer's torch scope gives it
 * (Conv weight and bias, Gemm, BatchNorm, LayerNorm, Embedding, PReLU), with a
 * folded BatchNorm found as the one that follows the conv in the source's order;
 * those bindings are marked by_structure, since nothing proves the values belong
 * together except the names. */
int wt_bind(const wt_source *s, const mg_model *m, wt_binding **out, int *n_out, mg_diags *d);

/* Replaces the data of every bound initializer of m by what its binding computes
 * from the source (copied, transposed, or with the BatchNorm folded in, in double,
 * rounded once to the initializer's dtype), so that code generated from m computes
 * with the source's weights. The data lives in m's arena; each binding's max_err
 * becomes the largest difference from the export's data. 0, or -1 recorded. */
int wt_bind_apply(const wt_source *s, mg_model *m, wt_binding *b, int nb, mg_diags *d);

/* Warns about the initializers b[0..nb) left unbound, naming them: one warning
 * each when there are at most four, else one warning naming the first four and
 * counting the rest. `what` ends the message ("the export's value is used"). */
void wt_warn_unbound(const wt_binding *b, int nb, const char *what, mg_diags *d);

/* Module types that the graph shows for source tensors (BatchNormalization ->
 * BatchNorm1d/2d/3d by rank, LayerNormalization -> LayerNorm, Gather data ->
 * Embedding, PRelu slope -> PReLU, rank-3 Conv weight -> Conv1d, ...). *out is
 * mg_malloc'd; names point into s and m. */
int wt_graph_types(const wt_source *s, const mg_model *m, const wt_binding *b, int nb,
                   wt_type_hint **out, int *n_out, mg_diags *d);
#endif
