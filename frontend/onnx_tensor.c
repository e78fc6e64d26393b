/* The importer's types and tensors: a TypeProto's declared dtype and shape, a
 * TensorProto's data (inline, raw_data left in the mapped file, or external data
 * mapped from files confined to the model's directory), and onnx_read_tensor for
 * a serialised TensorProto on its own. The graph building is in onnx_import.c. */
#include "onnx_import.h"
#include "mapfile.h"
#include "import_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* See import_internal.h. */
int import_shape(import_ctx *c, const Onnx__TensorShapeProto *sp, mg_shape *s,
                 const char *what) {
  if (!sp) {
    s->rank = -1;
    return 0;
  }
  if (sp->n_dim > MG_MAX_RANK) {
    mg_error(c->d, LIMIT, what, NULL, "rank %zu exceeds migc's limit of %d", sp->n_dim,
             MG_MAX_RANK);
    return -1;
  }
  s->rank = (int)sp->n_dim;
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = sp->dim[i];
    s->d[i].v = -1;
    s->d[i].sym = NULL;
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        dim->dim_value >= 0 && dim->dim_value <= MG_DIM_MAX) {
      s->d[i].v = dim->dim_value;
    } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               dim->dim_param && *dim->dim_param) {
      s->d[i].sym = mg_arena_strdup(&c->m->arena, dim->dim_param);
      if (!s->d[i].sym) return OOM(c);
    }
  }
  return 0;
}

/* Declared type of a value, from a ValueInfoProto (graph input, output, value_info). */
int import_type(import_ctx *c, const Onnx__TypeProto *tp, mg_value *v) {
  if (!tp) return 0;
  v->has_decl = 1;
  const Onnx__TypeProto *t = tp;
  int optional = 0;
  if (t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
    optional = 1;
    t = t->optional_type->elem_type;
    if (!t) return 0;
  }
  if (t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
    v->vtype = optional ? MG_VT_OPTIONAL_SEQUENCE : MG_VT_SEQUENCE;
    t = t->sequence_type->elem_type;
    if (!t) return 0;
  } else {
    v->vtype = optional ? MG_VT_OPTIONAL_TENSOR : MG_VT_TENSOR;
  }
  if (t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    int et = t->tensor_type->elem_type;
    if (et && !mg_dtype_valid(et)) {
      mg_error(c->d, UNSUPPORTED_DTYPE, v->name, NULL, "unknown element type %d", et);
      return -1;
    }
    v->decl_dtype = (mg_dtype)et;
    if (import_shape(c, t->tensor_type->shape, &v->decl_shape, v->name)) return -1;
  } else if (t->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE) {
    mg_error(c->d, UNSUPPORTED_DTYPE, v->name, NULL, "sparse tensors are not supported");
    return -1;
  } else if (t->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE) {
    mg_error(c->d, UNSUPPORTED_DTYPE, v->name, NULL, "map types are not supported");
    return -1;
  }
  /* A value's working type starts as its declaration; inference refines it. */
  if (!v->data && v->kind != MG_V_INIT) {
    v->dtype = v->decl_dtype;
    v->shape = v->decl_shape;
  }
  return 0;
}

typedef struct {
  const char *location;
  const unsigned char *addr;
  size_t len;
} ext_file;

static int path_is_safe(const char *loc) {
  if (!*loc || loc[0] == '/') return 0;
  for (const char *p = loc; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
    p += n;
    if (*p == '/') p++;
  }
  return 1;
}

/* Opens `rel` (relative, no ".." component: path_is_safe) under `dir` one component
 * at a time with O_NOFOLLOW, so a symbolic link beside the model, or a linked
 * folder, cannot point the import at a file elsewhere; O_NONBLOCK so a FIFO cannot
 * hang the open. Returns the descriptor of a regular file, or -1 with errno set:
 * ELOOP for a link on the way, EINVAL for something not a regular file. */
static int open_beneath(const char *dir, const char *rel) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const char *p = rel; dfd >= 0;) {
    char comp[256];
    size_t n = strcspn(p, "/");
    if (n >= sizeof comp) {
      close(dfd);
      errno = ENAMETOOLONG;
      return -1;
    }
    memcpy(comp, p, n);
    comp[n] = 0;
    p += n;
    while (*p == '/') p++;
    if (!n) continue; /* "a//b" */
    if (!*p) {
      int fd = openat(dfd, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      int saved = errno;
      struct stat st;
      close(dfd);
      errno = saved;
      if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
        close(fd);
        errno = EINVAL;
        return -1;
      }
      return fd;
    }
    int next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    /* a linked folder fails as ENOTDIR: say that it is a link */
    if (next < 0 && errno == ENOTDIR && !fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) &&
        S_ISLNK(st.st_mode))
      errno = ELOOP;
    int saved = errno;
    close(dfd);
    errno = saved;
    dfd = next;
  }
  return -1;
}

static int map_external(import_ctx *c, const char *tensor, const char *location,
                        const unsigned char **addr, size_t *len) {
  if (!c->base_dir) {
    mg_error(c->d, INVALID, tensor, NULL, "external data '%s' without a model directory",
             location);
    return -1;
  }
  if (!path_is_safe(location)) {
    mg_error(c->d, INVALID, tensor, NULL,
             "external data location '%s' leaves the model's directory", location);
    return -1;
  }
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", c->base_dir, location) >= sizeof path) {
    mg_error(c->d, LIMIT, tensor, NULL, "external data path too long");
    return -1;
  }
  int fd = open_beneath(c->base_dir, location);
  if (fd < 0) {
    if (errno == ELOOP)
      mg_error(c->d, INVALID, tensor, NULL,
               "external data '%s' goes through a symbolic link: it must be a file in the "
               "model's directory", path);
    else if (errno == EINVAL)
      mg_error(c->d, INVALID, tensor, NULL, "external data '%s' is not a regular file", path);
    else
      mg_error(c->d, IO, tensor, NULL, "cannot open external data '%s': %s", path,
               strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st)) {
    close(fd);
    mg_error(c->d, IO, tensor, NULL, "cannot stat external data '%s': %s", path, strerror(errno));
    return -1;
  }
  void *p = st.st_size ? mg_map_file(fd, (size_t)st.st_size, path) : NULL;
  close(fd);
  if (st.st_size && p == MAP_FAILED) {
    mg_error(c->d, IO, tensor, NULL, "cannot map '%s': %s", path, strerror(errno));
    return -1;
  }
  if (p && mg_model_add_mapping(c->m, p, (size_t)st.st_size)) {
    mg_unmap_file(p, (size_t)st.st_size);
    return OOM(c);
  }
  *addr = p;
  *len = (size_t)st.st_size;
  return 0;
}

/* Finds or maps the external file `location`; the model keeps each mapping. */
static int external_bytes(import_ctx *c, const Onnx__TensorProto *t, size_t want,
                          const void **data) {
  const char *location = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
    if (!k || !v) continue;
    char *end;
    if (!strcmp(k, "location")) location = v;
    else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
      errno = 0;
      long long x = strtoll(v, &end, 10);
      if (errno || *end || x < 0) {
        mg_error(c->d, INVALID, t->name, NULL, "bad external data %s '%s'", k, v);
        return -1;
      }
      if (!strcmp(k, "offset")) offset = x;
      else length = x;
    }
  }
  if (!location) {
    mg_error(c->d, INVALID, t->name, NULL, "external data without a location");
    return -1;
  }
  const unsigned char *addr;
  size_t len;
  if (map_external(c, t->name, location, &addr, &len)) return -1;
  if (length < 0) length = (long long)want;
  if ((size_t)length != want) {
    mg_error(c->d, INVALID, t->name, NULL,
             "external data length %lld does not match the %zu bytes its shape needs", length,
             want);
    return -1;
  }
  if ((unsigned long long)offset > len || (unsigned long long)length > len - (size_t)offset) {
    mg_error(c->d, INVALID, t->name, NULL,
             "external data [%lld, +%lld) runs past the end of '%s' (%zu bytes)", offset,
             length, location, len);
    return -1;
  }
  *data = addr + offset;
  return 0;
}

/* Fills v (dtype, shape, data) from a TensorProto. raw, if non-NULL, is the
 * initializer's raw_data that onnx_wire_slim() left in the mapped file. */
int import_tensor(import_ctx *c, const Onnx__TensorProto *t, mg_value *v,
                  const onnx_raw_ref *raw) {
  const char *name = v->name;
  if (!mg_dtype_valid(t->data_type)) {
    mg_error(c->d, UNSUPPORTED_DTYPE, name, NULL, "tensor has unknown data type %d",
             t->data_type);
    return -1;
  }
  mg_dtype dt = (mg_dtype)t->data_type;
  if (t->n_dims > MG_MAX_RANK) {
    mg_error(c->d, LIMIT, name, NULL, "rank %zu exceeds migc's limit of %d", t->n_dims,
             MG_MAX_RANK);
    return -1;
  }
  v->dtype = dt;
  v->vtype = MG_VT_TENSOR;
  v->shape.rank = (int)t->n_dims;
  int64_t numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || t->dims[i] > MG_DIM_MAX || !mg_mul_i64(numel, t->dims[i], &numel)) {
      mg_error(c->d, INVALID, name, NULL, "tensor dimension %zu is %lld", i,
               (long long)t->dims[i]);
      return -1;
    }
    v->shape.d[i].v = t->dims[i];
  }
  if (t->segment) {
    mg_error(c->d, UNSUPPORTED_DTYPE, name, NULL, "segmented tensors are not supported");
    return -1;
  }
  size_t es = mg_dtype_size(dt), want;
  if (dt == MG_STRING) {
    if (t->n_string_data != (size_t)numel) {
      mg_error(c->d, INVALID, name, NULL, "string tensor has %zu strings for %lld elements",
               t->n_string_data, (long long)numel);
      return -1;
    }
    const char **s = mg_arena_alloc(&c->m->arena, sizeof(char *) * (size_t)(numel ? numel : 1));
    if (!s) return OOM(c);
    for (int64_t i = 0; i < numel; i++) {
      s[i] = mg_arena_strndup(&c->m->arena,
                              t->string_data[i].data ? (const char *)t->string_data[i].data : "",
                              t->string_data[i].len);
      if (!s[i]) return OOM(c);
    }
    v->data = s;
    v->nbytes = sizeof(char *) * (size_t)numel;
    return 0;
  }
  if (!mg_mul_size((size_t)numel, es, &want)) {
    mg_error(c->d, INVALID, name, NULL, "tensor size overflows");
    return -1;
  }
  v->nbytes = want;
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return external_bytes(c, t, want, &v->data);
  if (raw) {
    if (raw->length != want) goto size_mismatch;
    v->data = c->file + raw->offset;
    return 0;
  }
  if (t->has_raw_data) {
    if (t->raw_data.len != want) goto size_mismatch;
    v->data = mg_arena_memdup(&c->m->arena, t->raw_data.data, want);
    return v->data || !want ? 0 : OOM(c);
  }
  /* Count the typed values before allocating: a tiny file must not make us zero
   * gigabytes for a tensor whose data is not there. */
  size_t have;
  switch (dt) {
  case MG_F32: have = t->n_float_data; break;
  case MG_C64: have = t->n_float_data / 2; break;
  case MG_F64: have = t->n_double_data; break;
  case MG_C128: have = t->n_double_data / 2; break;
  case MG_I64: have = t->n_int64_data; break;
  case MG_U32: case MG_U64: have = t->n_uint64_data; break;
  default: have = t->n_int32_data; break;
  }
  if (have != (size_t)numel) {
    if (numel && have == 0) {
      mg_error(c->d, INVALID, name, NULL, "tensor of %lld elements carries no data",
               (long long)numel);
      return -1;
    }
    goto size_mismatch;
  }
  unsigned char *out = mg_arena_alloc(&c->m->arena, want ? want : 1);
  if (!out) return OOM(c);
  v->data = out;
  switch (dt) {
  case MG_F32: have = t->n_float_data; if (have == (size_t)numel && want) memcpy(out, t->float_data, want); break;
  case MG_C64: have = t->n_float_data / 2; if (have == (size_t)numel && want) memcpy(out, t->float_data, want); break;
  case MG_F64: have = t->n_double_data; if (have == (size_t)numel && want) memcpy(out, t->double_data, want); break;
  case MG_C128: have = t->n_double_data / 2; if (have == (size_t)numel && want) memcpy(out, t->double_data, want); break;
  case MG_I64: have = t->n_int64_data; if (have == (size_t)numel && want) memcpy(out, t->int64_data, want); break;
  case MG_U32: case MG_U64:
    have = t->n_uint64_data;
    if (have == (size_t)numel)
      for (int64_t i = 0; i < numel; i++) {
        if (dt == MG_U64) memcpy(out + i * 8, &t->uint64_data[i], 8);
        else { uint32_t x = (uint32_t)t->uint64_data[i]; memcpy(out + i * 4, &x, 4); }
      }
    break;
  default: /* int32_data carries int32, and the bits of every narrower type */
    have = t->n_int32_data;
    if (have == (size_t)numel)
      for (int64_t i = 0; i < numel; i++) {
        int32_t x = t->int32_data[i];
        if (es == 4) memcpy(out + i * 4, &x, 4);
        else if (es == 2) { uint16_t h = (uint16_t)x; memcpy(out + i * 2, &h, 2); }
        else out[i] = (unsigned char)x;
      }
    break;
  }
  if (have != (size_t)numel) {
    if (numel && have == 0) {
      mg_error(c->d, INVALID, name, NULL, "tensor of %lld elements carries no data",
               (long long)numel);
      return -1;
    }
    goto size_mismatch;
  }
  return 0;
size_mismatch:
  mg_error(c->d, INVALID, name, NULL, "tensor data does not match its shape (%zu bytes expected)",
           want);
  return -1;
}

mg_value *import_const(import_ctx *c, mg_graph *g, const char *hint, mg_dtype dt, int rank,
                       const int64_t *dims, const void *data) {
  char name[256];
  mg_value *v = NULL, *existing;
  do {
    snprintf(name, sizeof name, "%s__c%d", hint, c->anon++);
    v = mg_value_new(g, name, &existing);
  } while (!v && existing);
  if (!v) {
    c->oom = 1;
    return NULL;
  }
  v->kind = MG_V_CONST;
  v->dtype = dt;
  v->shape.rank = rank;
  size_t n = mg_dtype_size(dt);
  for (int i = 0; i < rank; i++) {
    v->shape.d[i].v = dims[i];
    n *= (size_t)dims[i];
  }
  v->nbytes = n;
  v->data = mg_arena_memdup(&c->m->arena, data, n);
  if (!v->data && n) {
    c->oom = 1;
    return NULL;
  }
  return v;
}

int onnx_read_tensor(const char *path, mg_model *m, mg_value **out, mg_diags *d) {
  *out = NULL;
  const char *saved = d->file;
  d->file = path;
  int rc = -1;
  FILE *f = fopen(path, "rb");
  unsigned char *buf = NULL;
  Onnx__TensorProto *t = NULL;
  if (!f) {
    mg_error(d, IO, NULL, NULL, "cannot open: %s", strerror(errno));
    goto done;
  }
  struct stat st;
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
    mg_error(d, IO, NULL, NULL, "not a regular file");
    goto done;
  }
  buf = mg_malloc((size_t)st.st_size + 1);
  if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    mg_error(d, IO, NULL, NULL, "cannot read");
    goto done;
  }
  int pb_oom = 0;
  ProtobufCAllocator pa = import_pb_allocator;
  pa.allocator_data = &pb_oom; /* a decode that ran out of memory is not malformed */
  t = onnx__tensor_proto__unpack(&pa, (size_t)st.st_size, buf);
  if (!t) {
    if (pb_oom) mg_error(d, OOM, NULL, NULL, "out of memory decoding the tensor");
    else mg_error(d, MALFORMED, NULL, NULL, "not a serialised onnx.TensorProto");
    goto done;
  }
  import_ctx c = {.m = m, .d = d};
  mg_value *v = mg_value_detached(m, t->name ? t->name : "");
  if (!v) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    goto done;
  }
  v->kind = MG_V_CONST;
  if (import_tensor(&c, t, v, NULL)) {
    if (c.oom) mg_error(d, OOM, NULL, NULL, "out of memory");
    goto done;
  }
  *out = v;
  rc = 0;
done:
  if (t) onnx__tensor_proto__free_unpacked(t, &import_pb_allocator);
  mg_free(buf);
  if (f) fclose(f);
  d->file = saved;
  return rc;
}
