/* Slice's index arithmetic, shared by shape inference, constant folding, the
 * reference interpreter and the C emitter, so that one clamp decides every
 * slice everywhere.
 *
 * The semantics are ONNX's: a negative start or end counts from the end (dim is
 * added once); then, stepping forward, start and end are clamped to [0, dim];
 * stepping backward, start is clamped to [0, dim - 1] and end to [-1, dim - 1].
 * The slice takes start, start + step, ... while before end. */
#ifndef MG_SLICE_GEOM_H
#define MG_SLICE_GEOM_H
#include <stdint.h>

/* One axis of length dim (>= 0) sliced by start, end, step: the first index taken
 * (*first, clamped as above even when nothing is taken) and how many (*count).
 * Returns 0, or -1 for step 0 (the callers word the diagnostic). */
int mg_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                  int64_t *count);
#endif
