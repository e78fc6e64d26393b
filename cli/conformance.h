/* Shared by the conformance runner's files: cmd_conformance.c (test discovery,
 * the interpreter backend, reporting) and conformance_c.c (the C backend). */
#ifndef MG_CONFORMANCE_H
#define MG_CONFORMANCE_H
#include "ir.h"
#include "npy.h"

typedef struct conf_c conf_c;

typedef struct {
  char **names, **reasons;
  int n;
} xfail_list;

typedef struct {
  double rtol, atol;
  xfail_list xfail;
  int passed, failed, skipped, xfailed;
  const char *only;        /* glob: run only tests whose name matches */
  struct conf_c *cq;       /* the C backend's queue; NULL for the interpreter */
} conf_ctx;

typedef enum { R_PASS, R_FAIL, R_SKIP } result;


/* Compares got with want under cc's tolerances; nonzero with a reason in why. */
int conf_compare(const conf_ctx *cc, const mg_array *got, const mg_array *want, char *why, size_t n);
/* Prints one test's line and counts it. */
void conf_report(conf_ctx *cc, const char *name, result r, const char *why);
/* The message of the first "not supported" diagnostic, or NULL. */
const char *conf_unsupported_reason(const mg_diags *d);
/* Reads a TensorProto file into a; 0 on success. */
int conf_read_pb(const char *path, mg_model *m, mg_array *a);

/* The C backend: tests are queued as they are found, converted at once, then
 * compiled together and run by conf_c_finish. */
conf_c *conf_c_new(const char *work_dir, int keep, int jobs);
/* Queues one test: model file, its datasets (inputs named after graph inputs,
 * expected outputs in graph order; ownership of the arrays passes to the queue). */
void conf_c_queue(conf_ctx *cc, conf_c *q, const char *name, const char *model_path, mg_array **inputs,
                  int *n_inputs, mg_array **expected, int *n_expected, int n_sets);
/* Builds every queued test into one runner, runs and reports each; frees q. */
void conf_c_finish(conf_ctx *cc, conf_c *q);
#endif
