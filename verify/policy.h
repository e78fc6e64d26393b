/* Parity policy files: per-model, per-op, per-output and per-parameter tolerances
 * for `migc verify`, read with libxml2. The schema is in docs/parity.md:
 *
 *   <parity-policy>
 *     <forward rtol="1e-4" atol="1e-5" cosine="0.99999"/>     defaults for outputs
 *     <grad cosine="0.9999" rel-norm="1e-3"/>                 defaults for gradients
 *     <op type="Softmax" atol="1e-6"/>                        outputs of this op
 *     <model match="resnet*">                                 fnmatch on the model name
 *       <forward .../> <grad .../> <op .../>
 *       <output name="logits" .../>                           one graph output
 *       <param match="fc.*" .../>                             parameter gradients
 *     </model>
 *     <forward precision="bf16" cosine="0.999" top1="0.99"/>   only at that precision
 *   </parity-policy>
 *
 * A more specific rule wins (forward/grad < op < output/param), and within one
 * level a <model> rule wins over a global one, then the later one in the file.
 * Unknown elements or attributes and unparsable numbers are errors with file:line. */
#ifndef MG_POLICY_H
#define MG_POLICY_H
#include "parity.h"

typedef struct parity_policy parity_policy;

/* Loads path; 0 or -1 with diagnostics "path:line: ...". */
int policy_load(const char *path, parity_policy **out, mg_diags *d);
void policy_free(parity_policy *p);

/* Tolerance for a forward value of `model` produced by an op of type `op` (may be
 * NULL) named `output` (may be NULL); p may be NULL (defaults). */
parity_tol policy_forward(const parity_policy *p, const char *model, const char *op, const char *output);
/* The same for `migc verify --precision P` (NULL or "fp32": policy_forward). At
 * fp16 and bf16 the defaults are issue 17's budget: cosine >= 0.999 and top-1
 * agreement >= 99%, no elementwise or relative-norm check (16-bit weights move
 * every element); a rule with precision= applies only at that precision, one
 * without it at every precision. */
parity_tol policy_forward_at(const parity_policy *p, const char *precision, const char *model, const char *op,
                             const char *output);
/* Tolerance for the gradient of parameter (or input) `name` of `model`. */
parity_tol policy_grad(const parity_policy *p, const char *model, const char *name);
#endif
