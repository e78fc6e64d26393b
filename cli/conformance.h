/* Shared by the conformance runner's files: cmd_conformance.c (test discovery,
 * the interpreter backend, reporting), conformance_c.c (the C backend) and
 * conformance_ms.c (the mindspore-emu backend). */
#ifndef MG_CONFORMANCE_H
#define MG_CONFORMANCE_H
#include "infer.h"
#include "ir.h"
#include "npy.h"
#include <stdio.h>

typedef struct conf_c conf_c;
typedef struct conf_ms conf_ms;

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
  struct conf_ms *mq;      /* the mindspore-emu backend's queue, or NULL */
} conf_ctx;

typedef enum { R_PASS, R_FAIL, R_SKIP } result;


/* Compares got with want under cc's tolerances; nonzero with a reason in why. */
int conf_compare(const conf_ctx *cc, const mg_array *got, const mg_array *want, char *why, size_t n);
/* Prints one test's line and counts it. */
void conf_report(conf_ctx *cc, const char *name, result r, const char *why);
/* As conf_report; a pass prints note after the name, "pass  NAME  (note)". */
void conf_report_note(conf_ctx *cc, const char *name, result r, const char *why, const char *note);
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

/* A backend that reuses the C backend's queue, build and runs (ascend-emu): what it
 * does instead of emit_c, and its additions to the work folder's Makefile. */
typedef struct {
  /* Converts prepared m (its own; may be rewritten) as prefix into work. R_PASS when
   * written, with *note (malloc'ed or NULL: printed after a pass) and *objs, the
   * extra objects (malloc'ed names, relative to work) the model needs linked; else a
   * skip or failure with why. */
  result (*emit)(void *ctx, mg_model *m, const char *prefix, const char *work, const char *model_path, mg_diags *d,
                 char *why, size_t wn, char **note, char ***objs, int *n_objs);
  /* Writes to the Makefile a definition of EXTRA (objects every runner links) and
   * their rules; may be NULL. */
  void (*makefile)(void *ctx, FILE *f);
  /* After every test ran: the passes with no note and with one; frees ctx. */
  void (*finish)(void *ctx, int n_plain, int n_noted);
  void *ctx;
} conf_c_backend;
/* conf_c_new with a backend (copied); conf_c_finish calls be->finish even when no
 * test was queued. */
conf_c *conf_c_new_backend(const char *work_dir, int keep, int jobs, const conf_c_backend *be);
/* The work folder of q. */
const char *conf_c_work(const conf_c *q);

/* The ascend-emu backend: each queued test is prepared as the C backend prepares it,
 * converted as `migc convert --target ascend` converts it (emit_ascend, prefix tN,
 * into one work folder), compiled with the aclnn emulator (ascend_emu/) into one
 * runner by conf_c_finish and run; an `acl-emu: error` is a failure. A pass through
 * a host fallback is noted; a node neither aclnn nor a host fallback takes is a
 * skip. NULL with a message when the rules cannot be loaded or the work folder made. */
conf_c *conf_asc_new(const char *work_dir, int keep, int jobs);

/* Shared by the backends that compile a test for static shapes. Turns the graph
 * inputs of (imported, unprepared) m that only decide shapes (Reshape's shape,
 * Slice's starts, a reduction's axes...) into constants holding in[]'s data;
 * bound[i] marks them by original input index. 1 when any was bound, 0 when none,
 * -1 on OOM. */
int conf_bind_int_inputs(mg_model *m, const mg_array *in, int n_in, char *bound);
/* Shape overrides from in[] for the tensor inputs whose declared shape is not
 * static; their count (names strdup'ed: conf_free_shapes), or -1. */
int conf_data_shapes(const mg_model *m, const mg_array *in, int n_in, mg_shape_override *ov);
void conf_free_shapes(mg_shape_override *ov, int n);

/* The mindspore-emu backend: each queued test is converted at once as
 * `convert --target mindspore` converts (net.py and model.ckpt under the work
 * folder), then conf_ms_finish runs every net through the MindSpore stand-in in a
 * few batched Python processes (tools/ms_emu_run.py) and compares. NULL with a
 * message when the rules cannot be loaded or the work folder made. */
conf_ms *conf_ms_new(const char *work_dir, int keep, int jobs);
/* As conf_c_queue; a net with an ops.Custom kernel or a node it cannot compute is
 * reported as a skip at once, naming why. */
void conf_ms_queue(conf_ctx *cc, conf_ms *q, const char *name, const char *model_path, mg_array **inputs,
                   int *n_inputs, mg_array **expected, int *n_expected, int n_sets);
/* Runs every queued net, reports each test; frees q. */
void conf_ms_finish(conf_ctx *cc, conf_ms *q);
#endif
