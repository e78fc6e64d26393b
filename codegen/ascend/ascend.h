/* The Ascend target (issue 13): a C99 host program on the CANN aclnn API.
 *
 *   map_lower        every <decompose> of rules/aclnn.xml rewritten (mapping/)
 *   map_node_plan    each node's aclnn call with its arguments evaluated
 *   buffers          graph inputs: a device buffer each; parameters and constants:
 *                    one weights buffer, uploaded once; everything else: one device
 *                    arena planned by liveness (codegen/common/plan.c), a view
 *                    (Reshape: rule fn aclCreateTensor) sharing its input's buffer
 *   write project    OUTDIR/ascend/: model.h, model.c, models.c, main.c (the CPU
 *                    runner), acl_decls.h (the fact table's declarations it uses),
 *                    model.weights, CMakeLists.txt (a real CANN install), Makefile
 *                    (`make emu`: the aclnn emulator, ascend_emu/, copied to emu/)
 *
 * Precondition: m is a model of its own (mg_model_clone), prepared; the emitter
 * rewrites it. */
#ifndef MG_CG_ASCEND_H
#define MG_CG_ASCEND_H
#include "mapping.h"
#include <stddef.h>

typedef struct {
  const char *prefix;         /* C prefix of the API and files (default "model": model.c,
                                 model_init, MODEL_ARENA_BYTES); batched builds give each
                                 model its own; then only <prefix>.{c,h,weights} and the
                                 host fallbacks are written (no runner, no emulator copy) */
} asc_options;

typedef struct {
  int n_calls;        /* aclnn calls model_run queues */
  int n_views;        /* nodes that are views of their input's buffer: no call */
  int n_unsupported;  /* nodes aclnn cannot take: each an unsupported diagnostic
                         "ascend: ...", and model_init refuses naming the first */
  size_t arena_bytes, weights_bytes;
  int n_objects;      /* tensors, arrays, scalars and lists made at init */
  int n_fallbacks;    /* nodes run on the host by the CPU target's kernel (each a warning
                         "ascend: host-fallback (cpu kernel): ...") */
  size_t fallback_bytes; /* bytes they copy between device and host per run */
} asc_report;

/* Writes dir/ (model.c and the rest above) for m, model_path naming the source in
 * comments; dir NULL writes nothing (a check). Returns 0 when the project was
 * written (check r->n_unsupported), -1 on OOM or I/O failure (recorded). */
int emit_ascend(mg_model *m, const rule_set *rs, const asc_options *o, const char *dir, const char *model_path,
                asc_report *r, mg_diags *d);
#endif
