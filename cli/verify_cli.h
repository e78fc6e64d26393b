/* Shared by the files of `migc verify` (cmd_verify.c: arguments and the flow;
 * verify_report.c: table, JSON, JUnit; verify_backend.c: the C backend and the
 * checkpoint check; verify_ms.c: the MindSpore stand-in backend). */
#ifndef MG_VERIFY_CLI_H
#define MG_VERIFY_CLI_H
#include "interp.h"
#include "localize.h"
#include "parity.h"
#include "policy.h"
#include <jansson.h>
#include <limits.h>
#include "autodiff.h"

struct wt_source;

typedef enum { V_OUTPUT, V_INPUT_GRAD, V_PARAM_GRAD, V_GROUP, V_WEIGHT, V_LAYERS } vkind;
typedef enum { V_PASS, V_FAIL, V_ERROR } vstatus;

/* One compared thing: an output, an input gradient, a parameter gradient, a
 * gradient group (a torch module's parameters together) or a checkpoint tensor. */
typedef struct {
  vkind kind;
  vstatus status;
  char name[512];
  char group[512];  /* module prefix for gradients */
  char init[512];   /* graph initializer (parameter gradients, weights) */
  char shape[128];
  parity_tol tol;
  parity_metrics m;
  int compared;     /* metrics are valid */
  int64_t topk_rows; /* --precision: samples (rows) top1/top5 were counted over; 0: none */
  double top1, top5; /* shares of rows whose argmax agrees / lies in the top 5 */
  double mean_rel;   /* --precision: mean |got - ref| / mean |ref| (-1: not a float output) */
  const char *precision; /* --precision the row was judged at (NULL: fp32) */
  int members;      /* groups: parameters in the group */
  char why[768];    /* reason for a failure or an error */
  const mg_array *got, *ref; /* parameter gradients, kept for grouping (into v->grads, v->ref) */
  mg_array own;     /* an owned transposed copy of got, used instead of it when set
                       (never pointed to: the rows move when the array grows) */
} vresult;

typedef struct {
  const char *target, *backend, *policy, *junit, *json, *map, *ckpt;
  const char *precision; /* --precision fp16|bf16 (NULL: fp32): the C code converted at it */
  double rtol, atol; /* -1: from the policy/defaults */
  int grad, no_localize, no_layers;
  int force; /* --force: replace existing --json / --junit reports */
} vopts;

typedef struct {
  vopts opt;
  mg_diags d;
  char onnx[PATH_MAX], reference[PATH_MAX], pth[PATH_MAX], outdir[PATH_MAX];
  char ckpt_buf[PATH_MAX], map_buf[PATH_MAX], tmpdir[PATH_MAX], trace_dir[PATH_MAX];
  char ms_net[PATH_MAX]; /* mindspore-emu: the net.py that ran */
  char ms_grad_why[1024]; /* mindspore-emu: why value_and_grad failed, or "" */
  char model_name_buf[512];
  const char *model_name;
  parity_policy *policy;
  json_t *map;
  json_t *refjson; /* the reference folder's ref.json (its float32 noise figures), or NULL */
  mg_model *m;
  mg_array *ref;
  int n_ref;
  mg_array *inputs; /* per graph input, borrowing the reference's data */
  int n_inputs;
  mg_array *outs;   /* forward outputs, graph order */
  vresult *res;
  int n_res, cap_res;
  vresult *wres;    /* checkpoint check rows */
  int n_wres;
  int wchecked, wunmapped;
  const char *wunmapped_names[64]; /* the first of them, borrowed from the map */
  grad_result grads;
  int have_grads;
  struct wt_source *pth_src;
  loc_result loc;
  int localised, loc_tried;
  char loc_note[1024];
  double t_forward, t_grad, t_total;
} vctx;

/* verify_backend.c */
/* Builds (when needed) and runs OUTDIR/cpu/runner (ascend: OUTDIR/ascend/runner,
 * built with `make emu` against the aclnn emulator), or converts the ONNX into a
 * temporary folder first; fills v->outs. 0, or -1 with diagnostics. */
int verify_runner_forward(vctx *v, int ascend);
/* Runs the runner again with --trace into v->trace_dir. 0, or -1 (v->loc_note says
 * why, e.g. the runner has no trace mode). */
int verify_c_trace(vctx *v);
/* Checks v->opt.ckpt against the graph's initializers through the weight map,
 * filling v->wres. 0, or -1 when the files cannot be read. */
int verify_weights(vctx *v);
/* Removes a directory tree the command created. */
void verify_rmtree(const char *dir);
/* Makes v->tmpdir (once). 0, or -1 with a diagnostic. */
int verify_work_dir(vctx *v);

/* verify_ms.c */
/* --backend mindspore-emu: runs OUTDIR/mindspore/net.py with the checkpoint (--ckpt
 * when given, else OUTDIR/model.ckpt) under the MindSpore stand-in through
 * tools/ms_emu_grad.py, converting a reference folder's ONNX with its model.pth for
 * MindSpore first. Fills v->outs and, with --grad, v->grads from
 * mindspore.value_and_grad (parameters under their torch names through the weight
 * map, in torch's shape). 0, or -1 with diagnostics (a net that fails to load or run
 * is one naming the cause). */
int verify_ms_run(vctx *v);
/* Why verify_ms_run brought no gradients, as unsupported diagnostics: one per
 * ops.Custom kernel of net.py (MindSpore has no gradient through a kernel without a
 * bprop), or what mindspore.value_and_grad raised. 0, or -1 when net.py cannot be
 * read. */
int verify_ms_grad_errors(vctx *v);

/* cmd_verify.c */
/* The reference array named `name` (ref.npz member), or NULL. */
const mg_array *verify_ref_get(const vctx *v, const char *name);

/* verify_report.c */
void verify_print(const vctx *v);
int verify_write_json(vctx *v);
int verify_write_junit(vctx *v);
#endif
