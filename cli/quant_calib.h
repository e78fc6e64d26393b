/* --precision int8's calibration (docs/precision.md): activation ranges measured
 * with the reference interpreter over calibration inputs, the scales derived
 * from them (min-max, percentile, or TensorRT's entropy method), and quant.json,
 * which records them and can be read back with --quant-params. */
#ifndef MIGC_QUANT_CALIB_H
#define MIGC_QUANT_CALIB_H
#include "codegen.h"
#include "diag.h"
#include "ir.h"

typedef enum { QC_MINMAX, QC_PERCENTILE, QC_KL } qc_method;

/* One calibrated activation: the cg_q8_act the generator reads and what the
 * scale came from. */
typedef struct {
  double min, max;       /* over every sample */
  double threshold;      /* |x| the scale covers (the method's choice) */
} qc_range;

typedef struct {
  char model_hash[65];   /* sha256 of the model and weights files (qc_model_hash) */
  qc_method method;
  double percentile;     /* QC_PERCENTILE */
  int samples;
  cg_q8_act *acts;       /* names owned */
  qc_range *ranges;
  int n_acts;
} qc_params;

/* The method named by --calib-method ("minmax", "percentile", "kl"), or -1. */
int qc_method_of(const char *name);
const char *qc_method_name(qc_method m);

/* The model's identity for quant.json: sha256 over the model file's and the
 * weights file's (may be NULL) hashes. 0, or -1 when a file cannot be read. */
int qc_model_hash(const char *model, const char *weights, char hex[65]);

/* Runs the prepared fp32 model m with the interpreter over every sample of path
 * (a folder of .npy files, or one .npz; each array one sample of m's single
 * input, or a stack of them along a leading dim the input has as 1), and fills
 * q's activations for every Conv input. 0, or -1 with a diagnostic (bad folder,
 * shapes, dtypes, a failing run). */
int qc_calibrate(mg_model *m, const char *path, qc_method method, double percentile, qc_params *q, mg_diags *d);

/* Reads quant.json at path into q; a file for another model (hash differs from
 * model_hash) or of another form is an error. 0 or -1. */
int qc_read(const char *path, const char *model_hash, qc_params *q, mg_diags *d);

/* Writes q and the per-channel weight scales of the layers in layers (emit_c's
 * report) to path by the output rule. 0 or -1. */
int qc_write(const char *path, const char *model, const qc_params *q, const cg_quant *layers, mg_diags *d);

void qc_free(qc_params *q);

/* MindSpore Lite's [full_quant_param] activation_quant_method for a method
 * (facts.md: MAX_MIN, KL, REMOVAL_OUTLIER; percentile clipping is the outlier
 * removal). */
const char *qc_lite_method(qc_method m);

/* The calibration samples of path as converter_lite's input_type=BIN files
 * (raw float32, a 4-D input in NHWC, as facts.md's [data_preprocess_param]
 * asks), dir/sample_NNNNN.bin, by the output rule; *count is how many. 0 or -1. */
int qc_write_lite_samples(mg_model *m, const char *path, const char *dir, int *count, mg_diags *d);

/* convert.json's "int8" section: the layers that run int8 and those that stay
 * float32, with the reason. */
struct json_t;
struct json_t *qc_layers_json(const cg_quant *q);
#endif
