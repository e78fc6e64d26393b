/* C emitters of GridSample and RoiAlign (runtime/sample.c; contract in cg.h).
 * Their positions come from run-time data (the grid, the boxes), so the emitters
 * resolve only the modes and sizes; float32, 4-D input. */
#include "c_nn_util.h"

int cg_emit_GridSample(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *g = n->in[1], *y = n->out[0];
  const char *ms = mg_attr_str(n, "mode", "bilinear"), *ps = mg_attr_str(n, "padding_mode", "zeros");
  int64_t xd[MG_MAX_RANK], gd[MG_MAX_RANK], yd[MG_MAX_RANK], align = mg_attr_int(n, "align_corners", 0);
  const char *mode, *pad;
  if (!nn_is_f32(x) || !nn_is_f32(g) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  /* opset 20 renamed bilinear/bicubic to linear/cubic */
  if (!strcmp(ms, "bilinear") || !strcmp(ms, "linear")) mode = "MG_GS_BILINEAR";
  else if (!strcmp(ms, "nearest")) mode = "MG_GS_NEAREST";
  else if (!strcmp(ms, "bicubic") || !strcmp(ms, "cubic")) mode = "MG_GS_BICUBIC";
  else return cg_unsupported(c, n, "mode '%s'", ms);
  if (!strcmp(ps, "zeros")) pad = "MG_GS_ZEROS";
  else if (!strcmp(ps, "border")) pad = "MG_GS_BORDER";
  else if (!strcmp(ps, "reflection")) pad = "MG_GS_REFLECTION";
  else return cg_unsupported(c, n, "padding_mode '%s'", ps);
  if (align != 0 && align != 1) return cg_unsupported(c, n, "align_corners %lld", (long long)align);
  if (cg_dims(x, xd) != 4) return cg_unsupported(c, n, "input rank %d (4-D only)", cg_dims(x, xd));
  if (cg_dims(g, gd) != 4 || gd[0] != xd[0] || gd[3] != 2)
    return cg_unsupported(c, n, "grid must be [N, H_out, W_out, 2]");
  if (cg_dims(y, yd) != 4 || yd[0] != xd[0] || yd[1] != xd[1] || yd[2] != gd[1] || yd[3] != gd[2])
    return cg_unsupported(c, n, "output shape differs from [N, C, H_out, W_out]");
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(y)) || !nn_fits_int(cg_numel(g)))
    return cg_unsupported(c, n, "tensor too large");
  cg_need(c, "sample.c");
  cg_line(c, "mg_grid_sample2d(%lld, %lld, %lld, %lld, %lld, %lld, %s, %s, %d, %s, %s, %s);",
          (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3], (long long)gd[1],
          (long long)gd[2], mode, pad, (int)align, cg_in(c, x), cg_in(c, g), cg_out(c, y));
  return 0;
}

int cg_emit_RoiAlign(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *rois = n->in[1], *bi = n->in[2], *y = n->out[0];
  const char *ms = mg_attr_str(n, "mode", "avg");
  /* before opset 16 the only behaviour was output_half_pixel */
  const char *cts = n->opset < 16 ? "output_half_pixel"
                                  : mg_attr_str(n, "coordinate_transformation_mode", "half_pixel");
  int64_t xd[MG_MAX_RANK], rd[MG_MAX_RANK], yd[MG_MAX_RANK];
  int64_t oh = mg_attr_int(n, "output_height", 1), ow = mg_attr_int(n, "output_width", 1);
  int64_t sr = mg_attr_int(n, "sampling_ratio", 0);
  int is_max, half;
  char fs[40];
  if (!nn_is_f32(x) || !nn_is_f32(rois) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (!bi || bi->dtype != MG_I64) return cg_unsupported(c, n, "batch_indices must be int64");
  is_max = !strcmp(ms, "max");
  if (!is_max && strcmp(ms, "avg")) return cg_unsupported(c, n, "mode '%s'", ms);
  half = !strcmp(cts, "half_pixel");
  if (!half && strcmp(cts, "output_half_pixel"))
    return cg_unsupported(c, n, "coordinate_transformation_mode '%s'", cts);
  if (oh < 1 || ow < 1 || sr < 0 || oh > (1 << 20) || ow > (1 << 20) || sr > (1 << 20))
    return cg_unsupported(c, n, "output size or sampling_ratio out of range");
  if (cg_dims(x, xd) != 4 || cg_dims(rois, rd) != 2 || rd[1] != 4 || cg_numel(bi) != rd[0])
    return cg_unsupported(c, n, "expected X [N,C,H,W], rois [R,4], batch_indices [R]");
  if (cg_dims(y, yd) != 4 || yd[0] != rd[0] || yd[1] != xd[1] || yd[2] != oh || yd[3] != ow)
    return cg_unsupported(c, n, "output shape differs from [R, C, output_height, output_width]");
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(y)))
    return cg_unsupported(c, n, "tensor too large");
  cg_need(c, "sample.c");
  cg_line(c, "mg_roi_align(%lld, %lld, %lld, %lld, %s, %lld, %lld, %lld, %s, %d, %d, %s, %s, %s, %s);",
          (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3], cg_dim(c, rois, 0),
          (long long)oh, (long long)ow, (long long)sr,
          nn_flit(fs, mg_attr_float(n, "spatial_scale", 1.0f)), is_max, half, cg_in(c, x),
          cg_in(c, rois), cg_in(c, bi), cg_out(c, y));
  return 0;
}
