/* Reverse-mode differentiation over the IR, on top of the reference interpreter.
 *
 * grad_run() runs the forward pass with the interpreter (keeping every value the
 * backward pass needs), seeds each graph output with its cotangent, and walks the
 * nodes backwards applying each op's vector-Jacobian product, in double. The
 * result is the gradient of sum_i <output_i, cotangent_i> with respect to every
 * floating-point graph input and every floating-point initializer that reaches an
 * output. An op on the path without a VJP (or with an attribute value its VJP does
 * not handle) is a diagnostic naming the node and op: never a zero gradient. */
#ifndef MG_AUTODIFF_H
#define MG_AUTODIFF_H
#include "interp.h"

typedef struct {
  mg_array *inputs;     /* per graph input (graph order); dtype float64; empty (data NULL)
                           for non-float inputs */
  int n_inputs;
  mg_array *params;     /* per initializer reaching an output; name = initializer name;
                           dtype float64, shape of the initializer */
  int n_params;
  mg_array *outputs;    /* the forward outputs (graph order), as interp_run gives them */
  int n_outputs;
} grad_result;

/* Precondition: mg_prepare(m) succeeded. inputs as for interp_run; cotangents[i]
 * is matched to graph output i by name (any float dtype, the output's shape); an
 * output without one gets a zero cotangent. Returns 0 and fills *r (free with
 * grad_result_free), or -1 with diagnostics. */
int grad_run(mg_model *m, const mg_array *inputs, int n_inputs, const mg_array *cotangents, int n_cot,
             grad_result *r, mg_diags *d);
void grad_result_free(grad_result *r);

/* Whether op has a VJP (for reports and the coverage of verify --grad). */
int grad_supports(mg_op op);
#endif
