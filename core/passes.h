/* Graph passes and the verifier that runs between them. Each pass takes the model,
 * keeps every invariant listed in ir.h, and returns the number of nodes it
 * changed (or -1 on allocation failure). */
#ifndef MG_PASSES_H
#define MG_PASSES_H
#include "infer.h"

/* Nodes whose outputs all became constants during inference are removed; their
 * outputs turn into MG_V_CONST values. */
int pass_fold_constants(mg_model *m);
/* Identity nodes (and inference-mode Dropout without a used mask) are bypassed,
 * except where the output is a graph output, whose name must survive. */
int pass_eliminate_identity(mg_model *m);
/* auto_pad SAME_UPPER / SAME_LOWER / VALID of Conv, ConvTranspose, ConvInteger,
 * QLinearConv and the pools becomes the explicit pads it stands for (with auto_pad
 * NOTSET; ConvTranspose's output_shape, then implied, is dropped), computed by
 * core/window_geom.h, wherever the spatial input dims are static; elsewhere
 * auto_pad stays, for the stages to resolve at run time. */
int pass_resolve_auto_pad(mg_model *m);
/* Removes nodes whose outputs reach no graph output, and constants nobody reads. */
int pass_dce(mg_model *m);
/* Recomputes n_uses of every value. */
void ir_count_uses(mg_model *m);

/* Checks the invariants of ir.h; records a diagnostic per violation (code GRAPH,
 * message naming the broken invariant) and returns -1 if any. */
int ir_verify(mg_model *m, mg_diags *d);

/* The whole preparation pipeline every command runs after import, with ir_verify
 * between the steps in debug builds: pass_eliminate_identity, ir_infer_shapes,
 * pass_resolve_auto_pad, pass_fold_constants, pass_dce. */
int mg_prepare(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d);

/* mg_prepare with a step between Identity elimination and shape inference:
 * before_fold(m, ctx, d) sees every initializer as imported, still read by the
 * nodes that read it (weight binding puts a .pth's tensors into the graph there,
 * so that constant folding computes with them). A non-zero return stops
 * preparation with that status. */
int mg_prepare_with(mg_model *m, const mg_shape_override *ov, int n_ov,
                    int (*before_fold)(mg_model *m, void *ctx, mg_diags *d), void *ctx, mg_diags *d);
#endif
