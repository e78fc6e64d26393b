/* migc convert MODEL.onnx [--weights SRC] --target cpu,ascend,mindspore -o OUTDIR
 *
 * Writes OUTDIR/cpu/ (the generated C project), OUTDIR/model.ckpt with
 * OUTDIR/weight_map.json (MindSpore names, from SRC or the ONNX initializers) and
 * OUTDIR/coverage.{json,md} (every node's status on every target), whichever
 * targets are asked for: the contract in DESIGN.md; and OUTDIR/convert.json, the
 * source model (absolute path), weights source and options, which `migc verify
 * OUTDIR` reads. */
#include "cli.h"
#include "ascend.h"
#include "codegen.h"
#include "mindspore_step.h"
#include "ms_package.h"
#include "coverage.h"
#include "export.h"
#include "onnx_import.h"
#include "passes.h"
#include "outfile.h"
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "quant_calib.h"

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

static void help(FILE *f) {
  fprintf(f,
          "usage: migc convert MODEL.onnx [--weights SRC] [--target cpu,ascend,mindspore] -o OUTDIR\n"
          "\n"
          "Converts a model for every target and writes, under OUTDIR:\n"
          "  cpu/               a C99 project: model.h, model.c, model.weights, runtime/,\n"
          "                     main.c (the runner), Makefile and CMakeLists.txt; `make -C\n"
          "                     OUTDIR/cpu` builds OUTDIR/cpu/runner\n"
          "  model.ckpt         the weights as a MindSpore checkpoint, with MindSpore names\n"
          "  weight_map.json    what was done to every tensor\n"
          "  coverage.json/.md  every node's status on every target\n"
          "  convert.json       the source model (absolute), weights source and options\n"
          "  mindspore/         with --target mindspore: net.py (class Net(nn.Cell), its\n"
          "                     parameters the checkpoint's tags), run.py, export.py,\n"
          "                     README.md, converter_lite.cfg, convert_lite.sh and atc.sh\n"
          "  modelarts/model/   with --target mindspore: the ModelArts package (config.json,\n"
          "                     customize_service.py, net.py, model.ckpt, tmp.om)\n"
          "  ascend/           with --target ascend: a C99 host program on the CANN aclnn API\n"
          "                     (model.h, model.c, acl_decls.h, model.weights, main.c),\n"
          "                     CMakeLists.txt for a CANN install, a Makefile whose `emu`\n"
          "                     target builds it against the aclnn emulator (emu/), host\n"
          "                     fallbacks (host_*.c) and custom_ops/<Op>/ skeletons\n"
          "Nodes a target cannot take are reported one by one (and the rest is converted).\n"
          "\n"
          "  --weights SRC          .pth/.safetensors for the checkpoint (default: the\n"
          "                         ONNX initializers); its tensors are bound to the graph\n"
          "  --key K                the dict inside the .pth that holds the tensors\n"
          "  --target LIST          the targets --strict judges (default: cpu)\n"
          "  --strict               exit 2 if any node of those targets is not converted\n"
          "  --force                replace what an earlier conversion wrote in OUTDIR\n"
          "                         (without it, convert refuses before writing anything)\n"
          "  --max-output-bytes N   refuse a checkpoint larger than N bytes (K, M, G, T;\n"
          "                         default 64x the weights file, 256M to 64G)\n"
          "  --input-shape N=DIMS   fix graph input N's shape (e.g. input=1x3x224x224)\n"
          "  --dynamic INPUT        INPUT's leading dim is a symbolic batch ('batch'), as an\n"
          "                         export's dynamic_axes names it (those stay symbolic anyway):\n"
          "                         cpu/ then runs any batch (model_init_dims, model_run_dims_v)\n"
          "  --embed-weights        weights as a const array in cpu/model_weights.c\n"
          "  --prefix NAME          C prefix of the generated API (default: model)\n"
          "  --string-pool BYTES    per-instance pool for strings made at run time\n"
          "                         (default 1048576; only models with string kernels)\n"
          "  --no-fuse, --no-fold-bn  keep activations / BatchNorm as separate kernels\n"
          "  --threads N            generated code for up to N threads (model_set_threads;\n"
          "                         model_init starts N; default 1, no pthreads)\n"
          "  --max-seq N            a symbolic sequence (a named dim other than the leading\n"
          "                         batch): the longest the generated code takes (default 64;\n"
          "                         the code is generated and checked at every length up to it)\n"
          "  --cpu-pack MR|none     panel height of the weights prepared for SGEMM\n"
          "                         (default: this machine's kernel; none: as in the graph)\n"
          "  --cpu-only             write only cpu/ (no checkpoint or coverage report)\n"
          "  --precision P          fp32 (default), fp16 or bf16: model.ckpt holds the float\n"
          "                         parameters in P, BatchNorm and LayerNorm ones float32, and\n"
          "                         mindspore/run.py runs at AMP O2 by default; cpu/ holds its\n"
          "                         weights in P, widened per layer, computing in float32\n"
          "                         (docs/precision.md); ascend's 16-bit code is not supported yet\n"
          "                         int8: the cpu target only, static post-training\n"
          "                         quantisation (docs/precision.md), with one of:\n"
          "  --calibrate PATH       calibration inputs: a folder of .npy files or one .npz\n"
          "  --calib-method M       minmax, percentile (99.99, default) or kl (TensorRT's entropy)\n"
          "  --quant-params FILE    the scales of an earlier conversion's quant.json\n"
          "  --modelarts-runtime S  config.json's runtime (default " MS_PACKAGE_DEFAULT_RUNTIME ",\n"
          "                         a MindSpore + CANN runtime ModelArts documents; which exist\n"
          "                         depends on the region)\n"
          "  --ascend-no-op NAME    treat ONNX op NAME (or aclnn function NAME) as having no\n"
          "                         aclnn call, to exercise the host fallback (repeatable)\n"
          "  --model-algorithm NAME config.json's model_algorithm (default " MS_PACKAGE_DEFAULT_ALGORITHM "; e.g.\n"
          "                         image_classification): a letter first, at most 36 characters,\n"
          "                         none of & ! ' \" < > =\n");
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* mkdir -p outdir; 0 when it exists afterwards. */
static int make_dirs(const char *dir) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
  for (char *q = buf + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      *q = '/';
    }
  return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

static int valid_prefix(const char *p) {
  if (!*p || (*p >= '0' && *p <= '9')) return 0;
  for (; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
  return 1;
}

/* The converted rate of target t in a coverage JSON; -1 if unreadable. */
static double converted_rate(const char *json_path, const char *t) {
  json_error_t e;
  json_t *j = json_load_file(json_path, 0, &e);
  double rate = -1;
  json_t *models = j ? json_object_get(j, "models") : NULL;
  json_t *m0 = models ? json_array_get(models, 0) : NULL;
  json_t *tg = m0 ? json_object_get(json_object_get(m0, "targets"), t) : NULL;
  if (tg) rate = json_number_value(json_object_get(tg, "converted_rate"));
  json_decref(j);
  return rate;
}

/* --strict's message for a target with an emitter: the nodes it could not take,
 * named (the first eight), from its unsupported diagnostics d->items[first..]
 * (a rules target's begin with its name; a MindSpore custom op's is a warning). */
static void strict_names_emitted(const mg_diags *d, const char *target, size_t first) {
  int n = 0;
  fprintf(stderr, "migc convert: --strict: not converted for %s:", target);
  for (size_t i = first; i < d->count; i++) {
    const mg_diag *g = &d->items[i];
    if (g->code != MG_D_UNSUPPORTED || !g->node) continue;
    if (strcmp(target, "cpu") && (!g->message || strncmp(g->message, target, strlen(target)))) continue;
    if (n++ < 8)
      fprintf(stderr, "%s '%s' (%s%s)", n > 1 ? "," : "", g->node, g->op ? g->op : "?",
              g->severity == MG_SEV_WARNING ? ", an ops.Custom CPU kernel" : "");
  }
  fprintf(stderr, n > 8 ? " and %d more\n" : "\n", n - 8);
}

static void strict_names_coverage(const char *json_path, const char *t) {
  json_t *j = json_load_file(json_path, 0, NULL);
  json_t *ops = json_object_get(json_array_get(json_object_get(j, "models"), 0), "ops");
  size_t i, k;
  json_t *o, *name;
  int n = 0;
  fprintf(stderr, "migc convert: --strict: not mappable to %s:", t);
  json_array_foreach(ops, i, o) {
    const char *st = json_string_value(json_object_get(json_object_get(o, "status"), t));
    if (!st || !strcmp(st, "supported") || !strcmp(st, "decomposed")) continue;
    json_array_foreach(json_object_get(o, "nodes"), k, name) {
      if (n++ < 8)
        fprintf(stderr, "%s '%s' (%s, %s)", n > 1 ? "," : "", json_string_value(name),
                json_string_value(json_object_get(o, "op")), st);
    }
  }
  fprintf(stderr, n > 8 ? " and %d more\n" : "\n", n - 8);
  json_decref(j);
}

/* Writes OUTDIR/convert.json (by the output rule): what was converted and how,
 * so that `migc verify OUTDIR` finds the source model again. 0, or -1 with a
 * diagnostic on d. */
static int write_convert_json(const char *outdir, const char *model, const char *weights, const char *key,
                              const char *targets, const char *precision, const cg_options *o, int cpu_only,
                              const mg_shape_override *ov, int n_ov, const cg_quant *quant, json_t *cpu_precision,
                              mg_diags *d) {
  char abs_model[PATH_MAX], abs_weights[PATH_MAX], path[PATH_MAX];
  if (!realpath(model, abs_model)) return -1;
  if (weights && !realpath(weights, abs_weights)) return -1;
  json_t *shapes = json_object();
  for (int i = 0; i < n_ov; i++) {
    char buf[256];
    json_object_set_new(shapes, ov[i].name, json_string(mg_shape_str(&ov[i].shape, buf, sizeof buf)));
  }
  json_t *j = json_pack("{s:s,s:s,s:o,s:s?,s:s,s:{s:s,s:s,s:b,s:b,s:b,s:b,s:o}}", "migc", "0.1.0", "model",
                        abs_model, "weights", weights ? json_string(abs_weights) : json_null(), "key", key, "targets",
                        targets, "options", "precision", precision, "prefix", o->prefix, "embed_weights", o->embed_weights, "no_fuse", o->no_fuse,
                        "no_fold_bn", o->no_fold_bn, "cpu_only", cpu_only, "input_shapes", shapes);
  if (quant) json_object_set_new(j, "int8", qc_layers_json(quant));
  if (j && cpu_precision) json_object_set_new(j, "cpu_precision", cpu_precision);
  else json_decref(cpu_precision);
  snprintf(path, sizeof path, "%s/convert.json", outdir);
  int rc = wt_write_json(path, j, JSON_INDENT(2) | JSON_PRESERVE_ORDER, d);
  json_decref(j);
  return rc;
}

/* Puts the source's tensors into the graph (wt_bind_apply), so that every output
 * computes with them, and says what the binding could not prove: initializers
 * bound by name or scope whose values differ from the export's (a stale export of
 * a fine-tuned model), folded BatchNorms whose eps was assumed, and every
 * initializer it could not bind (which keeps the export's value). 0 or -1. */
static int bind_weights(const wt_source *src, mg_model *m, wt_binding *b, int nb, const char *weights,
                        mg_diags *d) {
  if (wt_bind_apply(src, m, b, nb, d)) return -1;
  int differ = 0, assumed = 0, worst = -1;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "no tensor of %s stands for it, so the export's value is used", weights);
  wt_warn_unbound(b, nb, what, d);
  for (int i = 0; i < nb; i++) {
    if (!b[i].by_structure || b[i].kind == WT_UNBOUND) continue;
    differ++;
    assumed += b[i].eps_assumed && b[i].kind == WT_BN_FOLD_WEIGHT;
    if (worst < 0 || b[i].max_err > b[worst].max_err) worst = i;
  }
  if (differ)
    mg_warn(d, GRAPH, weights, NULL,
            "%d graph initializers were bound by name or torch scope, not by equal values: the export's values "
            "differ from these weights (largest difference %.3g, in '%s'); every output is made of %s's values",
            differ, b[worst].max_err, b[worst].init->name, weights);
  if (assumed)
    mg_warn(d, GRAPH, weights, NULL,
            "%d folded BatchNorms were recomputed with eps %g, which the values could not confirm (torch's "
            "default, or the one the other folds showed); weight_map.json lists them",
            assumed, b[worst].eps);
  return 0;
}

/* The binding step of convert's preparation (mg_prepare_with). */
typedef struct {
  const wt_source *src;
  const char *weights; /* --weights, or NULL: the graph's own initializers */
  wt_binding *binds;
  int n_binds;
  int want_ms_copy;    /* the MindSpore target wants its own copy, taken before folding */
  mg_model *ms_copy;
} bind_step;

static int bind_step_run(mg_model *m, void *ctx, mg_diags *d) {
  bind_step *b = ctx;
  if (wt_bind(b->src, m, &b->binds, &b->n_binds, d)) return -1;
  if (b->weights && bind_weights(b->src, m, b->binds, b->n_binds, b->weights, d)) return -1;
  /* The script trains: a parameter read through a Reshape or an Expand (vit's
   * class_token, convnext's layer_scale) must stay a parameter, not become the
   * constant that folding would make of it, so that copy keeps parameter paths. */
  if (b->want_ms_copy) {
    if (!(b->ms_copy = mg_model_clone(m))) {
      mg_error(d, OOM, NULL, NULL, "out of memory copying the model for the MindSpore target");
      return -1;
    }
    b->ms_copy->keep_param_paths = 1;
  }
  return 0;
}

/* Without --weights the checkpoint names are the export's initializer names: say
 * so once when they are the anonymous ones of a constant-folded export. */
static void warn_anonymous_names(const mg_model *m, mg_diags *d) {
  int anon = 0;
  const char *first = NULL;
  for (int i = 0; i < m->graph->n_inits; i++)
    if (!strncmp(m->graph->inits[i]->name, "onnx::", 6) && mg_dtype_is_float(m->graph->inits[i]->dtype)) {
      if (!anon++) first = m->graph->inits[i]->name;
    }
  if (anon)
    mg_warn(d, GRAPH, m->path, NULL,
            "%d checkpoint tensors carry the export's anonymous names ('%s'), not torch's: give --weights "
            "MODEL.pth to name them after the torch module tree",
            anon, first);
}

/* One conversion: the options, then what each step leaves for the next. */
typedef struct {
  const char *model, *outdir, *weights, *key, *targets;
  const char *ms_runtime, *model_algorithm; /* config.json of the ModelArts package */
  cg_options o;
  int strict, cpu_only, n_ov;
  int force;               /* --force: replace what an earlier conversion wrote */
  double max_output_bytes; /* --max-output-bytes; 0: wt_default_output_limit */
  const char *precision;   /* --precision: fp32, fp16, bf16 or int8 */
  const char *calibrate, *calib_method, *quant_params; /* int8: --calibrate, --calib-method, --quant-params */
  qc_params qp;            /* int8: the activations' scales */
  cg_quant quant;          /* int8: what the C generator did with each layer */
  cg_report cpu_report;    /* emit_c's, for convert.json's cpu_precision */
  mg_dtype ckpt_float;     /* the checkpoint's float parameters: MG_F16, MG_BF16, or MG_UNDEFINED (as given) */
  mg_shape_override ov[32];
  const char *dynamic[32]; /* --dynamic INPUT: its leading dim becomes the symbolic batch */
  int n_dynamic;
  int want[MAP_TARGET_COUNT]; /* the targets --strict judges: cpu, ascend, mindspore */
  mg_diags d;
  mg_model *m;
  wt_source *src;
  wt_rules *rules;
  wt_binding *binds;
  int n_binds, unbound;
  int ckpt_written;           /* OUTDIR/model.ckpt is this conversion's */
  cov_model cm;
  int have_cm;
  rule_set *rs[MAP_TARGET_COUNT];
  size_t first_cpu_diag, first_ms_diag;
  mg_model *ms_model;         /* the MindSpore target's own copy, cloned before C lowers m */
  mg_model *asc_model;        /* the Ascend target's, cloned from the prepared m likewise */
  size_t first_asc_diag;
  const char *no_ops[16];     /* --ascend-no-op */
  int n_no_ops;
  double t0, t_import;
  int rc;
} convert_job;

/* Reads argv into j. EXIT_OK, or the exit code after a message on stderr. */
static int parse_args(int argc, char **argv, convert_job *j) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) j->outdir = argv[++i];
    else if (!strcmp(a, "--weights") && more) j->weights = argv[++i];
    else if (!strcmp(a, "--key") && more) j->key = argv[++i];
    else if (!strcmp(a, "--target") && more) j->targets = argv[++i];
    else if (!strcmp(a, "--prefix") && more) j->o.prefix = argv[++i];
    else if (!strcmp(a, "--strict")) j->strict = 1;
    else if (!strcmp(a, "--force")) j->force = 1;
    else if (!strcmp(a, "--max-output-bytes") && more) {
      if (cli_parse_bytes(argv[++i], &j->max_output_bytes)) {
        fprintf(stderr, "migc convert: --max-output-bytes takes a positive byte count (e.g. 8G), not '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
    }
    else if (!strcmp(a, "--embed-weights")) j->o.embed_weights = 1;
    else if (!strcmp(a, "--no-fuse")) j->o.no_fuse = 1;
    else if (!strcmp(a, "--no-fold-bn")) j->o.no_fold_bn = 1;
    else if (!strcmp(a, "--threads") && more) {
      const char *v = argv[++i];
      char *end;
      long nt = strtol(v, &end, 10);
      if (!*v || *end || nt < 1 || nt > 64) {
        fprintf(stderr, "migc convert: --threads wants a count from 1 to 64, got '%s'\n", v);
        return EXIT_BAD_INPUT;
      }
      j->o.threads = (int)nt;
    }
    else if (!strcmp(a, "--max-seq") && more) {
      const char *v = argv[++i];
      char *end;
      long long ns = strtoll(v, &end, 10);
      if (!*v || *end || ns < 5 || ns > 4096) {
        fprintf(stderr, "migc convert: --max-seq wants a length from 5 to 4096, got '%s'\n", v);
        return EXIT_BAD_INPUT;
      }
      j->o.seq_max = ns;
    }
    else if (!strcmp(a, "--cpu-pack") && more) {
      /* prepared weights' panel height (codegen/c/cg_prepare.c): none, or 1..64 */
      const char *v = argv[++i];
      char *end;
      long mr = strtol(v, &end, 10);
      if (!strcmp(v, "none")) j->o.pack_mr = -1;
      else if (*v && !*end && mr >= 1 && mr <= 64) j->o.pack_mr = (int)mr;
      else {
        fprintf(stderr, "migc convert: --cpu-pack wants a panel height from 1 to 64 or 'none', got '%s'\n", v);
        return EXIT_BAD_INPUT;
      }
    }
    else if (!strcmp(a, "--cpu-only")) j->cpu_only = 1;
    else if (!strcmp(a, "--precision") && more) j->precision = argv[++i];
    else if (!strcmp(a, "--calibrate") && more) j->calibrate = argv[++i];
    else if (!strcmp(a, "--calib-method") && more) j->calib_method = argv[++i];
    else if (!strcmp(a, "--quant-params") && more) j->quant_params = argv[++i];
    else if (!strcmp(a, "--modelarts-runtime") && more) j->ms_runtime = argv[++i];
    else if (!strcmp(a, "--ascend-no-op") && more) {
      if (j->n_no_ops == 16) {
        fprintf(stderr, "migc convert: --ascend-no-op given more than 16 times\n");
        return EXIT_BAD_INPUT;
      }
      j->no_ops[j->n_no_ops++] = argv[++i];
    }
    else if (!strcmp(a, "--model-algorithm") && more) j->model_algorithm = argv[++i];
    else if (!strcmp(a, "--string-pool") && more) {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(argv[++i], &end, 10);
      if (errno || *end || end == argv[i] || argv[i][0] == '-' || v < 1 || v > ((size_t)1 << 40)) {
        fprintf(stderr, "migc convert: --string-pool wants a byte count from 1 to 2^40, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      j->o.string_pool_bytes = (size_t)v;
    }
    else if (!strcmp(a, "--dynamic") && more && j->n_dynamic < 32) j->dynamic[j->n_dynamic++] = argv[++i];
    else if (!strcmp(a, "--input-shape") && more && j->n_ov < 32) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || eq == argv[i] || mg_shape_parse(eq + 1, &j->ov[j->n_ov].shape)) {
        fprintf(stderr, "migc convert: --input-shape wants NAME=1x3x224x224, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      *eq = 0;
      j->ov[j->n_ov++].name = argv[i];
    } else if (a[0] == '-') {
      fprintf(stderr, "migc convert: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!j->model) j->model = a;
    else {
      fprintf(stderr, "migc convert: one model at a time (use `migc batch` for many)\n");
      return EXIT_BAD_INPUT;
    }
  }
  if (!j->model || !j->outdir) {
    fprintf(stderr, "migc convert: %s\n", j->model ? "-o OUTDIR is required" : "no model given");
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  const char *why; /* checked before anything is written */
  if ((why = ms_package_algorithm_check(j->model_algorithm))) {
    fprintf(stderr, "migc convert: --model-algorithm '%s': %s (ModelArts' config.json rule)\n", j->model_algorithm,
            why);
    return EXIT_BAD_INPUT;
  }
  if ((why = ms_package_runtime_check(j->ms_runtime))) {
    fprintf(stderr, "migc convert: --modelarts-runtime '%s': %s\n", j->ms_runtime, why);
    return EXIT_BAD_INPUT;
  }
  if (strcmp(j->precision, "fp32") && strcmp(j->precision, "fp16") && strcmp(j->precision, "bf16") &&
      strcmp(j->precision, "int8")) {
    fprintf(stderr, "migc convert: --precision must be fp32, fp16, bf16 or int8, got '%s'\n", j->precision);
    return EXIT_BAD_INPUT;
  }
  if (qc_method_of(j->calib_method) < 0) {
    fprintf(stderr, "migc convert: --calib-method must be minmax, percentile or kl, got '%s'\n", j->calib_method);
    return EXIT_BAD_INPUT;
  }
  if (strcmp(j->precision, "int8") && (j->calibrate || j->quant_params)) {
    fprintf(stderr, "migc convert: --calibrate and --quant-params go with --precision int8\n");
    return EXIT_BAD_INPUT;
  }
  if (!strcmp(j->precision, "int8") && !j->calibrate == !j->quant_params) {
    fprintf(stderr, "migc convert: --precision int8 needs --calibrate DIR or --quant-params FILE (one of them)\n");
    return EXIT_BAD_INPUT;
  }
  j->ckpt_float = !strcmp(j->precision, "fp16") ? MG_F16 : !strcmp(j->precision, "bf16") ? MG_BF16 : MG_UNDEFINED;
  if (!valid_prefix(j->o.prefix)) {
    fprintf(stderr, "migc convert: --prefix must be a C identifier, got '%s'\n", j->o.prefix);
    return EXIT_BAD_INPUT;
  }
  char *list = strdup(j->targets);
  if (!list) return EXIT_INTERNAL;
  for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int k = !strcmp(t, "cpu") ? MAP_TARGET_CPU : !strcmp(t, "ascend") ? MAP_TARGET_ASCEND
          : !strcmp(t, "mindspore") ? MAP_TARGET_MINDSPORE : -1;
    if (k < 0) {
      fprintf(stderr, "migc convert: unknown target '%s' (cpu, ascend, mindspore)\n", t);
      free(list);
      return EXIT_BAD_INPUT;
    }
    j->want[k] = 1;
  }
  free(list);
  return EXIT_OK;
}

/* The steps of a conversion. Each returns 0 to go on; one that fails sets j->rc
 * (its diagnostics are on j->d) and returns -1. */

/* What --precision asks of each target, before anything is converted. int8 is
 * the CPU target's (quantise_model); for the Ascend target it is an unsupported
 * error (no quantised code for it yet): the conversion stops, exit 2. fp16 and
 * bf16 are what the MindSpore target takes (the checkpoint and run.py's AMP level)
 * and the CPU code holds its weights in (cg_half.c); the Ascend program stays
 * float32: an unsupported error (exit 2) when --target asks for it. */
static int check_precision(convert_job *j) {
  static const char *const names[MAP_TARGET_COUNT] = {[MAP_TARGET_CPU] = "cpu", [MAP_TARGET_ASCEND] = "ascend",
                                                      [MAP_TARGET_MINDSPORE] = "mindspore"};
  if (!strcmp(j->precision, "int8")) {
    for (int t = 0; t < MAP_TARGET_COUNT; t++)
      if (j->want[t] && t == MAP_TARGET_MINDSPORE && !j->calibrate) {
        mg_error(&j->d, UNSUPPORTED, NULL, NULL, "--precision int8 for the mindspore target needs --calibrate "
                 "(converter_lite's calibrate_path reads the samples)");
        j->rc = EXIT_BAD_INPUT;
      } else if (j->want[t] && t == MAP_TARGET_ASCEND) {
        mg_error(&j->d, UNSUPPORTED, NULL, NULL, "--precision int8 is not yet supported for the %s target "
                 "(no quantised code; int8 is the cpu and mindspore targets')", names[t]);
        j->rc = EXIT_BAD_INPUT;
      }
    if (j->rc) return -1;
    j->o.quant = &j->quant;
    return 0;
  }
  if (!j->ckpt_float) return 0;
  j->o.weights16 = j->ckpt_float;
  for (int t = 0; t < MAP_TARGET_COUNT; t++) {
    if (t != MAP_TARGET_ASCEND || !j->want[t]) continue;
    mg_error(&j->d, UNSUPPORTED, NULL, NULL, "--precision %s is not yet supported for the %s target (its code "
             "holds and computes float32)", j->precision, names[t]);
    j->rc = EXIT_BAD_INPUT;
  }
  return 0;
}

/* The model, imported once: every later step works on this one mg_model. The
 * weights every output is made of (--weights, else the graph's own initializers)
 * are opened before preparation binds them. */
static int import_model(convert_job *j) {
  if (!onnx_import(j->model, &j->d, &j->m)) j->m->derive_shapes_only = 1;
  if (j->m && (j->weights ? weights_open(j->weights, j->key, &j->src, &j->d) : onnx_weights_open(j->m, &j->src, &j->d))) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  return 0;
}

/* A step of the coverage analysis failed (out of memory, cm.error says): an
 * internal error, said on j->d. */
static void coverage_failed(convert_job *j) {
  mg_error(&j->d, OOM, NULL, NULL, "coverage: %s", j->cm.error ? j->cm.error : "out of memory");
  j->rc = EXIT_INTERNAL;
}

/* The coverage report is this conversion's: the model's own nodes are recorded
 * before preparation, the rules applied after it, the CPU column taken from the
 * C emitter's diagnostics. */
static int begin_coverage(convert_job *j) {
  if (!j->m || j->cpu_only) return 0;
  if (cli_coverage_rules(j->rs, &j->d)) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  if (coverage_begin(&j->cm, j->m, j->model)) {
    coverage_failed(j);
    coverage_free(&j->cm);
    return -1;
  }
  j->have_cm = 1;
  return 0;
}

/* --dynamic: each named graph input's leading dim becomes the symbol "batch", so
 * that it stays symbolic through preparation. 0, or -1 with a usage diagnostic. */
static int mark_dynamic(convert_job *j) {
  mg_graph *g = j->m->graph;
  for (int k = 0; k < j->n_dynamic; k++) {
    mg_value *v = NULL;
    for (int i = 0; i < g->n_inputs; i++)
      if (!strcmp(g->inputs[i]->name, j->dynamic[k])) v = g->inputs[i];
    for (int i = 0; v && i < j->n_ov; i++)
      if (!strcmp(j->ov[i].name, j->dynamic[k])) {
        mg_error(&j->d, USAGE, j->dynamic[k], NULL, "--dynamic and --input-shape name the same input");
        return -1;
      }
    if (!v || v->shape.rank < 1) {
      mg_error(&j->d, USAGE, j->dynamic[k], NULL, "--dynamic %s names no graph input with a leading dim",
               j->dynamic[k]);
      return -1;
    }
    v->shape.d[0].v = -1;
    v->shape.d[0].sym = "batch";
  }
  return 0;
}

/* mg_prepare with the input shapes, binding the weights before constant folding,
 * so that what folding computes from them (an LSTM's sliced gates in a PRESERVE
 * export) is computed from the .pth. */
static int prepare_model(convert_job *j) {
  if (j->m && mark_dynamic(j)) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  bind_step bs = {j->src, j->weights, NULL, 0, j->want[MAP_TARGET_MINDSPORE] && !j->cpu_only, NULL};
  int bad = !j->m || mg_prepare_with(j->m, j->ov, j->n_ov, bind_step_run, &bs, &j->d);
  j->binds = bs.binds, j->n_binds = bs.n_binds;
  j->ms_model = bs.ms_copy;
  if (!bad && j->ms_model) { /* the main preparation has reported what this one would say again */
    mg_diags quiet;
    mg_diags_init(&quiet);
    if ((bad = mg_prepare(j->ms_model, j->ov, j->n_ov, &quiet)))
      for (size_t i = 0; i < quiet.count; i++)
        if (quiet.items[i].severity == MG_SEV_ERROR)
          mg_diag_add(&j->d, MG_SEV_ERROR, quiet.items[i].code, quiet.items[i].node, quiet.items[i].op,
                      "mindspore: preparing its copy: %s", quiet.items[i].message);
    mg_diags_free(&quiet);
  }
  if (bad) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  j->t_import = seconds();
  for (int i = 0; i < j->n_binds; i++) j->unbound += j->binds[i].kind == WT_UNBOUND;
  /* --ascend-no-op: the op's aclnn rules are gone for every later step (lowering,
   * emission, the coverage report) */
  for (int i = 0; i < j->n_no_ops && j->rs[MAP_TARGET_ASCEND]; i++) {
    char why[256];
    snprintf(why, sizeof why, "--ascend-no-op %s hides it", j->no_ops[i]);
    int k = rules_hide(j->rs[MAP_TARGET_ASCEND], j->no_ops[i], why);
    if (k <= 0) {
      fprintf(stderr, "migc convert: --ascend-no-op %s: %s\n", j->no_ops[i],
              k ? "too many names" : "no aclnn rule has that op type or function");
      j->rc = EXIT_BAD_INPUT;
      return -1;
    }
  }
  if (j->want[MAP_TARGET_ASCEND] && !j->cpu_only && !(j->asc_model = mg_model_clone(j->m))) {
    mg_error(&j->d, OOM, NULL, NULL, "out of memory copying the model for the Ascend target");
    j->rc = EXIT_INTERNAL;
    return -1;
  }
  if (j->have_cm && coverage_map(&j->cm, j->m, j->rs)) {
    coverage_failed(j);
    return -1;
  }
  return 0;
}

/* --precision int8: the activations' scales, from --calibrate (the interpreter
 * over the prepared float32 model, before C lowers it) or --quant-params (which
 * must be this model's). */
static int quantise_model(convert_job *j) {
  if (!j->o.quant) return 0;
  int rc = qc_model_hash(j->model, j->weights, j->qp.model_hash);
  if (rc) mg_error(&j->d, IO, j->model, NULL, "cannot read the model or weights to hash them");
  else if (j->quant_params) {
    char hash[65];
    memcpy(hash, j->qp.model_hash, sizeof hash);
    rc = qc_read(j->quant_params, hash, &j->qp, &j->d);
  } else {
    double t = seconds();
    rc = qc_calibrate(j->m, j->calibrate, (qc_method)qc_method_of(j->calib_method), 99.99, &j->qp, &j->d);
    if (!rc)
      fprintf(stderr, "convert: int8: calibrated %d activations on %d samples (%s) in %.1f s\n", j->qp.n_acts,
              j->qp.samples, j->calib_method, seconds() - t);
  }
  if (rc) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  j->quant.acts = j->qp.acts, j->quant.n_acts = j->qp.n_acts;
  return 0;
}

/* --precision int8, after the C project: OUTDIR/quant.json, and the layers that
 * run int8 and float32 said on stderr (convert.json lists them). */
static int write_quant(convert_job *j) {
  if (!j->o.quant) return 0;
  char path[PATH_MAX];
  int n8 = 0;
  snprintf(path, sizeof path, "%s/quant.json", j->outdir);
  for (int i = 0; i < j->quant.n_layers; i++) n8 += j->quant.layers[i].int8;
  fprintf(stderr, "convert: int8: %d of %d Conv/Gemm/MatMul layers int8, %d float32 (convert.json 'int8' lists "
          "them)%s\n", n8, j->quant.n_layers, j->quant.n_layers - n8, n8 ? "" : "; nothing runs int8");
  if (j->quant.n_layers > n8)
    mg_warn(&j->d, UNSUPPORTED, NULL, NULL, "--precision int8: %d layers stay float32 (convert.json 'int8' "
            "says why)", j->quant.n_layers - n8);
  if (qc_write(path, j->model, &j->qp, &j->quant, &j->d)) j->rc = j->rc ? j->rc : EXIT_BAD_INPUT;
  return 0;
}

/* OUTDIR/cpu/, and --strict's verdict on it and on the binding. */
static int emit_cpu(convert_job *j) {
  char cpu_dir[PATH_MAX];
  snprintf(cpu_dir, sizeof cpu_dir, "%s/cpu", j->outdir);
  cg_report r;
  j->first_cpu_diag = j->d.count;
  int failed = emit_c(j->m, &j->o, cpu_dir, &r, &j->d);
  j->cpu_report = r;
  if (failed) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  double t_cpu = seconds();
  fprintf(stderr,
          "convert: cpu: %d nodes (%d folded at conversion, %d BatchNorm folded, %d activations fused, %d in place), "
          "%d not converted\n"
          "convert: cpu: arena %zu bytes, lower bound %zu (%.3fx), weights %zu bytes; import %.3f s, generate %.3f s\n",
          r.n_nodes, r.n_folded, r.n_bn_folded, r.n_fused, r.n_inplace, r.n_unsupported, r.arena_bytes, r.lower_bound,
          r.lower_bound ? (double)r.arena_bytes / (double)r.lower_bound : 1.0, r.weights_bytes, j->t_import - j->t0,
          t_cpu - j->t_import);
  if (j->o.weights16)
    fprintf(stderr, "convert: cpu: %d weights in %s; float32 kept: %d small, %d of normalisation layers, %d beyond "
            "float16's range\n", r.n_w16, j->precision, r.n_w32_small, r.n_w32_norm, r.n_w32_range);
  if (j->strict && j->want[MAP_TARGET_CPU] && r.n_unsupported) {
    strict_names_emitted(&j->d, "cpu", 0);
    j->rc = EXIT_BAD_INPUT;
  }
  if (j->strict && j->weights && j->unbound) {
    fprintf(stderr, "migc convert: --strict: %d graph initializers are bound to no tensor of %s (warned above)\n",
            j->unbound, j->weights);
    j->rc = EXIT_BAD_INPUT;
  }
  return 0;
}

/* OUTDIR/model.ckpt and weight_map.json, with MindSpore names. A failure is
 * recorded and the conversion goes on to the report. */
static int write_checkpoint(convert_job *j) {
  if (j->cpu_only) return 0;
  char ckpt[PATH_MAX], map[PATH_MAX], builtin[PATH_MAX];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", j->outdir);
  snprintf(map, sizeof map, "%s/weight_map.json", j->outdir);
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  wt_export_opts eo = {MG_UNDEFINED, 0, j->force, j->weights ? j->weights : j->model, j->model, j->weights != NULL,
                       j->max_output_bytes};
  eo.to_float = j->ckpt_float;
  eo.keep_norm_fp32 = 1; /* AMP O2's black list (facts.md section 6) */
  wt_export_stats st;
  if (!(j->rules = wt_rules_new())) mg_error(&j->d, OOM, NULL, NULL, "out of memory loading the naming rules");
  int erc = j->rules && !wt_rules_load(j->rules, builtin, &j->d)
                ? wt_export_ckpt(j->src, j->rules, j->m, j->binds, j->n_binds, ckpt, map, &eo, &st, &j->d)
                : -1;
  if (erc == 1) {
    fprintf(stderr, "convert: the model has no parameters: no checkpoint written (MindSpore cannot load an "
                    "empty one)\n");
    unlink(ckpt); /* a checkpoint of an earlier conversion would no longer match */
  } else if (erc) {
    j->rc = EXIT_BAD_INPUT;
  } else {
    fprintf(stderr, "convert: checkpoint %s: %d tensors (%d renamed, %d dropped), %.1f MB%s%s%s\n", ckpt,
            st.written, st.renamed, st.dropped, st.bytes / 1e6, j->ckpt_float ? ", float parameters " : "",
            j->ckpt_float ? j->precision : "", j->ckpt_float ? " (BatchNorm and LayerNorm float32)" : "");
    j->ckpt_written = 1;
    if (!j->weights) warn_anonymous_names(j->m, &j->d);
  }
  return 0;
}

/* OUTDIR/mindspore/: net.py and run.py, from the rules' plan, with parameters
 * named as the checkpoint names them. */
static int emit_mindspore_net(convert_job *j) {
  if (!j->ms_model || !j->rules) return 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/mindspore", j->outdir);
  ms_report r;
  j->first_ms_diag = j->d.count;
  if (cli_emit_mindspore(j->ms_model, j->m, j->src, j->binds, j->n_binds, j->rules, j->rs[MAP_TARGET_MINDSPORE], dir,
                         j->ckpt_float, &r, &j->d)) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  fprintf(stderr, "convert: mindspore: %d statements, %d cells, %d parameters, %d custom ops (cpu kernel%s%s%s), "
          "%d not converted (%s/net.py)\n", r.n_nodes, r.n_cells, r.n_params, r.n_custom,
          r.n_custom ? ": make -C " : "", r.n_custom ? dir : "", r.n_custom ? "/custom" : "", r.n_unsupported, dir);
  if (r.n_bn_unfolded)
    fprintf(stderr, "convert: mindspore: %d BatchNorm%s the export folded into a Conv unfolded into nn.BatchNorm2d "
                    "(momentum: torch's default 0.1, which a state_dict does not record)\n",
            r.n_bn_unfolded, r.n_bn_unfolded == 1 ? "" : "s");
  /* a custom op runs on MindSpore's CPU device only: not a conversion --strict accepts */
  if (j->strict && j->want[MAP_TARGET_MINDSPORE] && (r.n_unsupported || r.n_custom)) {
    strict_names_emitted(&j->d, "mindspore", j->first_ms_diag);
    j->rc = EXIT_BAD_INPUT;
  }
  return 0;
}

/* OUTDIR/mindspore/export.py, README.md, the converter_lite and atc command lines
 * and OUTDIR/modelarts/model/, once net.py is written (emit_mindspore_net went on).
 * A graph the package cannot carry is, like a node the net cannot, --strict's exit 2. */
static int write_ms_package(convert_job *j) {
  if (!j->ms_model || !j->rules) return 0;
  char ckpt[PATH_MAX];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", j->outdir);
  ms_package_opts po = {j->ms_runtime, j->model_algorithm, j->ckpt_written ? ckpt : NULL,
                        j->ckpt_float ? j->precision : NULL};
  if (j->o.quant) {
    po.quant_method = qc_lite_method(j->qp.method), po.calib_dir = "calibration", po.calib_size = j->qp.samples;
    if (j->qp.samples < 100 || j->qp.samples > 500)
      mg_warn(&j->d, UNSUPPORTED, NULL, NULL, "mindspore: converter_lite's full quantisation wants 100 to 500 "
              "calibration samples (facts.md), --calibrate has %d", j->qp.samples);
  }
  int rc = ms_write_package(j->ms_model, j->outdir, &po, &j->d);
  if (!rc && j->o.quant) {
    char dir[PATH_MAX];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/mindspore/calibration", j->outdir);
    if (qc_write_lite_samples(j->ms_model, j->calibrate, dir, &n, &j->d)) rc = -1;
    else fprintf(stderr, "convert: mindspore: int8: converter_lite.cfg [common_quant_param] FULL_QUANT, %s, %d "
                         "calibration samples (NHWC float32) in %s\n", po.quant_method, n, dir);
  }
  if (rc < 0 || (rc > 0 && j->strict && j->want[MAP_TARGET_MINDSPORE])) j->rc = j->rc ? j->rc : EXIT_BAD_INPUT;
  else if (rc > 0) fprintf(stderr, "convert: mindspore: no ModelArts package or deployment files (the diagnostics say why)\n");
  else fprintf(stderr, "convert: mindspore: export.py, converter_lite and atc command lines; ModelArts package "
                       "%s/modelarts/model\n", j->outdir);
  return 0;
}

/* OUTDIR/ascend/: the aclnn host program, from the rules' plan. */
static int emit_ascend_program(convert_job *j) {
  if (!j->asc_model) return 0;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/ascend", j->outdir);
  asc_report r;
  j->first_asc_diag = j->d.count;
  asc_options ao = {0};
  if (emit_ascend(j->asc_model, j->rs[MAP_TARGET_ASCEND], &ao, dir, j->model, &r, &j->d)) {
    j->rc = EXIT_BAD_INPUT;
    return -1;
  }
  fprintf(stderr, "convert: ascend: %d aclnn calls, %d views, %d objects; device arena %zu bytes, weights %zu bytes; "
                  "%d host fallbacks (%zu bytes moved per run), %d not converted (%s: make -C %s emu for the emulator)\n",
          r.n_calls, r.n_views, r.n_objects, r.arena_bytes, r.weights_bytes, r.n_fallbacks, r.fallback_bytes,
          r.n_unsupported, dir, dir);
  /* a host fallback runs, but not on the device: not a conversion --strict accepts */
  if (j->strict && j->want[MAP_TARGET_ASCEND] && (r.n_unsupported || r.n_fallbacks)) {
    strict_names_emitted(&j->d, "ascend", j->first_asc_diag);
    j->rc = EXIT_BAD_INPUT;
  }
  return 0;
}

/* OUTDIR/coverage.{json,md}, the CPU column from emit_cpu's diagnostics, and
 * --strict's verdict on the targets that have no emitter yet. */
static int write_coverage(convert_job *j) {
  if (j->cpu_only) return 0;
  char cov_json[PATH_MAX], cov_md[PATH_MAX];
  snprintf(cov_json, sizeof cov_json, "%s/coverage.json", j->outdir);
  snprintf(cov_md, sizeof cov_md, "%s/coverage.md", j->outdir);
  const int on[MAP_TARGET_COUNT] = {1, 1, 1};
  if (coverage_cpu(&j->cm, &j->d, j->first_cpu_diag) ||
      (j->ms_model && coverage_emitter(&j->cm, MAP_TARGET_MINDSPORE, &j->d, j->first_ms_diag)) ||
      (j->asc_model && coverage_emitter(&j->cm, MAP_TARGET_ASCEND, &j->d, j->first_asc_diag)) ||
      coverage_end(&j->cm)) {
    coverage_failed(j);
    return -1;
  }
  if (cli_coverage_write(&j->cm, 1, on, "json", cov_json) || cli_coverage_write(&j->cm, 1, on, "md", cov_md))
    j->rc = j->rc ? j->rc : EXIT_BAD_INPUT;
  for (int t = MAP_TARGET_ASCEND; t < MAP_TARGET_COUNT; t++) {
    if ((t == MAP_TARGET_MINDSPORE && j->ms_model) || (t == MAP_TARGET_ASCEND && j->asc_model))
      continue; /* its emitter has spoken */
    double rate = converted_rate(cov_json, map_target_name(t));
    fprintf(stderr, "convert: %s: %.1f%% of nodes mappable (coverage.md); not written (add --target %s)\n",
            map_target_name(t), rate < 0 ? 0 : 100 * rate, map_target_name(t));
    if (j->strict && j->want[t] && rate < 1) {
      strict_names_coverage(cov_json, map_target_name(t));
      j->rc = EXIT_BAD_INPUT;
    }
  }
  return 0;
}

/* With --precision fp16|bf16: what cpu/ holds in 16 bits and what it keeps in
 * float32, and why (cg_half.c), for convert.json; NULL at float32. */
static json_t *cpu_precision_json(const convert_job *j) {
  const cg_report *r = &j->cpu_report;
  if (!j->o.weights16) return NULL;
  return json_pack("{s:s,s:i,s:{s:i,s:i,s:i},s:i,s:s,s:s,s:s}", "weights", j->precision, "weights_16bit", r->n_w16,
                   "kept_float32", "small", r->n_w32_small, "normalisation", r->n_w32_norm, "beyond_float16_range",
                   r->n_w32_range, "small_below_elements", CG_W16_MIN, "activations", "float32", "accumulation",
                   "float32", "expansion", "per layer, into one arena area, just before its kernel");
}

/* OUTDIR/convert.json, which `migc verify OUTDIR` reads. */
static int write_record(convert_job *j) {
  if (write_convert_json(j->outdir, j->model, j->weights, j->key, j->targets, j->precision, &j->o, j->cpu_only, j->ov, j->n_ov,
                         j->o.quant, cpu_precision_json(j), &j->d))
    j->rc = j->rc ? j->rc : EXIT_BAD_INPUT;
  fprintf(stderr, "convert: wrote %s in %.2f s%s\n", j->outdir, seconds() - j->t0,
          j->rc == EXIT_BAD_INPUT && j->strict ? " (--strict: some nodes were not converted)" : "");
  return 0;
}

/* The pipeline: import once, prepare once with the input shapes (binding the
 * weights), then every output from that one prepared model. */
static int convert_run(convert_job *j) {
  j->t0 = seconds();
  /* a failing step stops the ones after it; j->rc holds the verdict either way */
  (void)(check_precision(j) || import_model(j) || begin_coverage(j) || prepare_model(j) || quantise_model(j) || emit_cpu(j) ||
         write_quant(j) || write_checkpoint(j) ||
         emit_mindspore_net(j) || write_ms_package(j) || emit_ascend_program(j) || write_coverage(j) ||
         write_record(j));
  return j->rc;
}

/* Without --force, what this conversion would write must not exist yet in
 * OUTDIR: refused here, before anything is written, so that a refusal never
 * leaves a folder half old and half new. A folder counts when it holds anything
 * (an empty one is harmless); a file by the output rule (core/outfile.h), which
 * also refuses an input of this run with --force. EXIT_OK, or EXIT_BAD_INPUT
 * after saying which entries exist. */
static int check_outdir(const convert_job *j) {
  const char *mine[9];
  int n = 0;
  mine[n++] = "cpu", mine[n++] = "convert.json";
  if (!j->cpu_only) {
    mine[n++] = "model.ckpt", mine[n++] = "weight_map.json", mine[n++] = "coverage.json", mine[n++] = "coverage.md";
    if (j->want[MAP_TARGET_MINDSPORE]) mine[n++] = "mindspore", mine[n++] = "modelarts";
    if (j->want[MAP_TARGET_ASCEND]) mine[n++] = "ascend";
  }
  mg_diags d;
  mg_diags_init(&d);
  char found[512] = "";
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", j->outdir, mine[i]);
    struct stat st;
    int exists = !lstat(path, &st), dir = exists && S_ISDIR(st.st_mode);
    if (dir) { /* an empty folder holds nothing to lose */
      DIR *dp = opendir(path);
      struct dirent *e;
      exists = 0;
      while (dp && !exists && (e = readdir(dp))) exists = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
      if (dp) closedir(dp);
    }
    if (j->force && !dir) mg_out_check(path, 1, &d); /* an input, or not a regular file */
    else if (exists && !j->force)
      snprintf(found + strlen(found), sizeof found - strlen(found), "%s%s%s", *found ? ", " : "", mine[i],
               dir ? "/" : "");
  }
  if (*found) {
    const char *saved = d.file;
    d.file = j->outdir;
    mg_error(&d, IO, NULL, NULL, "holds %s of an earlier conversion; --force replaces what this conversion writes",
             found);
    d.file = saved;
  }
  int rc = d.errors ? EXIT_BAD_INPUT : EXIT_OK;
  cli_report(&d);
  mg_diags_free(&d);
  return rc;
}

static void convert_free(convert_job *j) {
  mg_diags_free(&j->d);
  if (j->have_cm) coverage_free(&j->cm);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(j->rs[t]);
  mg_free(j->binds);
  wt_rules_free(j->rules);
  wt_close(j->src);
  mg_model_free(j->ms_model); /* before m, whose data they share */
  mg_model_free(j->asc_model);
  mg_model_free(j->m);
}

int cmd_convert(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  convert_job j = {.targets = "cpu", .o = {.prefix = "model", .symbolic_batch = 1}, .rc = EXIT_OK, .precision = "fp32", .calib_method = "percentile",
                   .ms_runtime = MS_PACKAGE_DEFAULT_RUNTIME, .model_algorithm = MS_PACKAGE_DEFAULT_ALGORITHM};
  int rc = parse_args(argc, argv, &j);
  if (rc != EXIT_OK) return rc;
  const char *inputs[] = {j.model, j.weights};
  cli_output_rule(j.force, inputs, 2);
  if ((rc = check_outdir(&j)) != EXIT_OK) return rc;
  if (make_dirs(j.outdir)) {
    fprintf(stderr, "migc convert: cannot create %s: %s\n", j.outdir, strerror(errno));
    return EXIT_BAD_INPUT;
  }
  mg_diags_init(&j.d);
  rc = convert_run(&j);
  cli_report(&j.d);
  qc_free(&j.qp);
  cg_quant_free(&j.quant);
  convert_free(&j);
  return rc;
}
