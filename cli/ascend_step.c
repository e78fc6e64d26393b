/* The Ascend emitter as coverage checks it (ascend_step.h). */
#include "ascend_step.h"
#include "ascend.h"

int cli_ascend_check(mg_model *m, const rule_set *rs, mg_diags *d) {
  mg_model *copy = mg_model_clone(m);
  if (!copy) { /* the caller must see a check that could not run for memory */
    mg_error(d, OOM, NULL, NULL, "out of memory running the Ascend emitter's check");
    return -1;
  }
  asc_report r;
  int rc = emit_ascend(copy, rs, NULL, NULL, m->path, &r, d) ? -1 : r.n_unsupported;
  mg_model_free(copy);
  return rc;
}
