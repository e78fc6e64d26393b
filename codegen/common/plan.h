/* Memory planning by liveness (codegen/common/plan.c). */
#ifndef MG_CG_PLAN_H
#define MG_CG_PLAN_H
#include <stddef.h>

/* One arena buffer: live from step `first` to step `last`, both inclusive (steps
 * are node indices). */
typedef struct {
  int value;       /* owner value id */
  size_t bytes;    /* already rounded up to the target's alignment */
  int first, last;
  size_t offset;   /* set by cg_assign_offsets */
} cg_buffer;

/* Greedy best-fit offsets (largest first): buffers live at the same step never
 * overlap. Returns the arena size, or (size_t)-1 on OOM. */
size_t cg_assign_offsets(cg_buffer *bufs, int n);
/* The most bytes alive at one step of `steps`: no plan can use less. */
size_t cg_plan_lower_bound(const cg_buffer *bufs, int n, int steps);
#endif
