/* Internal declarations of the strict CANN aclnn emulator (docs/ascend-emulator.md).
 * The emulator implements the facts of ../shared/aclnn-api.json and facts.md §3 for
 * the Atlas A2/A3 (910B) product column, and nothing else: a function it does not
 * implement does not exist (link error), and a behaviour the facts do not settle is
 * refused with an error, never approximated. C99, no dependency outside ascend_emu/. */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include "acl_all.h"

#define EMU_MAXDIM 8 /* the op notes allow at most 8 dims ("<=8 dims", "0-8 dims") */
#define EMU_MAXT 40  /* tensors one executor may reference */

/* ---- objects --------------------------------------------------------------------- */
typedef enum {
  EK_TENSOR = 1, EK_INTARRAY, EK_FLOATARRAY, EK_BOOLARRAY, EK_SCALAR, EK_TENSORLIST,
  EK_EXECUTOR, EK_STREAM, EK_COUNT
} emu_kind;

typedef struct emu_stream emu_stream;
typedef struct emu_obj {
  emu_kind kind;
  unsigned serial;      /* per kind, from 1 */
  const char *creator;  /* function that created it */
  int alive;            /* 0 once destroyed (the memory stays as a tombstone) */
  const char *killer;   /* function that destroyed or consumed it */
  emu_stream *pending;  /* stream with queued work that uses it, until synchronized */
} emu_obj;

typedef struct emu_buf {
  unsigned serial;
  size_t off, size; /* place in the arena, bytes requested */
  int alive, device;
  emu_stream *pending;
} emu_buf;

struct emu_stream { emu_obj h; int device; int queued; };

struct aclTensor {
  emu_obj h;
  int ndim, sndim;
  int64_t dims[EMU_MAXDIM], strides[EMU_MAXDIM], sdims[EMU_MAXDIM];
  int64_t offset;
  aclDataType dtype;
  aclFormat format;
  char *data;    /* device address */
  emu_buf *buf;
  const aclTensorList *owner; /* list that owns it (aclDestroyTensorList destroys it) */
};
struct aclIntArray { emu_obj h; uint64_t n; int64_t *v; };
struct aclFloatArray { emu_obj h; uint64_t n; float *v; };
struct aclBoolArray { emu_obj h; uint64_t n; bool *v; };
struct aclScalar { emu_obj h; aclDataType dtype; double v; };
struct aclTensorList { emu_obj h; uint64_t n; aclTensor **v; };

typedef aclnnStatus (*emu_run_fn)(aclOpExecutor *ex);
struct aclOpExecutor {
  emu_obj h;
  const char *fn;  /* phase-2 name, e.g. "aclnnAdd" */
  uint64_t ws;     /* workspace size requested in phase 1 */
  int repeatable, runs, device;
  emu_run_fn run;
  int nt;
  aclTensor *t[EMU_MAXT]; /* every tensor the op reads or writes (NULL = absent) */
  int64_t iv[64];         /* integer attributes, copied in phase 1 */
  double dv[8];           /* float attributes, copied in phase 1 */
};

/* ---- state and errors (emu_runtime.c) ------------------------------------------- */
int emu_ready(const char *fn, int need_device); /* 0 or the error status (reported) */
int emu_current_device(void);
int emu_arg_error(int status, const char *fn, const char *param, int pos, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 5, 6)))
#endif
    ;
int emu_fn_error(int status, const char *fn, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
emu_buf *emu_buf_of(const void *p);     /* buffer whose device range holds p, or NULL */
int emu_in_device_range(const void *p); /* inside the device arena at all */
char *emu_shadow(const void *dev);      /* host-usable address for a device address */
size_t emu_buf_offset(const emu_buf *b, const void *p); /* byte offset of p in b */
emu_stream *emu_stream_of(aclrtStream s, const char *fn, const char *param, int pos, int *status);
void emu_mark_pending(emu_buf *b, emu_stream *s);

/* ---- objects (emu_objects.c) ---------------------------------------------------- */
void *emu_obj_new(emu_kind kind, size_t size, const char *creator);
emu_obj *emu_lookup(const void *p);
const char *emu_kind_name(emu_kind k);
void emu_report_leaks(unsigned *leaks);
void emu_objects_release(void);
void emu_sync_objects(emu_stream *s);
int emu_check_obj(const char *fn, const char *param, int pos, const void *p, emu_kind kind,
                  int required);

size_t emu_dtype_size(aclDataType dt); /* 0 when the emulator cannot hold it */
const char *emu_dtype_name(aclDataType dt);
const char *emu_format_name(aclFormat f);
int emu_is_float(aclDataType dt);
double emu_get(const char *p, aclDataType dt);
void emu_put(char *p, aclDataType dt, double v);
int64_t emu_numel(const aclTensor *t);
char *emu_shape_str(const int64_t *d, int n, char *buf, size_t len);

/* Strided access: an index space (dims) walked in row-major order over an element
 * layout (strides, offset, in elements) of a tensor's device data. */
typedef struct { int nd; int64_t dims[EMU_MAXDIM], strides[EMU_MAXDIM], offset; } emu_view;
emu_view emu_view_of(const aclTensor *t);
int emu_view_bcast(const aclTensor *t, const int64_t *dims, int nd, emu_view *v);
void emu_gather(const aclTensor *t, const emu_view *v, void *dst);  /* raw elements */
void emu_scatter(aclTensor *t, const void *src);                  /* raw, through view */
void emu_scatter_view(aclTensor *t, const emu_view *v, const void *src); /* raw, into v */
double *emu_load(const aclTensor *t);                             /* dense doubles */
double *emu_load_view(const aclTensor *t, const emu_view *v);
void emu_store(aclTensor *t, const double *v);                    /* rounds per dtype */
void *emu_xmalloc(size_t n);

/* ---- phase 1 / phase 2 framework ------------------------------------------------ */
aclOpExecutor *emu_exec_new(const char *fn, uint64_t ws, emu_run_fn run);
int emu_phase1_outs(const char *fn, uint64_t *ws, int ws_pos, aclOpExecutor **ex);
aclnnStatus emu_phase1_done(aclOpExecutor *e, uint64_t *ws, aclOpExecutor **ex);
aclnnStatus emu_phase2(const char *fn, void *ws, uint64_t wsSize, aclOpExecutor *ex,
                       aclrtStream stream);

/* argument checks: each returns 0 or the status after reporting the violation */
int emu_need_tensor(const char *fn, const char *p, int pos, const aclTensor *t, int required);
int emu_need_dtype(const char *fn, const char *p, int pos, const aclTensor *t,
                   const aclDataType *ok, int nok, const char *fact);
int emu_need_rank(const char *fn, const char *p, int pos, const aclTensor *t, int lo, int hi,
                  const char *fact);
int emu_need_format(const char *fn, const char *p, int pos, const aclTensor *t, aclFormat f,
                    const char *fact);
int emu_need_same_dtype(const char *fn, const char *p, int pos, const aclTensor *t,
                        const aclTensor *ref, const char *refname);
int emu_need_shape(const char *fn, const char *p, int pos, const aclTensor *t,
                   const int64_t *dims, int nd, const char *why);
int emu_need_array(const char *fn, const char *p, int pos, const aclIntArray *a, int required);
int emu_need_scalar(const char *fn, const char *p, int pos, const aclScalar *s, int required);
int emu_broadcast(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout);

extern const aclDataType EMU_FLOATS[3]; /* FLOAT, FLOAT16, BF16 */

/* phase 2 of an op: every check lives in emu_phase2 */
#define EMU_PHASE2(name)                                                                      \
  aclnnStatus name(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,          \
                   aclrtStream stream) {                                                      \
    return emu_phase2(#name, workspace, workspaceSize, executor, stream);                     \
  }

#define EMU_CHK(expr) do { int s_ = (expr); if (s_) return s_; } while (0)
#endif
