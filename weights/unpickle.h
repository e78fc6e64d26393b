/* A restricted pickle VM for torch checkpoints: it builds plain values (ints,
 * floats, strings, tuples, lists, dicts) and interprets the handful of torch
 * rebuild functions natively, and it executes nothing.
 *
 * Like torch.load(weights_only=True), GLOBAL resolves names against a fixed
 * allow-list (collections.OrderedDict, torch._utils._rebuild_*, torch storage
 * classes and dtypes, torch.Size, torch.Tensor, torch.nn.parameter.Parameter,
 * builtins.set/frozenset, _codecs.encode for protocol-2 bytes). Any other global stops the load at once with an error
 * that names it, so REDUCE can only ever reach the allow-listed functions, which
 * are evaluated here in C. Persistent ids must be torch storage tuples; they become
 * storage records shared by key (several tensors may view one storage).
 *
 * Every object lives in the context's arena: a load allocates at most a small
 * multiple of its input, and freeing is one arena destroy. The VM is iterative;
 * consumers that walk the result must bound their depth and visits, because a
 * pickle can build cycles and exponentially shared DAGs out of a few bytes. */
#ifndef MG_WEIGHTS_UNPICKLE_H
#define MG_WEIGHTS_UNPICKLE_H
#include "arena.h"
#include "diag.h"
#include "dtype.h"
#include "weights.h"
#include <stddef.h>
#include <stdint.h>

typedef enum {
  PK_NONE, PK_BOOL, PK_INT, PK_BIGINT, PK_FLOAT, PK_STR, PK_BYTES,
  PK_TUPLE, PK_LIST, PK_DICT, PK_SET,
  PK_GLOBAL,  /* an allow-listed global (function, class or dtype) */
  PK_STORAGE, /* a resolved persistent id */
  PK_TENSOR
} pk_kind;

/* What an allow-listed global is; the VM interprets each natively. */
typedef enum {
  PKG_ORDERED_DICT, PKG_REBUILD_TENSOR, PKG_REBUILD_TENSOR_V2, PKG_REBUILD_TENSOR_V3,
  PKG_REBUILD_PARAMETER, PKG_REBUILD_PARAMETER_WITH_STATE, PKG_REBUILD_FROM_TYPE_V2,
  PKG_STORAGE_TYPE, PKG_DTYPE, PKG_SIZE, PKG_TENSOR_TYPE, PKG_PARAMETER_TYPE, PKG_SET,
  PKG_FROZENSET, PKG_CODECS_ENCODE
} pk_global_id;

/* One storage, shared by every persistent id with its key. */
typedef struct pk_storage {
  const char *key;      /* the entry name under data/ (zip), or the legacy key */
  const char *type_name;/* "torch.FloatStorage", for messages */
  mg_dtype dtype;       /* element type of the storage class (uint8 for untyped) */
  int64_t numel;        /* elements, as the persistent id declares */
  int order;            /* first-appearance order among the context's storages */
  int index;            /* wt_source storage index once bound; -1 before */
  int64_t data_offset;  /* legacy format: where its bytes start in the file */
} pk_storage;

typedef struct pk_obj pk_obj;
struct pk_obj {
  pk_kind kind;
  union {
    int b;           /* PK_BOOL */
    int64_t i;       /* PK_INT */
    double f;        /* PK_FLOAT */
    struct {         /* PK_STR (UTF-8, NUL-terminated copy), PK_BYTES, PK_BIGINT (LE bytes) */
      const char *s;
      size_t n;
    } str;
    struct {         /* PK_TUPLE, PK_LIST, PK_SET */
      pk_obj **items;
      size_t n, cap;
    } seq;
    struct {         /* PK_DICT: insertion order; a repeated key is kept (lookups take the last) */
      pk_obj **keys, **vals;
      size_t n, cap;
    } dict;
    struct {         /* PK_GLOBAL */
      pk_global_id id;
      const char *name;  /* "torch._utils._rebuild_tensor_v2" */
      mg_dtype dtype;    /* PKG_DTYPE, PKG_STORAGE_TYPE */
    } global;
    struct {         /* PK_STORAGE: a (legacy: view of a) storage */
      pk_storage *st;
      int64_t offset;    /* legacy view offset, in elements */
    } storage;
    struct {         /* PK_TENSOR */
      pk_storage *st;
      mg_dtype dtype;
      int rank;
      int64_t offset;    /* in elements of dtype */
      int64_t dims[WT_MAX_RANK], strides[WT_MAX_RANK];
    } tensor;
  } u;
};

typedef struct pk_ctx pk_ctx;

/* A context: arena plus the storage table shared by the loads made with it (the
 * legacy format's storages are declared in one pickle and listed in the next).
 * NULL on allocation failure. */
pk_ctx *pk_new(void);
void pk_free(pk_ctx *c);
/* Unpickles one pickle from buf[0, len). On success returns 0, sets *out to the
 * object and *used to the bytes consumed through STOP. On bad input records a
 * diagnostic (naming `what`, e.g. "data.pkl") and returns -1. */
int pk_load(pk_ctx *c, const unsigned char *buf, size_t len, const char *what, size_t *used,
            pk_obj **out, mg_diags *d);
/* The storage with `key`, or NULL. */
pk_storage *pk_storage_find(pk_ctx *c, const char *key);

/* Value of a dict entry whose key is the string `key` (the last such entry), or
 * NULL. */
pk_obj *pk_dict_get(const pk_obj *dict, const char *key);
/* "dict", "tensor", ... for messages. */
const char *pk_kind_name(pk_kind k);

/* ---- choosing tensors (pth_select.c), shared by pth.c's readers ---- */

typedef struct pth_collect_ctx pth_collect_ctx;
struct pth_collect_ctx {
  wt_source *s;   /* where tensors are listed */
  mg_diags *d;
  /* Makes st a storage of s (once: st->index caches it); returns its index, or -1
   * with a diagnostic naming `tensor`. */
  int (*bind)(pth_collect_ctx *cl, pk_storage *st, const char *tensor);
  void *bind_ctx;
  long visits, max_visits; /* objects walked, and the budget (pth_visit_budget) */
  /* Internal to pth_collect: */
  char *path;              /* the name being built, NUL-terminated */
  size_t path_len, path_cap;
  const char **names;      /* set of listed names, for duplicates */
  size_t names_cap, n_names;
};
/* The walk budget for an object unpickled from pickle_len bytes. */
long pth_visit_budget(size_t pickle_len);
/* Lists the tensors of root into cl->s: those under the dotted `key`, or (key NULL
 * or "") the one shallowest dict of tensors. Each tensor's storage is bound and its
 * view checked to lie inside it. 0, or -1 with a diagnostic. */
int pth_collect(pth_collect_ctx *cl, const pk_obj *root, const char *key);

/* ---- entry points over memory buffers (the fuzzer's; also used by tests) ---- */

/* pth_open over a buffer that outlives the source: a zip archive or the legacy
 * format, chosen by content. */
int pth_open_buffer(const void *buf, size_t len, const char *key, wt_source **out, mg_diags *d);
/* A bare data.pkl with no archive around it: tensors are listed, and each storage
 * reads as zeros of its declared size (no storage bytes exist). For fuzzing the
 * unpickler and the tensor selection without a zip. */
int pth_open_pickle_buffer(const void *buf, size_t len, const char *key, wt_source **out,
                           mg_diags *d);
/* safetensors_open over a buffer that outlives the source. */
int safetensors_open_buffer(const void *buf, size_t len, wt_source **out, mg_diags *d);
#endif
