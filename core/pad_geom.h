/* Pad's geometry, shared by the reference interpreter and the C emitter: the
 * mode, the region negative pads crop, and the input index of every output index
 * along an axis, as the ONNX reference defines them (reflect mirrors without
 * repeating the edge, edge repeats it, wrap is periodic; a one-element axis
 * reflects onto itself). */
#ifndef MG_PAD_GEOM_H
#define MG_PAD_GEOM_H
#include <stdint.h>

enum { MG_PADM_CONSTANT, MG_PADM_REFLECT, MG_PADM_EDGE, MG_PADM_WRAP };

/* The MG_PADM_* of Pad's mode attribute; -1 for one ONNX does not define. */
int mg_pad_mode(const char *mode);

/* An axis of length dim padded by pb at the begin and pe at the end: negative pads
 * crop first, leaving the region [*start, *start + *len) (*len < 0: cropped below
 * zero). */
void mg_pad_crop(int64_t dim, int64_t pb, int64_t pe, int64_t *start, int64_t *len);

/* The index in the cropped region (length len >= 1 for the non-constant modes)
 * that output index o reads, lead being the begin pad (0 when it crops); -1 when
 * o falls in the constant mode's padding. */
int64_t mg_pad_source(int mode, int64_t o, int64_t lead, int64_t len);
#endif
