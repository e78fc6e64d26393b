/* The MindSpore target's deployment files (issue 12 items 2, 4 and 6), written
 * beside net.py from the prepared graph's inputs and outputs:
 *
 *   OUTDIR/mindspore/export.py            mindspore.export to MINDIR or AIR
 *   OUTDIR/mindspore/README.md            run, train, export, deploy
 *   OUTDIR/mindspore/converter_lite.cfg   [ascend_context] input_format, input_shape
 *   OUTDIR/mindspore/convert_lite.sh      the converter_lite command line
 *   OUTDIR/mindspore/atc.sh               the atc command line (the AIR, --framework=1)
 *   OUTDIR/modelarts/model/               the ModelArts package: config.json,
 *                                         customize_service.py, net.py, model.ckpt, tmp.om
 *
 * The formats are ../shared/targets/facts.md 1.1-1.6. Every model string (input,
 * output and dim names) is escaped for the file it goes into, so a hostile name
 * can neither break a file nor run anything. */
#ifndef MG_CG_MS_PACKAGE_H
#define MG_CG_MS_PACKAGE_H
#include "diag.h"
#include "ir.h"

/* A documented MindSpore + CANN runtime: facts.md 1.2, "Runtime strings seen"
 * (opentelekomcloud-docs/modelarts, introduction_to_model_management.rst, Table 2).
 * Which runtimes exist depends on the region, hence --modelarts-runtime. */
#define MS_PACKAGE_DEFAULT_RUNTIME "mindspore_2.0.0-cann_6.3.0-py_3.7-euler_2.8.3-aarch64"
/* The one generic example of facts.md 1.2's model_algorithm (the others name a
 * task: image_classification, object_detection). */
#define MS_PACKAGE_DEFAULT_ALGORITHM "predict_analysis"

typedef struct {
  const char *runtime;         /* config.json "runtime": passes ms_package_runtime_check */
  const char *model_algorithm; /* config.json "model_algorithm": passes ms_package_algorithm_check */
  const char *checkpoint;      /* OUTDIR/model.ckpt as this conversion wrote it; NULL: none (no parameters) */
  const char *precision;       /* its float parameters: "fp16", "bf16", or NULL / "fp32" (as given) */
  const char *quant_method;    /* --precision int8: [full_quant_param] activation_quant_method
                                  (MAX_MIN, KL or REMOVAL_OUTLIER); NULL: no quantisation sections */
  const char *calib_dir;       /* int8: the calibration .bin files' folder, relative to mindspore/ */
  int calib_size;              /* int8: how many there are */
} ms_package_opts;

/* NULL when name is a valid config.json model_algorithm (facts.md 1.2: starts
 * with a letter, at most 36 characters, none of & ! ' " < > =), else the rule it
 * breaks, as a sentence. */
const char *ms_package_algorithm_check(const char *name);
/* NULL when s can be a config.json runtime: 1 to 128 characters of letters,
 * digits, '.', '_' and '-' (the naming rule <engine+ver>-<CPU|CUDA|CANN
 * ver>-<python>-<OS>-<arch> of facts.md 1.2 uses no others); else why not. */
const char *ms_package_runtime_check(const char *s);

/* Writes the files above for m, the model net.py was written from (its graph
 * inputs and outputs in order, their dtypes and shapes, symbolic dims by name),
 * into outdir (which holds mindspore/net.py). The checkpoint goes into the
 * package as a hard link where the file system allows one, else as a streamed
 * copy. Every file is written to a temporary name and renamed. Returns 0; 1 when
 * the graph cannot be packaged (an input or output dtype with no JSON and numpy
 * form, a name that is not UTF-8), nothing written and each reason an error on d;
 * -1 on an I/O or memory failure (on d), some files perhaps written. */
int ms_write_package(const mg_model *m, const char *outdir, const ms_package_opts *o, mg_diags *d);
#endif
