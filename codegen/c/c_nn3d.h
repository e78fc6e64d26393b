/* The N-d emitters of c_nn3d.c that c_nn.c hands nodes to: Conv/ConvTranspose over
 * 3 or more spatial dims, and pools it does not cover (3+ spatial dims, MaxPool of
 * other dtypes or with Indices). Each follows the cg_emit_* contract of cg.h. */
#ifndef MG_C_NN3D_H
#define MG_C_NN3D_H
#include "cg.h"

enum { ND_POOL_MAX, ND_POOL_AVG, ND_POOL_LP };

int nd_emit_conv(cg_ctx *c, const mg_node *n);
int nd_emit_conv_transpose(cg_ctx *c, const mg_node *n);
/* kind: ND_POOL_* */
int nd_emit_pool(cg_ctx *c, const mg_node *n, int kind);
#endif
