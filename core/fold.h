/* Evaluation of small constant subgraphs: the shape arithmetic (Shape, Gather,
 * Concat, Reshape, Cast, arithmetic, Range, ...) that exporters emit. It is exact
 * for integers (int64 throughout) and uses double for floats. It is not the
 * reference interpreter (verify/): it covers only what shape arithmetic needs. */
#ifndef MG_FOLD_H
#define MG_FOLD_H
#include "ir.h"

enum { MG_FOLD_MAX = 4096 }; /* outputs larger than this are left to run time */

/* Precondition: every non-NULL input of n has data, and n's outputs have static
 * shapes and known dtypes. On success the outputs get data (in the model's arena)
 * and 1 is returned; 0 means the op is not foldable here; -1 means out of memory. */
int fold_node(mg_node *n);
/* Whether fold_node can evaluate this op at all. */
int fold_supports(mg_op op);
#endif
