/* Sliding-window geometry (Conv, ConvInteger, QLinearConv, ConvTranspose, the
 * pools, Col2Im), shared by shape inference, the auto_pad preparation pass, the
 * reference interpreter, its VJPs and the C emitter, so that one formula decides
 * every output size and pad everywhere.
 *
 * The semantics are ONNX's: auto_pad SAME_UPPER / SAME_LOWER give ceil(in /
 * stride) outputs with the total padding split evenly, the odd one at the end
 * (UPPER) or the beginning (LOWER); VALID pads nothing; NOTSET reads `pads`;
 * ceil_mode rounds the output up as the pools define it (the last window must
 * start inside the input or its begin padding). ConvTranspose derives its total
 * padding from output_shape or, under SAME_*, from in * stride, SAME_UPPER putting
 * the odd one at the end and everything else at the beginning.
 *
 * Validation returns a status, never a message: each caller words its own
 * diagnostics, and passes its own bounds (mg_win_limits), so that size arithmetic
 * cannot overflow under the limits each stage supports. */
#ifndef MG_WINDOW_GEOM_H
#define MG_WINDOW_GEOM_H
#include "ir.h"
#include <stdint.h>

enum { MG_PAD_NOTSET, MG_PAD_VALID, MG_PAD_SAME_UPPER, MG_PAD_SAME_LOWER };
enum { MG_WIN_ND = MG_MAX_RANK - 2 }; /* spatial dims at most */

typedef enum {
  MG_WIN_OK = 0,
  MG_WIN_ATTR_LENGTH,  /* strides, dilations, pads (output_padding, output_shape) do not match nd */
  MG_WIN_AUTO_PAD,     /* auto_pad is none of NOTSET, VALID, SAME_UPPER, SAME_LOWER */
  MG_WIN_NOT_POSITIVE, /* a kernel, stride or dilation below 1 (a negative output_padding) */
  MG_WIN_TOO_LARGE,    /* a kernel, stride, dilation or output_padding above the limit, or overflow */
  MG_WIN_NEGATIVE_PAD, /* a negative pad of a (non-transposed) window */
  MG_WIN_PAD_TOO_LARGE,/* a pad beyond the limit (in magnitude) */
  MG_WIN_EMPTY,        /* the kernel is larger than the padded input; a negative transposed output */
} mg_win_status;

/* The largest kernel, stride, dilation or output_padding, and pad magnitude, a
 * caller accepts. */
typedef struct {
  int64_t window, pad;
} mg_win_limits;

/* A window over nd spatial dims: input sizes, kernel, strides, dilations, begin
 * and end pads, output sizes; mode is the MG_PAD_* it was computed under. An
 * unknown input size (negative) gives an unknown output (-1), and under SAME_*
 * unknown pads (-1). */
typedef struct {
  int nd, mode;
  int64_t in[MG_WIN_ND], k[MG_WIN_ND], s[MG_WIN_ND], d[MG_WIN_ND], pb[MG_WIN_ND], pe[MG_WIN_ND],
      out[MG_WIN_ND];
} mg_window;

/* n's auto_pad as MG_PAD_* (NOTSET when the op has no such attribute, as Col2Im);
 * -1 for a value ONNX does not define. */
int mg_window_auto_pad(const mg_node *n, int *mode);

/* One axis of a window under mode: input size in (negative: unknown), kernel k,
 * stride s, dilation d, and the explicit pads pb, pe (read only under NOTSET).
 * Writes the pads used and the output size. */
mg_win_status mg_window_axis(int mode, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                             int64_t pe, int ceil_mode, const mg_win_limits *lim, int64_t *pb_out,
                             int64_t *pe_out, int64_t *out);

/* The window of n (strides, dilations, pads, auto_pad) over nd spatial dims of
 * sizes in[] with kernel k[] (1 <= nd <= MG_WIN_ND; the caller checks its own
 * bound first). Stops at the first axis that fails. */
mg_win_status mg_window_init(const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                             int ceil_mode, const mg_win_limits *lim, mg_window *g);

/* ConvTranspose's window over nd spatial dims: in[] are the input sizes, out[]
 * the output sizes, and pb[] / pe[] the pads of the equivalent explicit form
 * (negative when the output grows past the full transposed size). An unknown
 * input size or kernel (negative) gives an unknown output unless output_shape
 * gives it. */
mg_win_status mg_window_transpose(const mg_node *n, int nd, const int64_t *in, const int64_t *k,
                                  const mg_win_limits *lim, mg_window *g);
#endif
