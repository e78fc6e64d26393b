/* The restricted pickle VM (see unpickle.h): opcodes of protocols 0-5 that build
 * plain values, an allow-list of globals, and native versions of the torch rebuild
 * functions. Nothing is ever called by name. */
#include "unpickle.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pk_ctx {
  mg_arena arena;
  pk_storage **st; /* first-appearance order */
  int n_st, cap_st;
  pk_storage **table; /* key -> storage, open addressing, power-of-two capacity */
  int table_cap;
};

typedef struct {
  pk_ctx *c;
  const unsigned char *start, *p, *end;
  const char *what;
  mg_diags *d;
  pk_obj **stack;
  size_t sp, cap;
  size_t *marks; /* stack heights at each MARK */
  size_t nmarks, cap_marks;
  pk_obj **memo; /* NULL entries are unset */
  size_t memo_cap, memo_set;
  int failed;
} vm;

enum { PK_MAX_TYPE_NESTING = 4 }; /* _rebuild_from_type_v2 wrapping itself */

pk_ctx *pk_new(void) {
  pk_ctx *c = mg_calloc(1, sizeof *c);
  if (!c) return NULL;
  mg_arena_init(&c->arena, 64 * 1024);
  return c;
}

void pk_free(pk_ctx *c) {
  if (!c) return;
  mg_free(c->st);
  mg_free(c->table);
  mg_arena_destroy(&c->arena);
  mg_free(c);
}


static uint64_t hash_str(const char *s);

pk_storage *pk_storage_find(pk_ctx *c, const char *key) {
  if (!c->table_cap) return NULL;
  size_t h = hash_str(key) & (size_t)(c->table_cap - 1);
  for (; c->table[h]; h = (h + 1) & (size_t)(c->table_cap - 1))
    if (!strcmp(c->table[h]->key, key)) return c->table[h];
  return NULL;
}

const char *pk_kind_name(pk_kind k) {
  static const char *names[] = {"None", "bool",  "int",  "int",     "float",   "str",   "bytes",
                                "tuple", "list", "dict", "set",     "global",  "storage", "tensor"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* Records an error located at the current opcode; always returns -1. */
__attribute__((format(printf, 3, 4))) static int fail(vm *v, mg_diag_code code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!v->failed)
    mg_diag_add(v->d, MG_SEV_ERROR, code, NULL, NULL, "%s: pickle byte %zu: %s", v->what,
                (size_t)(v->p - v->start), msg);
  v->failed = 1;
  return -1;
}

static int oom(vm *v) { return fail(v, MG_D_OOM, "out of memory while unpickling"); }

static pk_obj *new_obj(vm *v, pk_kind k) {
  pk_obj *o = mg_arena_alloc(&v->c->arena, sizeof *o);
  if (!o) {
    oom(v);
    return NULL;
  }
  o->kind = k;
  return o;
}

/* Appends to a tuple/list/set. The arena cannot grow a block in place, so the
 * array doubles into a new block: at most twice the live size is ever held. */
static int seq_push(vm *v, pk_obj *s, pk_obj *item) {
  if (s->u.seq.n == s->u.seq.cap) {
    size_t cap = s->u.seq.cap ? s->u.seq.cap * 2 : 4;
    pk_obj **a = mg_arena_alloc(&v->c->arena, cap * sizeof *a);
    if (!a) return oom(v);
    if (s->u.seq.n) memcpy(a, s->u.seq.items, s->u.seq.n * sizeof *a);
    s->u.seq.items = a;
    s->u.seq.cap = cap;
  }
  s->u.seq.items[s->u.seq.n++] = item;
  return 0;
}

/* Adds a dict entry. Keys are not deduplicated (that would be quadratic); a
 * repeated key is visible to lookups as its last value and to pth.c as a
 * duplicate tensor name, which it rejects. */
static int dict_set(vm *v, pk_obj *dct, pk_obj *k, pk_obj *val) {
  if (dct->u.dict.n == dct->u.dict.cap) {
    size_t cap = dct->u.dict.cap ? dct->u.dict.cap * 2 : 8;
    pk_obj **ks = mg_arena_alloc(&v->c->arena, cap * sizeof *ks);
    pk_obj **vs = ks ? mg_arena_alloc(&v->c->arena, cap * sizeof *vs) : NULL;
    if (!vs) return oom(v);
    if (dct->u.dict.n) {
      memcpy(ks, dct->u.dict.keys, dct->u.dict.n * sizeof *ks);
      memcpy(vs, dct->u.dict.vals, dct->u.dict.n * sizeof *vs);
    }
    dct->u.dict.keys = ks;
    dct->u.dict.vals = vs;
    dct->u.dict.cap = cap;
  }
  dct->u.dict.keys[dct->u.dict.n] = k;
  dct->u.dict.vals[dct->u.dict.n++] = val;
  return 0;
}

pk_obj *pk_dict_get(const pk_obj *dict, const char *key) {
  if (!dict || dict->kind != PK_DICT) return NULL;
  size_t n = strlen(key);
  for (size_t i = dict->u.dict.n; i-- > 0;) {
    const pk_obj *k = dict->u.dict.keys[i];
    if (k->kind == PK_STR && k->u.str.n == n && !memcmp(k->u.str.s, key, n)) return dict->u.dict.vals[i];
  }
  return NULL;
}

/* ---- the stack ---- */

static size_t avail(const vm *v) { return v->sp - (v->nmarks ? v->marks[v->nmarks - 1] : 0); }

static int push(vm *v, pk_obj *o) {
  if (!o) return -1;
  if (v->sp == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    pk_obj **s = mg_realloc(v->stack, cap * sizeof *s);
    if (!s) return oom(v);
    v->stack = s;
    v->cap = cap;
  }
  v->stack[v->sp++] = o;
  return 0;
}

/* The top object above the innermost mark (CPython's stack after MARK starts
 * empty, so reaching below the mark is an underflow there too); NULL after
 * recording an underflow. */
static pk_obj *top(vm *v, const char *op) {
  if (!avail(v)) {
    fail(v, MG_D_MALFORMED, "stack underflow in %s", op);
    return NULL;
  }
  return v->stack[v->sp - 1];
}

/* Pops what top() returns. */
static pk_obj *pop(vm *v, const char *op) {
  pk_obj *o = top(v, op);
  if (o) v->sp--;
  return o;
}

/* Removes the innermost mark; *first is where its items start on the stack. */
static int pop_mark(vm *v, const char *op, size_t *first) {
  if (!v->nmarks) return fail(v, MG_D_MALFORMED, "%s without a MARK", op);
  *first = v->marks[--v->nmarks];
  return 0;
}

/* ---- reading arguments ---- */

static int need(vm *v, size_t n) {
  if ((size_t)(v->end - v->p) < n) return fail(v, MG_D_MALFORMED, "truncated (needs %zu more bytes)", n);
  return 0;
}

static uint64_t rd_le(const unsigned char *p, int n) {
  uint64_t x = 0;
  for (int i = n - 1; i >= 0; i--) x = x << 8 | p[i];
  return x;
}

/* A newline-terminated argument of the text opcodes; *n excludes the newline. */
static const char *read_line(vm *v, size_t *n) {
  const unsigned char *nl = memchr(v->p, '\n', (size_t)(v->end - v->p));
  if (!nl) {
    fail(v, MG_D_MALFORMED, "truncated line argument");
    return NULL;
  }
  const char *s = (const char *)v->p;
  *n = (size_t)(nl - v->p);
  v->p = nl + 1;
  return s;
}

/* A string or bytes object of n bytes taken from the input (NUL-terminated copy). */
static pk_obj *take_bytes(vm *v, pk_kind k, uint64_t n) {
  if (n > (uint64_t)(v->end - v->p)) {
    fail(v, MG_D_MALFORMED, "string of %llu bytes runs past the end", (unsigned long long)n);
    return NULL;
  }
  pk_obj *o = new_obj(v, k);
  if (!o) return NULL;
  char *s = mg_arena_strndup(&v->c->arena, (const char *)v->p, (size_t)n);
  if (!s) {
    oom(v);
    return NULL;
  }
  o->u.str.s = s;
  o->u.str.n = (size_t)n;
  v->p += n;
  return o;
}

static pk_obj *make_int(vm *v, int64_t i) {
  pk_obj *o = new_obj(v, PK_INT);
  if (o) o->u.i = i;
  return o;
}

/* LONG1/LONG4: little-endian two's complement; up to 8 bytes fit an int64. */
static pk_obj *make_long(vm *v, uint64_t n) {
  if (n <= 8) {
    if (need(v, (size_t)n)) return NULL;
    uint64_t x = rd_le(v->p, (int)n);
    if (n && n < 8 && (v->p[n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n);
    v->p += n;
    return make_int(v, (int64_t)x);
  }
  return take_bytes(v, PK_BIGINT, n);
}

/* Copies a line into a bounded NUL-terminated buffer for strtoll/strtod. */
static int line_number(vm *v, char *buf, size_t cap) {
  size_t n;
  const char *s = read_line(v, &n);
  if (!s) return -1;
  if (n >= cap) return fail(v, MG_D_MALFORMED, "numeric argument too long");
  memcpy(buf, s, n);
  buf[n] = 0;
  return 0;
}

/* ---- globals ---- */

static const struct {
  const char *name;
  mg_dtype t;
} storage_types[] = {
    {"DoubleStorage", MG_F64}, {"FloatStorage", MG_F32},     {"HalfStorage", MG_F16},
    {"BFloat16Storage", MG_BF16}, {"LongStorage", MG_I64},   {"IntStorage", MG_I32},
    {"ShortStorage", MG_I16},  {"CharStorage", MG_I8},       {"ByteStorage", MG_U8},
    {"BoolStorage", MG_BOOL},  {"ComplexFloatStorage", MG_C64}, {"ComplexDoubleStorage", MG_C128},
    {"UntypedStorage", MG_U8},
};

static const struct {
  const char *name;
  mg_dtype t;
} dtype_names[] = {
    {"float16", MG_F16}, {"float32", MG_F32}, {"float64", MG_F64}, {"bfloat16", MG_BF16},
    {"int8", MG_I8},     {"int16", MG_I16},   {"int32", MG_I32},   {"int64", MG_I64},
    {"uint8", MG_U8},    {"uint16", MG_U16},  {"uint32", MG_U32},  {"uint64", MG_U64},
    {"bool", MG_BOOL},   {"complex64", MG_C64}, {"complex128", MG_C128},
};

/* Torch element types migc has no dtype for: a clear unsupported-dtype error
 * instead of "not allowed". */
static int torch_unsupported_type(const char *name) {
  static const char *names[] = {"complex32", "chalf", "qint8", "quint8", "qint32", "quint4x2",
                                "quint2x4", "QInt8Storage", "QUInt8Storage", "QInt32Storage",
                                "QUInt4x2Storage", "QUInt2x4Storage", "ComplexHalfStorage"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i])) return 1;
  return !strncmp(name, "float8", 6) || !strncmp(name, "bits", 4);
}

/* A printable copy of an input-supplied name for messages (control bytes become
 * '?', length capped), so a diagnostic can never carry terminal escapes. */
static void printable(char *dst, size_t cap, const char *s, size_t n) {
  size_t j = 0;
  for (size_t i = 0; i < n && j + 1 < cap; i++) {
    unsigned char ch = (unsigned char)s[i];
    dst[j++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  dst[j] = 0;
}

/* Resolves module.name against the allow-list; anything else is an error naming
 * it, and the load stops there, before any REDUCE could reach it. */
static pk_obj *resolve_global(vm *v, const char *mod, size_t mn, const char *name, size_t nn) {
  char full[256], pm[128], pn[128];
  printable(pm, sizeof pm, mod, mn);
  printable(pn, sizeof pn, name, nn);
  snprintf(full, sizeof full, "%s.%s", pm, pn);
  if (strlen(pm) != mn || strlen(pn) != nn) {
    fail(v, MG_D_INVALID, "pickle global '%s' is not allowed (this loader executes nothing)", full);
    return NULL;
  }
  static const struct {
    const char *name;
    pk_global_id id;
  } fixed[] = {
      {"collections.OrderedDict", PKG_ORDERED_DICT},
      {"torch._utils._rebuild_tensor", PKG_REBUILD_TENSOR},
      {"torch._utils._rebuild_tensor_v2", PKG_REBUILD_TENSOR_V2},
      {"torch._utils._rebuild_tensor_v3", PKG_REBUILD_TENSOR_V3},
      {"torch._utils._rebuild_parameter", PKG_REBUILD_PARAMETER},
      {"torch._utils._rebuild_parameter_with_state", PKG_REBUILD_PARAMETER_WITH_STATE},
      {"torch._tensor._rebuild_from_type_v2", PKG_REBUILD_FROM_TYPE_V2},
      {"torch.Size", PKG_SIZE}, {"torch.Tensor", PKG_TENSOR_TYPE},
      {"torch.nn.parameter.Parameter", PKG_PARAMETER_TYPE},
      {"builtins.set", PKG_SET}, {"builtins.frozenset", PKG_FROZENSET},
      {"__builtin__.set", PKG_SET}, {"__builtin__.frozenset", PKG_FROZENSET},
      {"_codecs.encode", PKG_CODECS_ENCODE},
  };
  pk_obj *o = NULL;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (!strcmp(full, fixed[i].name)) {
      if (!(o = new_obj(v, PK_GLOBAL))) return NULL;
      o->u.global.id = fixed[i].id;
      o->u.global.dtype = MG_UNDEFINED;
    }
  if (!o && (!strcmp(pm, "torch") || !strcmp(pm, "torch.cuda") || !strcmp(pm, "torch.storage"))) {
    for (size_t i = 0; i < sizeof storage_types / sizeof storage_types[0]; i++)
      if (!strcmp(pn, storage_types[i].name)) {
        if (!(o = new_obj(v, PK_GLOBAL))) return NULL;
        o->u.global.id = PKG_STORAGE_TYPE;
        o->u.global.dtype = storage_types[i].t;
      }
    for (size_t i = 0; !o && !strcmp(pm, "torch") && i < sizeof dtype_names / sizeof dtype_names[0]; i++)
      if (!strcmp(pn, dtype_names[i].name)) {
        if (!(o = new_obj(v, PK_GLOBAL))) return NULL;
        o->u.global.id = PKG_DTYPE;
        o->u.global.dtype = dtype_names[i].t;
      }
    if (!o && torch_unsupported_type(pn)) {
      fail(v, MG_D_UNSUPPORTED_DTYPE, "'%s' has an element type migc does not support", full);
      return NULL;
    }
  }
  if (!o && !strcmp(pm, "torch._utils") && !strncmp(pn, "_rebuild_", 9)) {
    fail(v, MG_D_UNSUPPORTED_ATTR,
         "'%s' rebuilds a kind of tensor migc does not read (quantized, sparse, meta or a "
         "subclass); only dense tensors are supported", full);
    return NULL;
  }
  if (!o) {
    fail(v, MG_D_INVALID,
         "pickle global '%s' is not allowed (only torch tensor rebuild functions, storage "
         "types, dtypes and collections.OrderedDict are; this loader executes nothing)",
         full);
    return NULL;
  }
  o->u.global.name = mg_arena_strdup(&v->c->arena, full);
  if (!o->u.global.name) {
    oom(v);
    return NULL;
  }
  return o;
}

/* ---- storages (persistent ids) ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Finds the storage with `key`, or adds one; NULL on allocation failure. */
static pk_storage *storage_get(vm *v, const char *key, int *created) {
  pk_ctx *c = v->c;
  *created = 0;
  if ((c->n_st + 1) * 2 > c->table_cap) {
    int cap = c->table_cap ? c->table_cap * 2 : 64;
    pk_storage **t = mg_calloc((size_t)cap, sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < c->table_cap; i++)
      if (c->table[i]) {
        size_t h = hash_str(c->table[i]->key) & (size_t)(cap - 1);
        while (t[h]) h = (h + 1) & (size_t)(cap - 1);
        t[h] = c->table[i];
      }
    mg_free(c->table);
    c->table = t;
    c->table_cap = cap;
  }
  size_t h = hash_str(key) & (size_t)(c->table_cap - 1);
  while (c->table[h]) {
    if (!strcmp(c->table[h]->key, key)) return c->table[h];
    h = (h + 1) & (size_t)(c->table_cap - 1);
  }
  if (c->n_st == c->cap_st) {
    int cap = c->cap_st ? c->cap_st * 2 : 32;
    pk_storage **a = mg_realloc(c->st, (size_t)cap * sizeof *a);
    if (!a) return NULL;
    c->st = a;
    c->cap_st = cap;
  }
  pk_storage *st = mg_arena_alloc(&c->arena, sizeof *st);
  if (!st || !(st->key = mg_arena_strdup(&c->arena, key))) return NULL;
  st->order = c->n_st;
  st->index = -1;
  st->data_offset = -1;
  c->st[c->n_st++] = st;
  c->table[h] = st;
  *created = 1;
  return st;
}

static int is_str(const pk_obj *o, const char *s) {
  return o && (o->kind == PK_STR || o->kind == PK_BYTES) && o->u.str.n == strlen(s) &&
         !memcmp(o->u.str.s, s, o->u.str.n);
}

/* BINPERSID: ('storage', StorageType, key, location, numel[, view_metadata]) as
 * torch's zip (5 items) and legacy (6 items) writers make them. */
static pk_obj *persistent_load(vm *v, pk_obj *pid) {
  if (pid->kind != PK_TUPLE || pid->u.seq.n < 1) {
    fail(v, MG_D_INVALID, "persistent id is a %s, not a torch storage tuple", pk_kind_name(pid->kind));
    return NULL;
  }
  pk_obj **it = pid->u.seq.items;
  size_t n = pid->u.seq.n;
  if (!is_str(it[0], "storage")) {
    if (is_str(it[0], "module"))
      fail(v, MG_D_INVALID, "the file pickles a whole nn.Module; save and load its state_dict()");
    else
      fail(v, MG_D_INVALID, "persistent id is not a torch storage");
    return NULL;
  }
  if (n != 5 && n != 6) {
    fail(v, MG_D_INVALID, "storage persistent id has %zu items (5 or 6 expected)", n);
    return NULL;
  }
  if (it[1]->kind != PK_GLOBAL || it[1]->u.global.id != PKG_STORAGE_TYPE) {
    fail(v, MG_D_INVALID, "storage persistent id does not name a storage type");
    return NULL;
  }
  if (it[2]->kind != PK_STR || strlen(it[2]->u.str.s) != it[2]->u.str.n || !it[2]->u.str.n) {
    fail(v, MG_D_INVALID, "storage key is not a string");
    return NULL;
  }
  if (it[4]->kind != PK_INT || it[4]->u.i < 0) {
    fail(v, MG_D_INVALID, "storage size is not a non-negative int");
    return NULL;
  }
  int64_t view_off = 0;
  if (n == 6 && it[5]->kind != PK_NONE) {
    /* (view_key, offset, view_size): a view into the root storage (legacy). */
    pk_obj *vm_ = it[5];
    if (vm_->kind != PK_TUPLE || vm_->u.seq.n != 3 || vm_->u.seq.items[1]->kind != PK_INT ||
        vm_->u.seq.items[1]->u.i < 0 || vm_->u.seq.items[2]->kind != PK_INT ||
        vm_->u.seq.items[2]->u.i < 0) {
      fail(v, MG_D_INVALID, "malformed storage view metadata");
      return NULL;
    }
    view_off = vm_->u.seq.items[1]->u.i;
  }
  int created;
  pk_storage *st = storage_get(v, it[2]->u.str.s, &created);
  if (!st) {
    oom(v);
    return NULL;
  }
  mg_dtype dt = it[1]->u.global.dtype;
  if (created) {
    st->dtype = dt;
    st->numel = it[4]->u.i;
    st->type_name = it[1]->u.global.name;
  } else if (st->dtype != dt || st->numel != it[4]->u.i) {
    fail(v, MG_D_INVALID, "storage '%s' is declared twice with different types or sizes", st->key);
    return NULL;
  }
  pk_obj *o = new_obj(v, PK_STORAGE);
  if (!o) return NULL;
  o->u.storage.st = st;
  o->u.storage.offset = view_off;
  return o;
}

/* ---- native rebuild functions ---- */

/* A tensor over `storage` at `offset` with `size` and `stride` (int sequences).
 * dtype MG_UNDEFINED takes the storage's element type. */
static pk_obj *make_tensor(vm *v, const pk_obj *storage, const pk_obj *offset, const pk_obj *size,
                           const pk_obj *stride, mg_dtype dtype) {
  if (storage->kind != PK_STORAGE) {
    fail(v, MG_D_INVALID, "tensor rebuilt from a %s, not a storage", pk_kind_name(storage->kind));
    return NULL;
  }
  if (offset->kind != PK_INT || offset->u.i < 0) {
    fail(v, MG_D_INVALID, "tensor storage offset is not a non-negative int");
    return NULL;
  }
  if ((size->kind != PK_TUPLE && size->kind != PK_LIST) ||
      (stride->kind != PK_TUPLE && stride->kind != PK_LIST) || size->u.seq.n != stride->u.seq.n) {
    fail(v, MG_D_INVALID, "tensor size and stride are not int sequences of one length");
    return NULL;
  }
  if (size->u.seq.n > WT_MAX_RANK) {
    fail(v, MG_D_LIMIT, "tensor of rank %zu (at most %d supported)", size->u.seq.n, WT_MAX_RANK);
    return NULL;
  }
  pk_obj *t = new_obj(v, PK_TENSOR);
  if (!t) return NULL;
  t->u.tensor.st = storage->u.storage.st;
  t->u.tensor.dtype = dtype != MG_UNDEFINED ? dtype : storage->u.storage.st->dtype;
  t->u.tensor.rank = (int)size->u.seq.n;
  if (!mg_add_ovf(offset->u.i, storage->u.storage.offset, &t->u.tensor.offset)) {
    fail(v, MG_D_INVALID, "tensor storage offset overflows");
    return NULL;
  }
  for (size_t i = 0; i < size->u.seq.n; i++) {
    const pk_obj *a = size->u.seq.items[i], *b = stride->u.seq.items[i];
    if (a->kind != PK_INT || b->kind != PK_INT || a->u.i < 0 || b->u.i < 0) {
      fail(v, MG_D_INVALID, "tensor size or stride holds a non-int or a negative value");
      return NULL;
    }
    t->u.tensor.dims[i] = a->u.i;
    t->u.tensor.strides[i] = b->u.i;
  }
  return t;
}

static int nargs_ok(vm *v, const pk_obj *g, const pk_obj *args, size_t lo, size_t hi) {
  if (args->u.seq.n < lo || args->u.seq.n > hi)
    return fail(v, MG_D_INVALID, "'%s' called with %zu arguments", g->u.global.name, args->u.seq.n);
  return 0;
}

static pk_obj *as_tensor(vm *v, const pk_obj *g, pk_obj *o) {
  if (o->kind != PK_TENSOR) {
    fail(v, MG_D_INVALID, "'%s' applied to a %s, not a tensor", g->u.global.name, pk_kind_name(o->kind));
    return NULL;
  }
  return o;
}

/* A new set/tuple holding the items of a sequence (or nothing). */
static pk_obj *seq_copy(vm *v, pk_kind k, const pk_obj *src) {
  pk_obj *o = new_obj(v, k);
  if (!o) return NULL;
  for (size_t i = 0; src && i < src->u.seq.n; i++)
    if (seq_push(v, o, src->u.seq.items[i])) return NULL;
  return o;
}

/* The bytes whose latin-1 decoding is the UTF-8 string s: each code point must
 * be below 256. */
static pk_obj *latin1_bytes(vm *v, const pk_obj *s) {
  pk_obj *o = new_obj(v, PK_BYTES);
  unsigned char *out = o ? mg_arena_alloc(&v->c->arena, s->u.str.n + 1) : NULL;
  if (!out) {
    if (o) oom(v);
    return NULL;
  }
  const unsigned char *p = (const unsigned char *)s->u.str.s, *end = p + s->u.str.n;
  size_t n = 0;
  while (p < end) {
    if (p[0] < 0x80) {
      out[n++] = *p++;
    } else if ((p[0] & 0xFE) == 0xC2 && p + 1 < end && (p[1] & 0xC0) == 0x80) {
      out[n++] = (unsigned char)((p[0] & 0x1F) << 6 | (p[1] & 0x3F));
      p += 2;
    } else {
      fail(v, MG_D_INVALID, "encode(str, 'latin1') of a string with characters beyond latin-1");
      return NULL;
    }
  }
  out[n] = 0;
  o->u.str.s = (const char *)out;
  o->u.str.n = n;
  return o;
}

/* REDUCE: interprets one allow-listed global applied to a tuple of arguments. */
static pk_obj *call_global(vm *v, const pk_obj *g, const pk_obj *args, int depth) {
  pk_obj *const *a = args->u.seq.items;
  size_t n = args->u.seq.n;
  switch (g->u.global.id) {
    case PKG_ORDERED_DICT: {
      if (nargs_ok(v, g, args, 0, 1)) return NULL;
      pk_obj *dct = new_obj(v, PK_DICT);
      if (!dct || !n) return dct;
      if (a[0]->kind != PK_LIST && a[0]->kind != PK_TUPLE) {
        fail(v, MG_D_INVALID, "OrderedDict built from a %s", pk_kind_name(a[0]->kind));
        return NULL;
      }
      for (size_t i = 0; i < a[0]->u.seq.n; i++) {
        pk_obj *pair = a[0]->u.seq.items[i];
        if ((pair->kind != PK_TUPLE && pair->kind != PK_LIST) || pair->u.seq.n != 2) {
          fail(v, MG_D_INVALID, "OrderedDict item is not a pair");
          return NULL;
        }
        if (dict_set(v, dct, pair->u.seq.items[0], pair->u.seq.items[1])) return NULL;
      }
      return dct;
    }
    case PKG_SIZE:
      if (nargs_ok(v, g, args, 0, 1)) return NULL;
      if (n && a[0]->kind != PK_TUPLE && a[0]->kind != PK_LIST) {
        fail(v, MG_D_INVALID, "torch.Size built from a %s", pk_kind_name(a[0]->kind));
        return NULL;
      }
      return seq_copy(v, PK_TUPLE, n ? a[0] : NULL);
    case PKG_SET:
    case PKG_FROZENSET:
      if (nargs_ok(v, g, args, 0, 1)) return NULL;
      if (n && a[0]->kind != PK_TUPLE && a[0]->kind != PK_LIST && a[0]->kind != PK_SET) {
        fail(v, MG_D_INVALID, "set built from a %s", pk_kind_name(a[0]->kind));
        return NULL;
      }
      return seq_copy(v, PK_SET, n ? a[0] : NULL);
    case PKG_CODECS_ENCODE: /* protocol 2 pickles bytes as encode(latin-1 text, 'latin1') */
      if (nargs_ok(v, g, args, 2, 2)) return NULL;
      if (a[0]->kind != PK_STR || !is_str(a[1], "latin1")) {
        fail(v, MG_D_INVALID, "'%s' is only interpreted as encode(str, 'latin1')", g->u.global.name);
        return NULL;
      }
      return latin1_bytes(v, a[0]);
    case PKG_REBUILD_TENSOR: /* (storage, storage_offset, size, stride) */
      if (nargs_ok(v, g, args, 4, 4)) return NULL;
      return make_tensor(v, a[0], a[1], a[2], a[3], MG_UNDEFINED);
    case PKG_REBUILD_TENSOR_V2: /* (..., requires_grad, backward_hooks[, metadata]) */
      if (nargs_ok(v, g, args, 6, 7)) return NULL;
      return make_tensor(v, a[0], a[1], a[2], a[3], MG_UNDEFINED);
    case PKG_REBUILD_TENSOR_V3: /* (..., requires_grad, backward_hooks, dtype[, metadata]) */
      if (nargs_ok(v, g, args, 7, 8)) return NULL;
      if (a[6]->kind != PK_GLOBAL || a[6]->u.global.id != PKG_DTYPE) {
        fail(v, MG_D_INVALID, "'%s' given a dtype that is not a torch dtype", g->u.global.name);
        return NULL;
      }
      return make_tensor(v, a[0], a[1], a[2], a[3], a[6]->u.global.dtype);
    case PKG_REBUILD_PARAMETER: /* (data, requires_grad, backward_hooks) */
      if (nargs_ok(v, g, args, 3, 3)) return NULL;
      return as_tensor(v, g, a[0]);
    case PKG_REBUILD_PARAMETER_WITH_STATE: /* (data, requires_grad, backward_hooks, state) */
      if (nargs_ok(v, g, args, 4, 4)) return NULL;
      return as_tensor(v, g, a[0]);
    case PKG_REBUILD_FROM_TYPE_V2: { /* (func, new_type, args, state) */
      if (nargs_ok(v, g, args, 4, 4)) return NULL;
      if (a[1]->kind != PK_GLOBAL ||
          (a[1]->u.global.id != PKG_TENSOR_TYPE && a[1]->u.global.id != PKG_PARAMETER_TYPE)) {
        fail(v, MG_D_INVALID, "'%s' rebuilds a type other than Tensor or Parameter", g->u.global.name);
        return NULL;
      }
      if (a[0]->kind != PK_GLOBAL || a[2]->kind != PK_TUPLE) {
        fail(v, MG_D_INVALID, "'%s' given a non-function or non-tuple arguments", g->u.global.name);
        return NULL;
      }
      if (depth >= PK_MAX_TYPE_NESTING) {
        fail(v, MG_D_LIMIT, "'%s' nested too deeply", g->u.global.name);
        return NULL;
      }
      pk_obj *r = call_global(v, a[0], a[2], depth + 1);
      return r ? as_tensor(v, g, r) : NULL;
    }
    default:
      fail(v, MG_D_INVALID, "pickle calls '%s', which this loader does not interpret", g->u.global.name);
      return NULL;
  }
}

/* ---- the memo ---- */

static int memo_put(vm *v, uint64_t idx, pk_obj *o) {
  /* Real pickles number memo entries 0, 1, 2...: each costs at least one opcode
   * byte, so an index beyond the input's length is hostile, and bounding it keeps
   * the table proportional to the input. */
  if (idx > (uint64_t)(v->end - v->start)) return fail(v, MG_D_MALFORMED, "memo index %llu out of range", (unsigned long long)idx);
  if (idx >= v->memo_cap) {
    size_t cap = v->memo_cap ? v->memo_cap : 64;
    while (cap <= idx) cap *= 2;
    pk_obj **m = mg_realloc(v->memo, cap * sizeof *m);
    if (!m) return oom(v);
    memset(m + v->memo_cap, 0, (cap - v->memo_cap) * sizeof *m);
    v->memo = m;
    v->memo_cap = cap;
  }
  if (!v->memo[idx]) v->memo_set++;
  v->memo[idx] = o;
  return 0;
}

static int memo_get(vm *v, uint64_t idx) {
  if (idx >= v->memo_cap || !v->memo[idx])
    return fail(v, MG_D_MALFORMED, "memo index %llu is not defined", (unsigned long long)idx);
  return push(v, v->memo[idx]);
}

/* ---- the interpreter ---- */

/* Builds a tuple/list/set from the items above the innermost mark. */
static int collect_mark(vm *v, pk_kind k, const char *op) {
  size_t first = 0;
  if (pop_mark(v, op, &first)) return -1;
  pk_obj *o = new_obj(v, k);
  if (!o) return -1;
  for (size_t i = first; i < v->sp; i++)
    if (seq_push(v, o, v->stack[i])) return -1;
  v->sp = first;
  return push(v, o);
}

static int tuple_n(vm *v, size_t n, const char *op) {
  if (avail(v) < n) return fail(v, MG_D_MALFORMED, "stack underflow in %s", op);
  pk_obj *o = new_obj(v, PK_TUPLE);
  if (!o) return -1;
  for (size_t i = v->sp - n; i < v->sp; i++)
    if (seq_push(v, o, v->stack[i])) return -1;
  v->sp -= n;
  return push(v, o);
}

/* SETITEMS / DICT / APPENDS / ADDITEMS share this: items above the mark go into
 * the container below it (or into a new one for DICT). */
static int fill_from_mark(vm *v, char op) {
  size_t first = 0;
  const char *name = op == 'u' ? "SETITEMS" : op == 'd' ? "DICT" : op == 'e' ? "APPENDS" : "ADDITEMS";
  if (pop_mark(v, name, &first)) return -1;
  size_t n = v->sp - first;
  pk_obj *target;
  if (op == 'd') {
    if (!(target = new_obj(v, PK_DICT))) return -1;
  } else {
    size_t base = v->nmarks ? v->marks[v->nmarks - 1] : 0;
    if (first <= base) return fail(v, MG_D_MALFORMED, "stack underflow in %s", name);
    target = v->stack[first - 1];
  }
  pk_kind want = op == 'u' || op == 'd' ? PK_DICT : op == 'e' ? PK_LIST : PK_SET;
  if (target->kind != want)
    return fail(v, MG_D_INVALID, "%s on a %s", name, pk_kind_name(target->kind));
  if (want == PK_DICT) {
    if (n % 2) return fail(v, MG_D_MALFORMED, "%s with an odd number of items", name);
    for (size_t i = first; i < v->sp; i += 2)
      if (dict_set(v, target, v->stack[i], v->stack[i + 1])) return -1;
  } else {
    for (size_t i = first; i < v->sp; i++)
      if (seq_push(v, target, v->stack[i])) return -1;
  }
  v->sp = first;
  return op == 'd' ? push(v, target) : 0;
}

/* One opcode; 1 after STOP, 0 to continue, -1 on error. */
static int step(vm *v, pk_obj **out) {
  if (need(v, 1)) return -1;
  unsigned char op = *v->p++;
  pk_obj *o, *a, *b;
  char num[64];
  switch (op) {
    case 0x80: /* PROTO */
      if (need(v, 1)) return -1;
      if (*v->p > 5) return fail(v, MG_D_UNSUPPORTED_ATTR, "pickle protocol %d is not supported", *v->p);
      v->p++;
      return 0;
    case 0x95: /* FRAME: only a read-ahead hint */
      if (need(v, 8)) return -1;
      v->p += 8;
      return 0;
    case '.': /* STOP */
      if (!(o = pop(v, "STOP"))) return -1;
      *out = o;
      return 1;
    case '(': /* MARK */
      if (v->nmarks == v->cap_marks) {
        size_t cap = v->cap_marks ? v->cap_marks * 2 : 16;
        size_t *m = mg_realloc(v->marks, cap * sizeof *m);
        if (!m) return oom(v);
        v->marks = m;
        v->cap_marks = cap;
      }
      v->marks[v->nmarks++] = v->sp;
      return 0;
    case '0': /* POP: the top item, or the mark when nothing is above it */
      if (avail(v)) v->sp--;
      else if (v->nmarks) v->nmarks--;
      else return fail(v, MG_D_MALFORMED, "stack underflow in POP");
      return 0;
    case '1': { /* POP_MARK */
      size_t first = 0;
      if (pop_mark(v, "POP_MARK", &first)) return -1;
      v->sp = first;
      return 0;
    }
    case '2': /* DUP */
      if (!(o = top(v, "DUP"))) return -1;
      return push(v, o);
    case 'N': return push(v, new_obj(v, PK_NONE));
    case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
      if (!(o = new_obj(v, PK_BOOL))) return -1;
      o->u.b = op == 0x88;
      return push(v, o);
    case 'J': /* BININT */
      if (need(v, 4)) return -1;
      o = make_int(v, (int32_t)(uint32_t)rd_le(v->p, 4));
      v->p += 4;
      return push(v, o);
    case 'K': /* BININT1 */
      if (need(v, 1)) return -1;
      return push(v, make_int(v, *v->p++));
    case 'M': /* BININT2 */
      if (need(v, 2)) return -1;
      o = make_int(v, (int64_t)rd_le(v->p, 2));
      v->p += 2;
      return push(v, o);
    case 0x8a: /* LONG1 */
      if (need(v, 1)) return -1;
      return push(v, make_long(v, *v->p++));
    case 0x8b: { /* LONG4 */
      if (need(v, 4)) return -1;
      int32_t n = (int32_t)(uint32_t)rd_le(v->p, 4);
      v->p += 4;
      if (n < 0) return fail(v, MG_D_MALFORMED, "LONG4 with a negative length");
      return push(v, make_long(v, (uint64_t)n));
    }
    case 'I': case 'L': { /* INT, LONG (text) */
      if (line_number(v, num, sizeof num)) return -1;
      size_t len = strlen(num);
      if (op == 'L' && len && num[len - 1] == 'L') num[--len] = 0;
      if (op == 'I' && (!strcmp(num, "00") || !strcmp(num, "01"))) {
        if (!(o = new_obj(v, PK_BOOL))) return -1;
        o->u.b = num[1] == '1';
        return push(v, o);
      }
      char *e;
      long long x = strtoll(num, &e, 10);
      if (!len || *e) return fail(v, MG_D_MALFORMED, "bad integer literal");
      return push(v, make_int(v, x));
    }
    case 'F': { /* FLOAT (text) */
      if (line_number(v, num, sizeof num)) return -1;
      char *e;
      double x = strtod(num, &e);
      if (!num[0] || *e) return fail(v, MG_D_MALFORMED, "bad float literal");
      if (!(o = new_obj(v, PK_FLOAT))) return -1;
      o->u.f = x;
      return push(v, o);
    }
    case 'G': { /* BINFLOAT: big-endian IEEE double */
      if (need(v, 8)) return -1;
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = bits << 8 | v->p[i];
      v->p += 8;
      if (!(o = new_obj(v, PK_FLOAT))) return -1;
      memcpy(&o->u.f, &bits, sizeof bits);
      return push(v, o);
    }
    case 'X': case 'B': case 'T': { /* BINUNICODE, BINBYTES (u32), BINSTRING (i32) */
      if (need(v, 4)) return -1;
      uint64_t n = rd_le(v->p, 4);
      if (op == 'T' && n > 0x7fffffffu) return fail(v, MG_D_MALFORMED, "BINSTRING with a negative length");
      v->p += 4;
      return push(v, take_bytes(v, op == 'B' ? PK_BYTES : PK_STR, n));
    }
    case 0x8c: case 'C': case 'U': /* SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING */
      if (need(v, 1)) return -1;
      v->p++;
      return push(v, take_bytes(v, op == 'C' ? PK_BYTES : PK_STR, v->p[-1]));
    case 0x8d: case 0x8e: case 0x96: { /* BINUNICODE8, BINBYTES8, BYTEARRAY8 */
      if (need(v, 8)) return -1;
      uint64_t n = rd_le(v->p, 8);
      v->p += 8;
      return push(v, take_bytes(v, op == 0x8d ? PK_STR : PK_BYTES, n));
    }
    case ')': return push(v, new_obj(v, PK_TUPLE));
    case ']': return push(v, new_obj(v, PK_LIST));
    case '}': return push(v, new_obj(v, PK_DICT));
    case 0x8f: return push(v, new_obj(v, PK_SET));
    case 't': return collect_mark(v, PK_TUPLE, "TUPLE");
    case 'l': return collect_mark(v, PK_LIST, "LIST");
    case 0x91: return collect_mark(v, PK_SET, "FROZENSET");
    case 0x85: return tuple_n(v, 1, "TUPLE1");
    case 0x86: return tuple_n(v, 2, "TUPLE2");
    case 0x87: return tuple_n(v, 3, "TUPLE3");
    case 'd': case 'u': case 'e': case 0x90: /* DICT, SETITEMS, APPENDS, ADDITEMS */
      return fill_from_mark(v, (char)op);
    case 'a': /* APPEND */
      if (!(o = pop(v, "APPEND")) || !(a = top(v, "APPEND"))) return -1;
      if (a->kind != PK_LIST) return fail(v, MG_D_INVALID, "APPEND on a %s", pk_kind_name(a->kind));
      return seq_push(v, a, o);
    case 's': /* SETITEM */
      if (!(o = pop(v, "SETITEM")) || !(b = pop(v, "SETITEM")) || !(a = top(v, "SETITEM"))) return -1;
      if (a->kind != PK_DICT) return fail(v, MG_D_INVALID, "SETITEM on a %s", pk_kind_name(a->kind));
      return dict_set(v, a, b, o);
    case 'h': /* BINGET */
      if (need(v, 1)) return -1;
      return memo_get(v, *v->p++);
    case 'j': /* LONG_BINGET */
      if (need(v, 4)) return -1;
      v->p += 4;
      return memo_get(v, rd_le(v->p - 4, 4));
    case 'g': { /* GET (text) */
      if (line_number(v, num, sizeof num)) return -1;
      char *e;
      unsigned long long x = strtoull(num, &e, 10);
      if (!num[0] || *e || num[0] == '-') return fail(v, MG_D_MALFORMED, "bad memo index");
      return memo_get(v, x);
    }
    case 'q': /* BINPUT */
      if (need(v, 1) || !(o = top(v, "BINPUT"))) return -1;
      return memo_put(v, *v->p++, o);
    case 'r': /* LONG_BINPUT */
      if (need(v, 4) || !(o = top(v, "LONG_BINPUT"))) return -1;
      v->p += 4;
      return memo_put(v, rd_le(v->p - 4, 4), o);
    case 'p': { /* PUT (text) */
      if (!(o = top(v, "PUT")) || line_number(v, num, sizeof num)) return -1;
      char *e;
      unsigned long long x = strtoull(num, &e, 10);
      if (!num[0] || *e || num[0] == '-') return fail(v, MG_D_MALFORMED, "bad memo index");
      return memo_put(v, x, o);
    }
    case 0x94: /* MEMOIZE: the next free slot is the number of entries */
      if (!(o = top(v, "MEMOIZE"))) return -1;
      return memo_put(v, v->memo_set, o);
    case 'c': { /* GLOBAL */
      size_t mn, nn;
      const char *m = read_line(v, &mn), *n = m ? read_line(v, &nn) : NULL;
      if (!n) return -1;
      return push(v, resolve_global(v, m, mn, n, nn));
    }
    case 0x93: /* STACK_GLOBAL */
      if (!(b = pop(v, "STACK_GLOBAL")) || !(a = pop(v, "STACK_GLOBAL"))) return -1;
      if (a->kind != PK_STR || b->kind != PK_STR)
        return fail(v, MG_D_MALFORMED, "STACK_GLOBAL operands are not strings");
      return push(v, resolve_global(v, a->u.str.s, a->u.str.n, b->u.str.s, b->u.str.n));
    case 'R': /* REDUCE */
      if (!(b = pop(v, "REDUCE")) || !(a = top(v, "REDUCE"))) return -1;
      if (a->kind != PK_GLOBAL) return fail(v, MG_D_INVALID, "REDUCE calls a %s", pk_kind_name(a->kind));
      if (b->kind != PK_TUPLE) return fail(v, MG_D_INVALID, "REDUCE arguments are a %s", pk_kind_name(b->kind));
      if (!(o = call_global(v, a, b, 0))) return -1;
      v->stack[v->sp - 1] = o;
      return 0;
    case 0x81: case 0x92: /* NEWOBJ, NEWOBJ_EX: only Parameter(tensor[, requires_grad]) */
      if (op == 0x92 && !pop(v, "NEWOBJ_EX")) return -1;
      if (!(b = pop(v, "NEWOBJ")) || !(a = top(v, "NEWOBJ"))) return -1;
      if (a->kind != PK_GLOBAL || a->u.global.id != PKG_PARAMETER_TYPE)
        return fail(v, MG_D_INVALID, "pickle instantiates '%s', which this loader does not allow",
                    a->kind == PK_GLOBAL ? a->u.global.name : pk_kind_name(a->kind));
      if (b->kind != PK_TUPLE || b->u.seq.n < 1 || b->u.seq.n > 2 || b->u.seq.items[0]->kind != PK_TENSOR)
        return fail(v, MG_D_INVALID, "Parameter built from something other than a tensor");
      v->stack[v->sp - 1] = b->u.seq.items[0];
      return 0;
    case 'b': /* BUILD: state of an OrderedDict (_metadata) or tensor; ignored */
      if (!pop(v, "BUILD") || !(a = top(v, "BUILD"))) return -1;
      if (a->kind != PK_DICT && a->kind != PK_TENSOR)
        return fail(v, MG_D_INVALID, "BUILD on a %s (only dicts and tensors may carry state)", pk_kind_name(a->kind));
      return 0;
    case 'Q': /* BINPERSID */
      if (!(a = pop(v, "BINPERSID"))) return -1;
      return push(v, persistent_load(v, a));
    case 0x98: /* READONLY_BUFFER */
      return top(v, "READONLY_BUFFER") ? 0 : -1;
    case 'P': return fail(v, MG_D_INVALID, "text persistent ids (PERSID) are not torch storages");
    case 'i': case 'o': return fail(v, MG_D_INVALID, "INST/OBJ instantiate classes; not allowed");
    case 0x82: case 0x83: case 0x84: return fail(v, MG_D_INVALID, "copyreg extension codes are not allowed");
    case 0x97: return fail(v, MG_D_INVALID, "out-of-band buffers (NEXT_BUFFER) are not supported");
    case 'S': case 'V':
      return fail(v, MG_D_UNSUPPORTED_ATTR, "protocol-0 quoted strings (opcode '%c') are not supported", op);
    default:
      v->p--;
      return fail(v, MG_D_MALFORMED, "unknown opcode 0x%02x", op);
  }
}

int pk_load(pk_ctx *c, const unsigned char *buf, size_t len, const char *what, size_t *used,
            pk_obj **out, mg_diags *d) {
  vm v = {.c = c, .start = buf, .p = buf, .end = buf + len, .what = what ? what : "pickle", .d = d};
  *out = NULL;
  int rc;
  while ((rc = step(&v, out)) == 0) {
  }
  if (rc < 0 && !v.failed) oom(&v); /* a NULL from an allocation not yet reported */
  if (used) *used = (size_t)(v.p - v.start);
  mg_free(v.stack);
  mg_free(v.marks);
  mg_free(v.memo);
  if (rc < 0) {
    *out = NULL;
    return -1;
  }
  return 0;
}
