/* The MindSpore target (issue 12): a network script that loads the checkpoint.
 *
 *   map_lower        every <decompose> of rules/mindspore.xml rewritten (mapping/)
 *   map_node_plan    each node's call with its arguments evaluated
 *   cells            the Cell tree, one leaf per parameterised node, at the path
 *                    its checkpoint tags give (the torch module tree)
 *   write project    OUTDIR/mindspore/net.py (class Net(nn.Cell)) and run.py
 *
 * Precondition: m is a model of its own (mg_model_clone), prepared; the emitter
 * rewrites it. */
#ifndef MG_CG_MINDSPORE_H
#define MG_CG_MINDSPORE_H
#include "mapping.h"

/* The checkpoint tag of graph initializer init: its MindSpore parameter name, or
 * NULL when it is a constant of the export rather than a parameter. *transposed is
 * set to 1 when the initializer is the transpose of that (2-D) parameter, which
 * keeps torch's layout in the checkpoint. *why is set (and NULL returned) when the
 * initializer stands for parameters the script cannot hold as they are. */
typedef const char *ms_param_tag_fn(void *ctx, const mg_value *init, int *transposed, const char **why);

typedef struct {
  int n_nodes;        /* statements in construct */
  int n_cells;        /* leaf cells (parameterised layers) */
  int n_params;       /* parameters, each a tag of the checkpoint */
  int n_unsupported;  /* nodes the script cannot compute: each an unsupported diagnostic */
  int n_folded;       /* nodes computed at conversion time (constants only): no statement */
  int n_bn_unfolded;  /* BatchNorms the export had folded into a Conv, made layers again
                         (set by the caller that unfolds them) */
  int n_custom;       /* nodes computed by an ops.Custom CPU kernel (emit_custom.h): each a
                         warning "mindspore: custom-op (cpu kernel): ..." */
} ms_report;

/* Writes dir/net.py and dir/run.py for m (dir NULL: writes nothing, a check). A node with no MindSpore call, or whose
 * arguments or parameters cannot be expressed, is an ops.Custom call to the CPU
 * target's kernel for it when it reads no parameter and the CPU target takes it
 * (dir/custom/, emit_custom.h); otherwise an unsupported diagnostic naming it, and
 * its statement raises NotImplementedError with the same reason, so the script
 * never computes something else in its place. Returns 0 when the files
 * were written (check r->n_unsupported), -1 on OOM or I/O failure. */
int emit_mindspore(mg_model *m, const rule_set *rs, ms_param_tag_fn *tag, void *tag_ctx, const char *dir,
                   ms_report *r, mg_diags *d);
#endif
