/* The Ascend emitter as coverage checks it (cli/ascend_step.c). */
#ifndef MG_CLI_ASCEND_STEP_H
#define MG_CLI_ASCEND_STEP_H
#include "mapping.h"

/* coverage's Ascend check: the emitter on a copy of prepared m, writing nothing, so
 * that the report says host-fallback where convert would fall back. The number of
 * nodes it refused (each an unsupported diagnostic "ascend: ..." on d; host
 * fallbacks are warnings), or -1. */
int cli_ascend_check(mg_model *m, const rule_set *rs, mg_diags *d);
#endif
