/* Placeholder until this family's kernels land: every op reports that the
 * interpreter does not implement it yet (the conformance runner counts a skip). */
#include "interp_internal.h"

int interp_tensor(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                interp_frame *frame) {
  (void)in, (void)out, (void)frame;
  mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "the interpreter does not implement %s yet",
           n->op_type);
  return -1;
}
