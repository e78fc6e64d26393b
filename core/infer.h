/* Shape and dtype inference over the canonical IR, with constant propagation.
 *
 * Every op in ops.def has a rule. Dimensions stay symbolic where the model names
 * them (batch, seq). Small integer tensors carry partial values (known ints or
 * symbolic dims) so that the Shape -> Gather -> Concat -> Reshape chains exporters
 * emit give static shapes when the input shape is static. Nodes whose inputs are
 * all constant and whose outputs are small are evaluated (fold.c), so the folding
 * pass can replace them by constants. */
#ifndef MG_INFER_H
#define MG_INFER_H
#include "ir.h"

typedef struct {
  const char *name; /* graph input name */
  mg_shape shape;
} mg_shape_override;

/* Types every value of m. Shapes that cannot be known stay symbolic or unknown;
 * shapes that contradict each other (broadcast, reshape count) are errors recorded
 * on d. Returns 0, or -1 when an error was recorded. */
int ir_infer_shapes(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d);
#endif
