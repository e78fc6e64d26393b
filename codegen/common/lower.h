/* Lowering passes every target runs before it emits: they rewrite the prepared IR
 * into nodes an emitter can take one at a time (codegen/common/lower*.c, all on the
 * rewriter of core/rewrite.h). */
#ifndef MG_CG_LOWER_H
#define MG_CG_LOWER_H
#include "ir.h"

/* The C target's lowering: control flow, gradients and sequences rewritten (below),
 * nodes the interpreter can evaluate on constants folded, BatchNormalization folded
 * into the Conv before it when fold_bn, dead code removed. Counts what it folded in
 * *n_folded and *n_bn_folded. 0, or -1 with a diagnostic. */
int cg_lower(mg_model *m, int fold_bn, int *n_folded, int *n_bn_folded, mg_diags *d);
/* Evaluates node n with the interpreter when every input is a constant (not a
 * random op, outputs of known shape, at most 64 MiB): its outputs get the data and
 * n stays in the graph for the caller to drop. 1 folded, 0 not, -1 out of memory. */
int cg_fold_node(mg_model *m, mg_node *n);
/* Rewrites static sequences and optionals into tensor ops (lower_seq.c) and
 * Gradient nodes into explicit backward ops (lower_grad.c); each adds the nodes it
 * rewrote to *changed and returns 0, or -1 with a diagnostic. */
int cg_lower_sequences(mg_model *m, mg_diags *d, int *changed);
int cg_lower_gradients(mg_model *m, mg_diags *d, int *changed);
/* Inlines If (constant condition, or both branches as a Where) and unrolls Scan
 * with a static length (lower_ctrl.c); same contract. */
int cg_lower_control(mg_model *m, mg_diags *d, int *changed);
#endif
