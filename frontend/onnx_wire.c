#include "onnx_wire.h"
#include "arena.h"
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { LEVEL_MODEL, LEVEL_GRAPH, LEVEL_TENSOR };
/* Field numbers from onnx.proto. */
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };

typedef struct {
  const unsigned char *base; /* start of the whole input, for offsets */
  size_t min_raw;
  unsigned char *out;        /* NULL while measuring */
  size_t pos;
  onnx_raw_ref *refs;
  int n_refs, cap_refs;
  int init_index;            /* initializer being rewritten */
  int oom;
  const char *why;
} slim_ctx;

static int read_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return -1;
    unsigned char b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -1;
}

static void emit(slim_ctx *c, const void *p, size_t n) {
  if (c->out) memcpy(c->out + c->pos, p, n);
  c->pos += n;
}

static void emit_varint(slim_ctx *c, uint64_t v) {
  unsigned char tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  emit(c, tmp, n);
}

static int add_ref(slim_ctx *c, size_t off, size_t len) {
  if (!c->out) return 0; /* refs are recorded on the writing pass only */
  if (c->n_refs == c->cap_refs) {
    int cap = c->cap_refs ? c->cap_refs * 2 : 64;
    onnx_raw_ref *r = mg_realloc(c->refs, (size_t)cap * sizeof *r);
    if (!r) {
      c->oom = 1;
      return -1;
    }
    c->refs = r;
    c->cap_refs = cap;
  }
  c->refs[c->n_refs++] = (onnx_raw_ref){off, len, c->init_index};
  return 0;
}

static int slim_message(slim_ctx *c, const unsigned char *p, const unsigned char *end, int level);

/* The size the slimmed child message will have: measure without writing. */
static int measure_child(slim_ctx *c, const unsigned char *p, const unsigned char *end,
                         int level, size_t *size) {
  slim_ctx m = *c;
  m.out = NULL;
  m.pos = 0;
  if (slim_message(&m, p, end, level)) {
    c->why = m.why;
    return -1;
  }
  *size = m.pos;
  return 0;
}

static int slim_message(slim_ctx *c, const unsigned char *p, const unsigned char *end, int level) {
  while (p < end) {
    const unsigned char *field_start = p;
    uint64_t key;
    if (read_varint(&p, end, &key)) {
      c->why = "truncated field key";
      return -1;
    }
    uint64_t field = key >> 3;
    int wt = (int)(key & 7);
    if (field == 0) {
      c->why = "field number 0";
      return -1;
    }
    uint64_t v;
    switch (wt) {
    case WT_VARINT:
      if (read_varint(&p, end, &v)) {
        c->why = "truncated varint";
        return -1;
      }
      break;
    case WT_I64:
    case WT_I32: {
      size_t n = wt == WT_I64 ? 8 : 4;
      if ((size_t)(end - p) < n) {
        c->why = "truncated fixed-width field";
        return -1;
      }
      p += n;
      break;
    }
    case WT_LEN: {
      if (read_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
        c->why = "length-delimited field runs past the end of its message";
        return -1;
      }
      const unsigned char *body = p, *body_end = p + v;
      p = body_end;
      int child = -1;
      if (level == LEVEL_MODEL && field == MODEL_GRAPH) child = LEVEL_GRAPH;
      if (level == LEVEL_GRAPH && field == GRAPH_INITIALIZER) child = LEVEL_TENSOR;
      if (child >= 0) {
        size_t size;
        if (measure_child(c, body, body_end, child, &size)) return -1;
        emit_varint(c, key);
        emit_varint(c, size);
        if (slim_message(c, body, body_end, child)) return -1;
        if (child == LEVEL_TENSOR) c->init_index++;
        continue;
      }
      if (level == LEVEL_TENSOR && field == TENSOR_RAW_DATA && v >= c->min_raw) {
        if (add_ref(c, (size_t)(body - c->base), (size_t)v)) return -1;
        continue; /* dropped from the slim copy */
      }
      break;
    }
    default:
      c->why = "unsupported wire type (groups are not used by ONNX)";
      return -1;
    }
    emit(c, field_start, (size_t)(p - field_start));
  }
  return 0;
}

/* ------------------------------------------------------------ nesting */

/* The messages of onnx.proto that can hold themselves, through the fields below:
 * a graph in a node's attribute, a type in a sequence type. protobuf-c decodes them
 * by recursion, so a file of a few hundred KB nested 20000 deep would overflow the
 * stack before migc's own limits (MAX_GRAPH_DEPTH) are checked. */
enum { M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_VALUE_INFO, M_TYPE, M_TYPE_ELEM, M_TRAINING, M_FUNCTION };
static const struct { int msg, field, child; } nesting_fields[] = {
    {M_MODEL, 7, M_GRAPH},        {M_MODEL, 20, M_TRAINING},   {M_MODEL, 25, M_FUNCTION},
    {M_TRAINING, 1, M_GRAPH},     {M_TRAINING, 2, M_GRAPH},    {M_FUNCTION, 7, M_NODE},
    {M_GRAPH, 1, M_NODE},         {M_GRAPH, 11, M_VALUE_INFO}, {M_GRAPH, 12, M_VALUE_INFO},
    {M_GRAPH, 13, M_VALUE_INFO},  {M_NODE, 5, M_ATTR},         {M_ATTR, 6, M_GRAPH},
    {M_ATTR, 11, M_GRAPH},        {M_ATTR, 14, M_TYPE},        {M_ATTR, 15, M_TYPE},
    {M_VALUE_INFO, 2, M_TYPE},
    /* TypeProto.sequence_type (4), map_type (5), optional_type (9), whose element or
     * value type (field 1; a Map's is 2) is a TypeProto again */
    {M_TYPE, 4, M_TYPE_ELEM},     {M_TYPE, 5, M_TYPE_ELEM},    {M_TYPE, 9, M_TYPE_ELEM},
    {M_TYPE_ELEM, 1, M_TYPE},     {M_TYPE_ELEM, 2, M_TYPE},
};

/* Whether the message [p, end) of type msg nests at most `left` more levels of the
 * recursive messages above; the walk's own recursion is bounded by the same limit.
 * Returns 0, or -1 with *why set (too deep, or a malformed field on the way). */
static int check_nesting(const unsigned char *p, const unsigned char *end, int msg, int left,
                         const char **why) {
  if (left <= 0) {
    *why = "messages nest deeper than 200 levels (graphs in attributes, types in types)";
    return -1;
  }
  while (p < end) {
    uint64_t key, v;
    if (read_varint(&p, end, &key)) return *why = "truncated field key", -1;
    switch ((int)(key & 7)) {
    case WT_VARINT:
      if (read_varint(&p, end, &v)) return *why = "truncated varint", -1;
      break;
    case WT_I64:
    case WT_I32: {
      size_t n = (key & 7) == WT_I64 ? 8 : 4;
      if ((size_t)(end - p) < n) return *why = "truncated fixed-width field", -1;
      p += n;
      break;
    }
    case WT_LEN:
      if (read_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return *why = "length-delimited field runs past the end of its message", -1;
      for (size_t i = 0; i < sizeof nesting_fields / sizeof nesting_fields[0]; i++)
        if (nesting_fields[i].msg == msg && (uint64_t)nesting_fields[i].field == key >> 3 &&
            check_nesting(p, p + v, nesting_fields[i].child, left - 1, why))
          return -1;
      p += v;
      break;
    default:
      return *why = "unsupported wire type (groups are not used by ONNX)", -1;
    }
  }
  return 0;
}

int onnx_wire_slim(const unsigned char *buf, size_t len, size_t min_raw, onnx_slim *out,
                   const char **why) {
  memset(out, 0, sizeof *out);
  slim_ctx c = {.base = buf, .min_raw = min_raw};
  *why = NULL;
  if (check_nesting(buf, buf + len, M_MODEL, 200, why)) return -1;
  if (slim_message(&c, buf, buf + len, LEVEL_MODEL)) {
    *why = c.why;
    return -1;
  }
  size_t size = c.pos;
  c.out = mg_malloc(size ? size : 1);
  if (!c.out) return -2;
  c.pos = 0;
  c.init_index = 0;
  if (slim_message(&c, buf, buf + len, LEVEL_MODEL) || c.oom) {
    mg_free(c.out);
    mg_free(c.refs);
    if (c.oom) return -2;
    *why = c.why;
    return -1;
  }
  out->slim = c.out;
  out->slim_len = c.pos;
  out->refs = c.refs;
  out->n_refs = c.n_refs;
  return 0;
}

void onnx_slim_free(onnx_slim *s) {
  mg_free(s->slim);
  mg_free(s->refs);
  memset(s, 0, sizeof *s);
}
