/* The MindSpore script's fallback for a node it cannot express (no rule, or a rule
 * whose arguments cannot be evaluated): an ops.Custom AOT kernel that is the CPU
 * target's own code for that node (facts.md section 5).
 *
 *   one-node model   the node, its run-time inputs as graph inputs, its constant
 *                    inputs kept as constants
 *   CPU check        cg_check_model on it: the CPU emitter must take it whole
 *   C project        emit_c into DIR/custom/<ident>/ (weights embedded, no runner)
 *   AOT wrapper      <ident>/mc_<ident>_aot.c: int migc_<ident>(nparam, params,
 *                    ndims, shapes, dtypes, stream, extra), which checks every
 *                    parameter against the generated shapes and dtypes before it
 *                    runs the model
 *   Makefile         DIR/custom/Makefile builds libmigc_custom.so from all of them
 *
 * net.py creates each op in __init__ and calls it in construct, the library found
 * beside net.py whatever the working directory. */
#ifndef MG_CG_MS_CUSTOM_H
#define MG_CG_MS_CUSTOM_H
#include "mindspore.h"
#include "text.h"

typedef struct ms_custom ms_custom;

/* The fallbacks of one script. dir: net.py's folder (custom/ goes under it), or
 * NULL for a check that decides the same and writes nothing. Diagnostics go to d.
 * NULL on OOM. */
ms_custom *ms_custom_new(const char *dir, mg_diags *d);

/* What the script knows of the graph: the Python name of each value of m's top
 * graph by id (NULL for a constant), and the checkpoint tags of initializers. */
typedef struct {
  const mg_model *m;
  const char *const *pyname;
  ms_param_tag_fn *tag;
  void *tag_ctx;
} ms_custom_graph;

/* Node n of the top graph, which the script cannot express for reason why, as an
 * ops.Custom: on 1, the op's construction (attribute self.custom_<ident>) is
 * appended to init and its call to body, its kernel written (unless a check), and
 * a warning "mindspore: custom-op (cpu kernel): <why>" naming n recorded. 0: it
 * cannot be one, *refusal saying why (a string owned by cu), nothing appended or
 * recorded: a node reading checkpoint parameters (a kernel has none to train), a
 * non-static shape, a dtype with no AOT string, or a node the CPU target refuses.
 * -1: out of memory or an I/O failure (recorded; ms_custom_finish fails too). */
int ms_custom_node(ms_custom *cu, const ms_custom_graph *g, const mg_node *n, const char *why, cg_buf *init,
                   cg_buf *body, const char **refusal);

/* The ops taken so far. */
int ms_custom_count(const ms_custom *cu);

/* net.py's module-level definitions the calls need (CUSTOM_SO, the library's
 * path), appended to b; nothing when there is no custom op. The script imports os
 * for it. */
void ms_custom_module_text(const ms_custom *cu, cg_buf *b);

/* Writes DIR/custom/Makefile when there is a custom op (and dir was given). 0, or
 * -1 when that or any earlier step failed (the reason recorded on d). */
int ms_custom_finish(ms_custom *cu);

void ms_custom_free(ms_custom *cu);
#endif
