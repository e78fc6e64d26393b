/* The MindSpore emitter as convert runs it and coverage checks it (cli/mindspore_step.c). */
#ifndef MG_CLI_MINDSPORE_STEP_H
#define MG_CLI_MINDSPORE_STEP_H
#include "export.h"
#include "mindspore.h"

/* The MindSpore emitter on copy (a clone of the prepared model m), its parameters
 * named as the checkpoint of src names them (bindings b[0..nb), naming rules);
 * dir NULL writes nothing; ckpt_float as emit_mindspore's. 0 or -1. */
int cli_emit_mindspore(mg_model *copy, const mg_model *m, const wt_source *src, const wt_binding *b, int nb,
                       const wt_rules *rules, const rule_set *rs, const char *dir, mg_dtype ckpt_float, ms_report *r,
                       mg_diags *d);
/* coverage's MindSpore check: the emitter on a copy of prepared m, its weights the
 * graph's own initializers (as convert without --weights), writing nothing. The
 * number of nodes it refused (each an unsupported diagnostic "mindspore: ..." on
 * d), or -1. */
int cli_mindspore_check(mg_model *m, const rule_set *rs, mg_diags *d);
#endif
