/* Resize geometry, shared by shape inference, the reference interpreter and the
 * C emitter, so that one formula decides the output length and the input taps of
 * every output coordinate everywhere.
 *
 * The semantics are ONNX's specification as PyTorch computes it, because a
 * migrated model must compute what the torch model computed:
 * - every coordinate formula uses the integer output length (align_corners:
 *   x * (L - 1) / (O - 1)), never the unrounded scale * L;
 * - the output length of a given scale is floor(L * scale) with the product in
 *   float32, as torch's exporter intends and ONNX Runtime computes it (5 * 1.8f
 *   is 9, not the 8 a float64 product of the float32 scale gives);
 * - nearest-neighbour coordinates are computed in float32 with the inverse scale,
 *   as torch's kernels do (floorf(x * (float)(1 / scale))), since they sit exactly
 *   on integers for the decimal scales users write (3 / 0.6), where a float64
 *   quotient of the float32 scale falls just below. Linear and cubic weights are
 *   computed in float64;
 * - a linear half_pixel (or pytorch_half_pixel) axis whose output length equals
 *   its input length is copied whatever the scale, as torch's linear kernels do
 *   (its nearest and cubic kernels apply the scale). */
#ifndef MG_RESIZE_GEOM_H
#define MG_RESIZE_GEOM_H
#include "ir.h"
#include <stdint.h>

enum { MG_RZ_MAX_TAPS = 4 };
enum { MG_RZ_HALF_PIXEL, MG_RZ_PYTORCH_HALF_PIXEL, MG_RZ_ALIGN_CORNERS, MG_RZ_ASYMMETRIC,
       MG_RZ_TF_HALF_PIXEL_FOR_NN, MG_RZ_TF_CROP_AND_RESIZE };
enum { MG_RZ_ROUND_PREFER_FLOOR, MG_RZ_ROUND_PREFER_CEIL, MG_RZ_FLOOR, MG_RZ_CEIL };
enum { MG_RZ_NEAREST, MG_RZ_LINEAR, MG_RZ_CUBIC };

typedef struct {
  int mode;            /* MG_RZ_NEAREST, _LINEAR or _CUBIC */
  int ctm;             /* coordinate_transformation_mode */
  int nearest;         /* nearest_mode */
  int exclude_outside; /* cubic: taps outside the input get weight 0, the rest renormalised */
  double cubic_a;      /* cubic_coeff_a */
} mg_resize_opts;

/* One axis: input length, output length, and the scale the formulas use (the
 * given float32 scale, or out/in when sizes were given). */
typedef struct {
  int64_t in_len, out_len;
  double scale;
  int scale_given;          /* scale came from the scales input (not from sizes) */
  double roi_start, roi_end;/* tf_crop_and_resize: the axis' roi, normalised */
} mg_rz_axis;

/* Reads Resize's mode attributes. On a value migc does not implement (antialias
 * included) returns -1 and points *attr and *value at what to report. */
int mg_resize_read_opts(const mg_node *n, mg_resize_opts *o, const char **attr, const char **value);

/* The output length of an axis of length len under `scale`: floor of the float32
 * product; -1 when it is not a finite length (scale <= 0, NaN, or too large). */
int64_t mg_resize_scaled_len(int64_t len, float scale);

/* The output length of an axis of length len under keep_aspect_ratio_policy
 * not_larger/not_smaller with the common scale s: round(s * len). -1 if too large. */
int64_t mg_resize_policy_len(int64_t len, double s);

/* The taps of output coordinate j: input indices (clamped to [0, in_len)) and
 * weights, zero weights dropped. Returns their count (1..MG_RZ_MAX_TAPS), or 0
 * when the output is extrapolated (tf_crop_and_resize outside the input). */
int mg_resize_taps(const mg_resize_opts *o, const mg_rz_axis *a, int64_t j, int64_t *idx, double *w);

/* The geometry of every axis of a Resize of an input with dims xd[0..rank):
 * from sizes (n_sizes values, with keep_aspect_ratio_policy) or else scales
 * (n_scales values), restricted to the node's `axes`, and for tf_crop_and_resize
 * the roi (n_roi values: 2 per resized axis, or 2 per axis). n_sizes = 0 and
 * n_scales = 0 mean the input is absent. Axes not resized get out_len = in_len
 * and scale 1. Returns 0, or -1 with *err set to a static message. */
int mg_resize_geometry(const mg_node *n, const mg_resize_opts *o, int rank, const int64_t *xd,
                       const float *scales, int n_scales, const int64_t *sizes, int n_sizes,
                       const double *roi, int n_roi, mg_rz_axis *ax, const char **err);
#endif
