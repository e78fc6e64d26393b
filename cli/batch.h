/* Shared by `migc batch` and `migc report` (docs/batch.md):
 *   batch_manifest.c  the manifest (or a folder of *.onnx) read and checked;
 *   batch_hash.c      SHA-256 of files and strings, the shard of a name;
 *   batch_model.c     one model's work, in its own process: convert, build, verify,
 *                     OUTDIR/<name>/result.json;
 *   cmd_batch.c       the command: selection (shard, resume), the worker processes
 *                     (-j, --timeout), progress, then the report;
 *   report_data.c     result.json files of one or more folders merged into the
 *                     report (report.json) and junit.xml;
 *   report_html.c     report.md and report.html from report.json;
 *   cmd_report.c      `migc report`. */
#ifndef MG_BATCH_H
#define MG_BATCH_H
#include "diag.h"
#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#define BATCH_VERSION "0.1.0"
#define BATCH_MAX_SHAPES 16

/* Targets as bits: cpu, ascend, mindspore (mapping.h's order). */
enum { BT_CPU = 1, BT_ASCEND = 2, BT_MINDSPORE = 4 };
extern const char *const batch_target_names[3];

typedef struct {
  char name[128];
  char onnx[PATH_MAX];
  char weights[PATH_MAX];   /* "" when none */
  char key[256];            /* --key, "" when none */
  char reference[PATH_MAX]; /* a torch_reference.py folder or a .npz; "" when none */
  char policy[PATH_MAX];    /* tolerance.policy (verify --policy), "" when none */
  double rtol, atol;        /* tolerance.rtol/atol; -1 when not given */
  char *shapes[BATCH_MAX_SHAPES]; /* "NAME=DIMS", for convert --input-shape */
  int n_shapes;
  int targets;              /* BT_* bits */
  int grad;
  double timeout;           /* seconds; 0: the batch's --timeout */
} batch_model;

typedef struct {
  char path[PATH_MAX];      /* the manifest, or the folder that was scanned */
  batch_model *models;
  int n;
} batch_manifest;

/* batch_manifest.c */
/* Parses a target list "cpu,ascend" into BT_* bits; 0 for an empty or unknown one. */
int batch_parse_targets(const char *list);
/* Reads MANIFEST (JSON, docs/batch-manifest.schema.json) or, when path is a folder,
 * takes every *.onnx under it (with a .pth or .safetensors of the same stem beside
 * it). Relative paths are taken from the manifest's folder. Models without targets
 * get default_targets (--targets) when not 0, else the manifest's "defaults", else
 * cpu. check_files: every
 * file named must exist (`migc batch --check`). 0, or -1 with one diagnostic naming
 * the file and the problem. */
int batch_manifest_load(const char *path, int default_targets, int check_files, batch_manifest *out, mg_diags *d);
void batch_manifest_free(batch_manifest *m);

/* batch_hash.c */
/* Lowercase hex SHA-256 (65 bytes with the NUL) of len bytes at p. */
void batch_sha256_hex(const void *p, size_t len, char hex[65]);
/* Of the file at path; 0, or -1 (errno set) when it cannot be read. */
int batch_sha256_file(const char *path, char hex[65]);
/* The shard (0..n-1) a model name falls in: the first 8 bytes of SHA-256(name) as a
 * big-endian integer, modulo n. Independent of the manifest's order. */
int batch_shard_of(const char *name, int n);

/* batch_model.c */
typedef struct {
  const char *self;   /* the migc executable the steps run */
  const char *outdir; /* OUTDIR; the model's folder is OUTDIR/<name> */
  int make_jobs;      /* -j for each compile */
} batch_env;
/* What the model's result depends on: its files' SHA-256s and its settings. A new
 * object, with "error" set when a file cannot be read. */
json_t *batch_inputs_json(const batch_model *m);
/* Whether OUTDIR/<name>/result.json exists and was made from the same inputs. */
int batch_result_current(const batch_env *e, const batch_model *m);
/* The worker, in its own process: converts, builds and verifies the model for its
 * targets and writes OUTDIR/<name>/result.json atomically. Returns the exit status
 * of the worker (0 when result.json was written). */
int batch_model_run(const batch_env *e, const batch_model *m);
/* result.json for a model whose worker did not write one (crashed, timed out):
 * every target failed with `reason`. 0 or -1. */
int batch_write_failed(const batch_env *e, const batch_model *m, const char *reason, double seconds);
/* Reads OUTDIR/<name>/result.json: 1 pass, 0 fail, -1 unreadable. */
int batch_result_passed(const batch_env *e, const batch_model *m);
/* The string member key of o, or def when it is absent or not a string. */
const char *batch_str(json_t *o, const char *key, const char *def);
/* Writes j to dir/name atomically (temporary file, then rename). 0, or -1 with an io
 * diagnostic. */
int batch_write_json(const char *dir, const char *name, json_t *j, mg_diags *d);

/* report_data.c */
/* The report of the batch folders dirs[0..n): every DIR/<name>/result.json, sorted by
 * name; a model listed in a DIR/batch.json without a result is "missing". A new
 * report.json object, or NULL with a diagnostic (no folder, no result, a name in two
 * folders). */
json_t *report_build(const char *const *dirs, int n, mg_diags *d);
/* Writes report.json, report.md, report.html and junit.xml into outdir (made when
 * missing), and junit to `junit` too when not NULL. 0, or -1 with a diagnostic. */
int report_write_all(json_t *report, const char *outdir, const char *junit, mg_diags *d);
/* 0 when every model passed on every target, else 1. */
int report_exit_status(json_t *report);

/* report_html.c */
/* The report as markdown (for a pull request) and as one self-contained HTML page;
 * malloc'd text, NULL when out of memory. */
char *report_markdown(json_t *report);
char *report_html(json_t *report);
#endif
