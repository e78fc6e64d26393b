/* Tests for weights/ckpt.c: the MindSpore checkpoint writer and reader.
 *
 * Expected contents come from formulas computed here (never from the writer), and
 * tests/fixtures/decode_ckpt.py --check decodes the files this test leaves in
 * $MIGC_CKPT_FIXTURES with its own protobuf walker and its own numpy formulas.
 * MIGC_CKPT_FIXTURES must be set: without it the test fails rather than testing
 * nothing. Malformed inputs are built with a small protobuf encoder of the test's
 * own. Besides all.ckpt and all_crc.ckpt, the directory gets near.ckpt and
 * other.ckpt, which tests/e2e/ckpt_cli.sh diffs against all.ckpt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "ckpt_internal.h"
#include "export.h"

/* ---- formulas (mirrored in tests/fixtures/decode_ckpt.py) ------------------------ */

static const struct {
  const char *ms;
  mg_dtype t;
} dtypes[] = {
    {"Float32", MG_F32}, {"Float16", MG_F16}, {"BFloat16", MG_BF16}, {"Float64", MG_F64}, {"Int8", MG_I8},
    {"Int16", MG_I16},   {"Int32", MG_I32},   {"Int64", MG_I64},     {"UInt8", MG_U8},     {"UInt16", MG_U16},
    {"UInt32", MG_U32},  {"UInt64", MG_U64},  {"Bool", MG_BOOL},
};
enum { NDTYPES = sizeof dtypes / sizeof dtypes[0] };

enum { K_FORMULA, K_SPLIT, K_SCALAR, K_EMPTY };

/* Elements [first, first + n) of a tensor of kind `kind` and dtype t, into buf. */
static void formula(int kind, mg_dtype t, int64_t first, int64_t n, void *buf) {
  for (int64_t i = 0; i < n; i++) {
    int64_t k = first + i;
    if (kind == K_SCALAR) {
      ((double *)buf)[i] = -1.25;
      continue;
    }
    if (kind == K_SPLIT) {
      float f = (float)((double)((k * 37) % 101) * 0.25 - 10);
      if (t == MG_BF16) ((uint16_t *)buf)[i] = mg_f32_to_bf16(f);
      else ((float *)buf)[i] = f;
      continue;
    }
    double f = (double)k * 0.5 - 3;
    int64_t s = k - 6;
    switch (t) {
      case MG_F16: ((uint16_t *)buf)[i] = mg_f32_to_f16((float)f); break;
      case MG_BF16: ((uint16_t *)buf)[i] = mg_f32_to_bf16((float)f); break;
      case MG_F32: ((float *)buf)[i] = (float)f; break;
      case MG_F64: ((double *)buf)[i] = f; break;
      case MG_I8: ((int8_t *)buf)[i] = (int8_t)s; break;
      case MG_I16: ((int16_t *)buf)[i] = (int16_t)(s * 1000); break;
      case MG_I32: ((int32_t *)buf)[i] = (int32_t)(s * 100000000); break;
      case MG_I64: ((int64_t *)buf)[i] = s * 1000000000000000LL; break;
      case MG_U8: ((uint8_t *)buf)[i] = (uint8_t)(k * 20); break;
      case MG_U16: ((uint16_t *)buf)[i] = (uint16_t)(k * 5000); break;
      case MG_U32: ((uint32_t *)buf)[i] = (uint32_t)(k * 300000000u); break;
      case MG_U64: ((uint64_t *)buf)[i] = (uint64_t)k * 1500000000000000000ULL; break;
      case MG_BOOL: ((uint8_t *)buf)[i] = k % 3 == 0; break;
      default: fail_msg("no formula for %s", mg_dtype_name(t));
    }
  }
}

/* The tensors of all.ckpt, in order, with the Values each takes at a 100-byte
 * split boundary. */
typedef struct {
  char tag[32];
  mg_dtype t;
  int kind, rank, values;
  int64_t dims[2];
} spec;

enum { NSPECS = NDTYPES + 5, VALUE_BYTES = 100, FILL_BYTES = 40 };

static int make_specs(spec *s) {
  int n = 0;
  for (int i = 0; i < NDTYPES; i++, n++) {
    s[n] = (spec){.t = dtypes[i].t, .kind = K_FORMULA, .rank = 2, .values = 1, .dims = {3, 4}};
    snprintf(s[n].tag, sizeof s[n].tag, "t.%s", dtypes[i].ms);
  }
  s[n++] = (spec){"scalar", MG_F64, K_SCALAR, 0, 1, {0, 0}};
  s[n++] = (spec){"empty", MG_I32, K_EMPTY, 2, 1, {0, 5}};
  s[n++] = (spec){"split.even", MG_F32, K_SPLIT, 2, 10, {10, 25}};  /* 250 elems, 25 per Value */
  s[n++] = (spec){"split.uneven", MG_F32, K_SPLIT, 2, 4, {9, 11}};  /* 99: 25 25 25 24 */
  s[n++] = (spec){"split.bf16", MG_BF16, K_SPLIT, 2, 2, {3, 30}};   /* 90: 50 40 */
  assert_int_equal(n, NSPECS);
  return n;
}

static int64_t spec_numel(const spec *s) {
  int64_t k = 1;
  for (int i = 0; i < s->rank; i++) k *= s->dims[i];
  return k;
}

/* Fill callback state: checks that the writer asks for consecutive ranges. */
typedef struct {
  const spec *s;
  int64_t next;
  int fail_at_call, calls; /* fail_at_call: 1-based call that fails, 0 never */
  double bump;             /* added to element 5 (near.ckpt) */
} fill_ctx;

static int fill_cb(void *p, int64_t first, int64_t count, void *dst) {
  fill_ctx *c = p;
  assert_int_equal(first, c->next);
  assert_true(count > 0 && first + count <= spec_numel(c->s));
  if (++c->calls == c->fail_at_call) return -1;
  formula(c->s->kind, c->s->t, first, count, dst);
  if (c->bump != 0 && c->s->t == MG_F32 && first <= 5 && 5 < first + count)
    ((float *)dst)[5 - first] += (float)c->bump;
  c->next = first + count;
  return 0;
}

static char fixdir[4096];

static const char *fx(char *buf, const char *name) {
  snprintf(buf, 4200, "%s/%s", fixdir, name);
  return buf;
}

/* Writes specs to path; 0 on success, else -1 with the writer aborted. */
static int write_specs(const char *path, const spec *s, int n, int crc, mg_diags *d) {
  wt_ckpt_writer *w;
  if (wt_ckpt_begin(path, 1, crc, &w, d)) return -1;
  for (int i = 0; i < n; i++) {
    fill_ctx c = {.s = &s[i]};
    if (wt_ckpt_add(w, s[i].tag, s[i].t, s[i].rank, s[i].dims, fill_cb, &c)) {
      wt_ckpt_abort(w);
      return -1;
    }
  }
  int rc = wt_ckpt_commit(w);
  wt_ckpt_abort(w);
  return rc;
}

/* Reads every tensor of src and checks it against the specs by tag; tensors must
 * be a prefix of specs when `prefix` (truncated files), else exactly them. */
static void check_source(const wt_source *src, const spec *s, int n, int prefix) {
  mg_diags d;
  mg_diags_init(&d);
  if (prefix) assert_true(wt_count(src) <= n);
  else assert_int_equal(wt_count(src), n);
  for (int i = 0; i < wt_count(src); i++) {
    const wt_tensor *t = wt_get(src, i);
    assert_string_equal(t->name, s[i].tag);
    assert_int_equal(t->dtype, s[i].t);
    assert_int_equal(t->rank, s[i].rank);
    for (int k = 0; k < t->rank; k++) assert_int_equal(t->dims[k], s[i].dims[k]);
    int64_t numel = spec_numel(&s[i]);
    size_t es = mg_dtype_size(t->dtype), nb = (size_t)numel * es;
    assert_int_equal(wt_numel(t), numel);
    unsigned char *want = malloc(nb + 1), *got = malloc(nb + 1);
    formula(s[i].kind, s[i].t, 0, numel, want);
    assert_int_equal(wt_read(src, t, 0, numel, got, &d), 0);
    assert_memory_equal(got, want, nb);
    if (s[i].kind == K_SPLIT) { /* gathered reads across chunk boundaries */
      for (int64_t k = 0; k < numel; k++) {
        assert_int_equal(wt_read(src, t, k, 1, got, &d), 0);
        assert_memory_equal(got, want + k * (int64_t)es, es);
      }
      for (int64_t a = 0; a < numel; a += 7) {
        int64_t cnt = numel - a < 31 ? numel - a : 31;
        assert_int_equal(wt_read(src, t, a, cnt, got, &d), 0);
        assert_memory_equal(got, want + a * (int64_t)es, (size_t)cnt * es);
      }
    }
    free(want);
    free(got);
  }
  assert_int_equal(d.errors, 0);
  mg_diags_free(&d);
}

/* Whole file in malloc'd memory (test-side memory, outside fault injection). */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) fail_msg("cannot open %s", path);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
  fclose(fp);
  *len = (size_t)n;
  return buf;
}

/* Temporary files the writer left in the fixture directory. */
static int count_temporaries(void) {
  DIR *dir = opendir(fixdir);
  assert_non_null(dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(dir));) n += strstr(e->d_name, ".tmp-") != NULL;
  closedir(dir);
  return n;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- round trip ------------------------------------------------------------------ */

static void test_roundtrip(void **state) {
  (void)state;
  spec s[NSPECS];
  make_specs(s);
  char p[4200];
  mg_diags d;
  mg_diags_init(&d);
  wt_ckpt_set_limits(VALUE_BYTES, FILL_BYTES);
  assert_int_equal(write_specs(fx(p, "all.ckpt"), s, NSPECS, 0, &d), 0);
  assert_int_equal(write_specs(fx(p, "all_crc.ckpt"), s, NSPECS, 1, &d), 0);
  wt_ckpt_set_limits(0, 0);
  int values = 0;
  for (int i = 0; i < NSPECS; i++) values += s[i].values;
  const char *names[] = {"all.ckpt", "all_crc.ckpt"};
  for (int f = 0; f < 2; f++) {
    wt_source *src = NULL;
    assert_int_equal(ckpt_open(fx(p, names[f]), &src, &d), 0);
    check_source(src, s, NSPECS, 0);
    ckpt_info info;
    assert_int_equal(ckpt_source_info(src, &info), 0);
    assert_int_equal(info.has_crc, f);
    assert_int_equal(info.n_values, values);
    wt_close(src);
  }
  /* The CRC trailer: "crc_num" + CRC-32 of the rest, 10 bytes big-endian. */
  size_t n;
  unsigned char *b = slurp(fx(p, "all_crc.ckpt"), &n);
  assert_true(n > 17);
  assert_memory_equal(b + n - 17, "crc_num", 7);
  uint64_t want = 0;
  for (int i = 0; i < 10; i++) want = want << 8 | b[n - 10 + i];
  assert_int_equal(want, wt_crc32(0, b, n - 17));
  free(b);
  /* Fixtures for the CLI test: near.ckpt (default limits, so unsplit) differs from
   * all.ckpt by 1e-3 in one float; other.ckpt differs in every way diff reports. */
  wt_ckpt_writer *w;
  assert_int_equal(wt_ckpt_begin(fx(p, "near.ckpt"), 1, 0, &w, &d), 0);
  for (int i = 0; i < NSPECS; i++) {
    fill_ctx c = {.s = &s[i], .bump = !strcmp(s[i].tag, "t.Float32") ? 1e-3 : 0};
    assert_int_equal(wt_ckpt_add(w, s[i].tag, s[i].t, s[i].rank, s[i].dims, fill_cb, &c), 0);
  }
  assert_int_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  assert_int_equal(wt_ckpt_begin(fx(p, "other.ckpt"), 1, 1, &w, &d), 0);
  for (int i = 0; i < NSPECS; i++) {
    spec o = s[i];
    fill_ctx c = {.s = &o};
    if (!strcmp(o.tag, "t.Int8")) continue;                 /* only in A */
    if (!strcmp(o.tag, "t.UInt8")) o.dims[0] = 4, o.dims[1] = 3; /* shape */
    if (!strcmp(o.tag, "t.Bool")) o.t = MG_U8;              /* dtype */
    if (!strcmp(o.tag, "t.Float64")) o.t = MG_F32;          /* dtype */
    if (!strcmp(o.tag, "split.even")) c.bump = 0.5;         /* values */
    if (!strcmp(o.tag, "t.Int32")) o.kind = K_SPLIT, o.t = MG_F32;  /* dtype */
    assert_int_equal(wt_ckpt_add(w, o.tag, o.t, o.rank, o.dims, fill_cb, &c), 0);
  }
  fill_ctx c = {.s = &s[NDTYPES]};
  assert_int_equal(wt_ckpt_add(w, "extra", MG_F64, 0, NULL, fill_cb, &c), 0); /* only in B */
  assert_int_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  assert_int_equal(d.errors, 0);
  assert_int_equal(count_temporaries(), 0);
  mg_diags_free(&d);
}

/* ---- hand-made inputs ------------------------------------------------------------- */

typedef struct {
  unsigned char b[8192];
  size_t n;
} pbuf;

static void pb_varint(pbuf *p, uint64_t v) {
  while (v >= 0x80) p->b[p->n++] = (unsigned char)(v | 0x80), v >>= 7;
  p->b[p->n++] = (unsigned char)v;
}
static void pb_key(pbuf *p, int field, int wt) { pb_varint(p, (uint64_t)field << 3 | (uint64_t)wt); }
static void pb_bytes(pbuf *p, int field, const void *v, size_t n) {
  pb_key(p, field, 2);
  pb_varint(p, n);
  memcpy(p->b + p->n, v, n);
  p->n += n;
}

/* A TensorProto; dims packed or not; type or content NULL to leave them out. */
static pbuf tensor_pb(int rank, const uint64_t *dims, int packed, const char *type, const void *content,
                      size_t clen) {
  pbuf t = {.n = 0};
  if (packed && rank) {
    pbuf pk = {.n = 0};
    for (int i = 0; i < rank; i++) pb_varint(&pk, dims[i]);
    pb_bytes(&t, 1, pk.b, pk.n);
  } else {
    for (int i = 0; i < rank; i++) pb_key(&t, 1, 0), pb_varint(&t, dims[i]);
  }
  if (type) pb_bytes(&t, 2, type, strlen(type));
  if (content) pb_bytes(&t, 3, content, clen);
  return t;
}

/* Appends Checkpoint.value = Value{tag, tensor} to file. */
static void add_value(pbuf *file, const char *tag, const pbuf *tensor) {
  pbuf v = {.n = 0};
  pb_bytes(&v, 1, tag, strlen(tag));
  pb_bytes(&v, 2, tensor->b, tensor->n);
  pb_bytes(file, 1, v.b, v.n);
}

/* Opens b (copied to an exact-size heap block so ASan sees any overread). */
static int open_pb(const pbuf *b, wt_source **out, mg_diags *d) {
  unsigned char *copy = malloc(b->n ? b->n : 1);
  memcpy(copy, b->b, b->n);
  int rc = ckpt_open_buffer(copy, b->n, "test", out, d);
  if (rc == 0) { /* read everything while the buffer lives */
    for (int i = 0; i < wt_count(*out); i++) {
      const wt_tensor *t = wt_get(*out, i);
      unsigned char *dst = malloc((size_t)wt_numel(t) * mg_dtype_size(t->dtype) + 1);
      assert_int_equal(wt_read(*out, t, 0, wt_numel(t), dst, d), 0);
      free(dst);
    }
    wt_close(*out);
    *out = NULL;
  }
  free(copy);
  return rc;
}

/* Expects b to be refused, its first error diagnostic having the given code. */
static void expect_error(const pbuf *b, mg_diag_code code, const char *what) {
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = (wt_source *)&d; /* must be reset to NULL on failure */
  if (open_pb(b, &s, &d) == 0) fail_msg("%s: accepted", what);
  assert_null(s);
  size_t k = 0;
  while (k < d.count && d.items[k].severity != MG_SEV_ERROR) k++; /* past warnings */
  assert_true(k < d.count);
  if (d.items[k].code != code)
    fail_msg("%s: code %s, want %s (%s)", what, mg_diag_code_name(d.items[k].code), mg_diag_code_name(code),
             d.items[k].message);
  mg_diags_free(&d);
}

static void test_handmade(void **state) {
  (void)state;
  float f4[4] = {1, 2, 3, 4};
  uint64_t d22[2] = {2, 2}, d4[1] = {4}, d2[1] = {2};
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = NULL;

  /* packed dims, an unknown field in each message, and a join over an empty chunk */
  pbuf f = {.n = 0}, t = tensor_pb(2, d22, 1, "Float32", f4, 16);
  pb_key(&t, 9, 0), pb_varint(&t, 7);
  pbuf v = {.n = 0};
  pb_bytes(&v, 1, "w", 1), pb_bytes(&v, 2, t.b, t.n), pb_key(&v, 15, 5), v.n += 4;
  pb_bytes(&f, 1, v.b, v.n);
  pbuf c1 = tensor_pb(1, d4, 0, "Float32", f4, 8), c2 = tensor_pb(1, d4, 1, "Float32", f4, 0),
       c3 = tensor_pb(1, d4, 0, "Float32", f4 + 2, 8);
  add_value(&f, "j", &c1), add_value(&f, "j", &c2), add_value(&f, "j", &c3);
  unsigned char *copy = malloc(f.n);
  memcpy(copy, f.b, f.n);
  assert_int_equal(ckpt_open_buffer(copy, f.n, "test", &s, &d), 0);
  assert_int_equal(wt_count(s), 2);
  assert_int_equal(wt_get(s, 0)->rank, 2);
  assert_int_equal(wt_get(s, 0)->dims[1], 2);
  float got[4];
  assert_int_equal(wt_read(s, wt_get(s, 0), 0, 4, got, &d), 0);
  assert_memory_equal(got, f4, 16);
  assert_int_equal(wt_read(s, wt_get(s, 1), 0, 4, got, &d), 0);
  assert_memory_equal(got, f4, 16);
  assert_int_equal(wt_read(s, wt_get(s, 1), 1, 2, got, &d), 0);
  assert_memory_equal(got, f4 + 1, 8);
  ckpt_info info;
  assert_int_equal(ckpt_source_info(s, &info), 0);
  assert_int_equal(info.n_values, 4);
  wt_close(s);
  free(copy);
  assert_int_equal(d.errors, 0);

  /* What MindSpore stores besides tensors is skipped with a warning: the RNG state
   * and append_dict strings; dims [0] with one element is its scalar. */
  uint64_t d0[1] = {0};
  pbuf rng = tensor_pb(1, d0, 0, "random_op", "\1\2\3", 3), str = tensor_pb(1, d0, 0, "str", "a\0\0\0", 4),
       sc = tensor_pb(1, d0, 0, "Float32", f4, 4), e0 = tensor_pb(1, d0, 0, "Int8", "", 0);
  f.n = 0, add_value(&f, "random_op", &rng), add_value(&f, "s", &sc), add_value(&f, "note", &str);
  add_value(&f, "e", &e0);
  copy = malloc(f.n);
  memcpy(copy, f.b, f.n);
  assert_int_equal(ckpt_open_buffer(copy, f.n, "test", &s, &d), 0);
  assert_int_equal(d.errors, 0);
  assert_int_equal(d.warnings, 2);
  assert_int_equal(wt_count(s), 2);
  assert_int_equal(wt_get(s, 0)->rank, 0);
  assert_int_equal(wt_get(s, 1)->rank, 1);
  assert_int_equal(wt_numel(wt_get(s, 1)), 0);
  assert_int_equal(wt_read(s, wt_get(s, 0), 0, 1, got, &d), 0);
  assert_true(got[0] == 1.0f);
  assert_int_equal(ckpt_source_info(s, &info), 0);
  assert_int_equal(info.n_values, 4);
  wt_close(s);
  free(copy);
  mg_diags_free(&d);
  mg_diags_init(&d);

  pbuf e = {.n = 0};
  add_value(&e, "a", &c1), add_value(&e, "random_op", &rng), add_value(&e, "a", &c3);
  expect_error(&e, MG_D_INVALID, "chunks not adjacent around a skipped Value");
  e.n = 0, add_value(&e, "random_op", &rng);
  expect_error(&e, MG_D_INVALID, "nothing but skipped Values");
  e.n = 0;
  expect_error(&e, MG_D_INVALID, "empty file");
  pbuf ok = tensor_pb(1, d4, 0, "Float32", f4, 16);
  e.n = 0, add_value(&e, "a", &ok), add_value(&e, "b", &ok), add_value(&e, "a", &ok);
  expect_error(&e, MG_D_INVALID, "non-adjacent duplicate");
  pbuf other = tensor_pb(1, d2, 0, "Float32", f4, 8);
  e.n = 0, add_value(&e, "a", &ok), add_value(&e, "a", &other);
  expect_error(&e, MG_D_INVALID, "chunks with different dims");
  pbuf i32 = tensor_pb(1, d4, 0, "Int32", f4, 16);
  e.n = 0, add_value(&e, "a", &ok), add_value(&e, "a", &i32);
  expect_error(&e, MG_D_INVALID, "chunks with different types");
  pbuf f8 = tensor_pb(1, d4, 0, "Float8", f4, 4);
  e.n = 0, add_value(&e, "a", &f8);
  expect_error(&e, MG_D_UNSUPPORTED_DTYPE, "unknown tensor_type");
  pbuf i4 = tensor_pb(1, d4, 0, "Int4", f4, 2);
  e.n = 0, add_value(&e, "a", &i4);
  expect_error(&e, MG_D_UNSUPPORTED_DTYPE, "Int4 tensor_type");
  pbuf short_ = tensor_pb(1, d4, 0, "Float32", f4, 12);
  e.n = 0, add_value(&e, "a", &short_);
  expect_error(&e, MG_D_INVALID, "content shorter than dims");
  e.n = 0, add_value(&e, "a", &c1), add_value(&e, "a", &c1), add_value(&e, "a", &c1);
  expect_error(&e, MG_D_INVALID, "joined chunks longer than dims");
  pbuf notype = tensor_pb(1, d4, 0, NULL, f4, 16), nocontent = tensor_pb(1, d4, 0, "Float32", NULL, 0);
  e.n = 0, add_value(&e, "a", &notype);
  expect_error(&e, MG_D_INVALID, "no tensor_type");
  e.n = 0, add_value(&e, "a", &nocontent);
  expect_error(&e, MG_D_INVALID, "no tensor_content");
  e.n = 0, add_value(&e, "a\x01", &ok);
  expect_error(&e, MG_D_INVALID, "control character in tag");
  e.n = 0, add_value(&e, "", &ok);
  expect_error(&e, MG_D_INVALID, "empty tag");
  uint64_t neg[1] = {(uint64_t)-4};
  pbuf negt = tensor_pb(1, neg, 0, "Float32", f4, 16);
  e.n = 0, add_value(&e, "a", &negt);
  expect_error(&e, MG_D_INVALID, "negative dim");
  uint64_t big[3] = {0, 1ull << 40, 1ull << 40};
  pbuf bigt = tensor_pb(3, big, 0, "Float32", f4, 0);
  e.n = 0, add_value(&e, "a", &bigt);
  expect_error(&e, MG_D_INVALID, "dims that overflow (behind a zero)");
  uint64_t r17[17];
  for (int i = 0; i < 17; i++) r17[i] = 1;
  pbuf rt = tensor_pb(17, r17, 0, "Float32", f4, 4);
  e.n = 0, add_value(&e, "a", &rt);
  expect_error(&e, MG_D_LIMIT, "rank 17");
  pbuf mv = {.n = 0};
  pb_bytes(&mv, 1, "m", 1), pb_bytes(&mv, 3, "", 0);
  e.n = 0, pb_bytes(&e, 1, mv.b, mv.n);
  expect_error(&e, MG_D_LIMIT, "MapTensor");
  pbuf nt = {.n = 0};
  pb_bytes(&nt, 1, "m", 1);
  e.n = 0, pb_bytes(&e, 1, nt.b, nt.n);
  expect_error(&e, MG_D_INVALID, "Value without a tensor");
  e.n = 0, add_value(&e, "a", &ok), pb_bytes(&e, 2, "x", 1);
  expect_error(&e, MG_D_MALFORMED, "top-level field 2");
  e.n = 0, add_value(&e, "a", &ok), pb_key(&e, 1, 0), pb_varint(&e, 3);
  expect_error(&e, MG_D_MALFORMED, "top-level field 1 as varint");
  e.n = 0, add_value(&e, "a", &ok), pb_key(&e, 1, 3);
  expect_error(&e, MG_D_MALFORMED, "group wire type");
  e.n = 0, add_value(&e, "a", &ok), e.b[e.n++] = 0x0a, e.b[e.n++] = 0xff;
  expect_error(&e, MG_D_MALFORMED, "truncated varint");
  e.n = 0, add_value(&e, "a", &ok);
  memset(e.b + e.n, 0xff, 11), e.n += 11;
  expect_error(&e, MG_D_MALFORMED, "overlong varint");
  e.n = 0, add_value(&e, "a", &ok), pb_key(&e, 1, 2), pb_varint(&e, 1000);
  expect_error(&e, MG_D_MALFORMED, "length past the end");
  /* CRC: right, wrong, and a trailer value over 32 bits */
  e.n = 0, add_value(&e, "a", &ok);
  uint32_t crc = wt_crc32(0, e.b, e.n);
  memcpy(e.b + e.n, "crc_num\0\0\0\0\0\0", 13), e.n += 13;
  for (int i = 3; i >= 0; i--) e.b[e.n++] = (unsigned char)(crc >> (8 * i));
  assert_int_equal(open_pb(&e, &s, &d), 0);
  e.b[e.n - 1] ^= 1;
  expect_error(&e, MG_D_INVALID, "CRC mismatch");
  e.b[e.n - 1] ^= 1, e.b[e.n - 5] = 1;
  expect_error(&e, MG_D_INVALID, "CRC over 32 bits");
  assert_int_equal(d.errors, 0);
  /* the CRC of a known string, as binascii.crc32(b"123456789") */
  assert_int_equal(wt_crc32(0, "123456789", 9), 0xcbf43926u);
  assert_int_equal(wt_crc32(wt_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
  mg_diags_free(&d);
}

/* ---- truncation and corruption of written files ----------------------------------- */

/* Opens b[0, n) from an exact-size copy: success must give correct tensors (a
 * prefix of the specs), failure a diagnostic. Returns ckpt_open_buffer's rc. */
static int open_checked(const unsigned char *b, size_t n, const spec *s, int exact) {
  unsigned char *copy = malloc(n ? n : 1);
  memcpy(copy, b, n);
  mg_diags d;
  mg_diags_init(&d);
  wt_source *src = NULL;
  int rc = ckpt_open_buffer(copy, n, "cut", &src, &d);
  if (rc == 0) {
    if (exact) check_source(src, s, NSPECS, 1);
    else
      for (int i = 0; i < wt_count(src); i++) { /* corrupt content: readable, values free */
        const wt_tensor *t = wt_get(src, i);
        unsigned char *dst = malloc((size_t)wt_numel(t) * mg_dtype_size(t->dtype) + 1);
        assert_int_equal(wt_read(src, t, 0, wt_numel(t), dst, &d), 0);
        free(dst);
      }
    wt_close(src);
  } else {
    assert_null(src);
    assert_true(d.errors > 0 && d.count > 0);
  }
  mg_diags_free(&d);
  free(copy);
  return rc;
}

static void test_truncate(void **state) {
  (void)state;
  spec s[NSPECS];
  make_specs(s);
  char p[4200];
  const char *names[] = {"all.ckpt", "all_crc.ckpt"};
  for (int f = 0; f < 2; f++) {
    size_t n;
    unsigned char *b = slurp(fx(p, names[f]), &n);
    int ok = 0;
    for (size_t k = 0; k < n; k++) ok += open_checked(b, k, s, 1) == 0;
    /* Prefixes that end on a tensor's last Value are valid files (that is what the
     * CRC trailer is for); there is one per tensor but the last, plus the file
     * without its trailer. */
    assert_int_equal(ok, NSPECS - 1 + f);
    assert_int_equal(open_checked(b, n, s, 1), 0);
    free(b);
  }
}

static void test_corrupt(void **state) {
  (void)state;
  spec s[NSPECS];
  make_specs(s);
  char p[4200];
  const char *names[] = {"all.ckpt", "all_crc.ckpt"};
  const unsigned char masks[] = {0x01, 0x80, 0xff, 0x7f};
  for (int f = 0; f < 2; f++) {
    size_t n;
    unsigned char *b = slurp(fx(p, names[f]), &n);
    for (size_t k = 0; k < n; k++)
      for (size_t m = 0; m < sizeof masks; m++) {
        b[k] ^= masks[m];
        int rc = open_checked(b, n, s, 0);
        if (f == 1 && k < n - 17) assert_int_not_equal(rc, 0); /* the CRC sees every byte */
        b[k] ^= masks[m];
      }
    free(b);
  }
}

/* ---- the writer's rules ----------------------------------------------------------- */

static void test_writer_rules(void **state) {
  (void)state;
  spec s[NSPECS];
  make_specs(s);
  char p[4200], q[4200];
  mg_diags d;
  mg_diags_init(&d);
  wt_ckpt_writer *w = NULL;
  fx(p, "rules.ckpt");
  unlink(p);
  /* refused additions leave the writer usable */
  assert_int_equal(wt_ckpt_begin(p, 0, 0, &w, &d), 0);
  fill_ctx c = {.s = &s[0]};
  int64_t dims17[17] = {1}, neg[2] = {3, -4};
  assert_int_not_equal(wt_ckpt_add(w, "c", MG_C64, 2, s[0].dims, fill_cb, &c), 0);
  assert_int_equal(d.items[d.count - 1].code, MG_D_UNSUPPORTED_DTYPE);
  assert_int_not_equal(wt_ckpt_add(w, "c", MG_STRING, 2, s[0].dims, fill_cb, &c), 0);
  assert_int_not_equal(wt_ckpt_add(w, "c", MG_F32, 17, dims17, fill_cb, &c), 0);
  assert_int_equal(d.items[d.count - 1].code, MG_D_LIMIT);
  assert_int_not_equal(wt_ckpt_add(w, "c", MG_F32, 2, neg, fill_cb, &c), 0);
  assert_int_not_equal(wt_ckpt_add(w, "", MG_F32, 2, s[0].dims, fill_cb, &c), 0);
  assert_int_not_equal(wt_ckpt_add(w, "a\nb", MG_F32, 2, s[0].dims, fill_cb, &c), 0);
  assert_int_not_equal(wt_ckpt_commit(w), 0); /* nothing added yet */
  assert_int_equal(wt_ckpt_add(w, s[0].tag, s[0].t, 2, s[0].dims, fill_cb, &c), 0);
  c = (fill_ctx){.s = &s[0]};
  assert_int_not_equal(wt_ckpt_add(w, s[0].tag, s[0].t, 2, s[0].dims, fill_cb, &c), 0); /* twice */
  assert_false(exists(p));
  assert_int_equal(count_temporaries(), 1);
  assert_int_equal(wt_ckpt_commit(w), 0);
  assert_int_not_equal(wt_ckpt_add(w, "late", MG_F32, 0, NULL, fill_cb, &c), 0);
  wt_ckpt_abort(w); /* after commit: frees, removes nothing */
  assert_true(exists(p));
  assert_int_equal(count_temporaries(), 0);
  size_t before = d.errors;
  /* an existing output: refused without force, replaced with it */
  assert_int_not_equal(wt_ckpt_begin(p, 0, 0, &w, &d), 0);
  assert_null(w);
  assert_int_equal(d.items[d.count - 1].code, MG_D_IO);
  assert_int_equal(d.errors, before + 1);
  assert_int_equal(write_specs(p, s, 3, 1, &d), 0);
  wt_source *src;
  assert_int_equal(ckpt_open(p, &src, &d), 0);
  check_source(src, s, 3, 0);
  wt_close(src);
  /* a file that appears between begin and commit is not clobbered without force */
  unlink(p);
  assert_int_equal(wt_ckpt_begin(p, 0, 0, &w, &d), 0);
  c = (fill_ctx){.s = &s[0]};
  assert_int_equal(wt_ckpt_add(w, s[0].tag, s[0].t, 2, s[0].dims, fill_cb, &c), 0);
  FILE *fp = fopen(p, "w");
  fputs("precious", fp);
  fclose(fp);
  assert_int_not_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  size_t n;
  unsigned char *b = slurp(p, &n);
  assert_int_equal(n, 8);
  free(b);
  unlink(p);
  /* a failing fill breaks the writer; abort leaves nothing behind */
  wt_ckpt_set_limits(0, 16);
  assert_int_equal(wt_ckpt_begin(p, 0, 0, &w, &d), 0);
  c = (fill_ctx){.s = &s[0], .fail_at_call = 2};
  assert_int_not_equal(wt_ckpt_add(w, s[0].tag, s[0].t, 2, s[0].dims, fill_cb, &c), 0);
  c = (fill_ctx){.s = &s[1]};
  assert_int_not_equal(wt_ckpt_add(w, s[1].tag, s[1].t, 2, s[1].dims, fill_cb, &c), 0);
  assert_int_not_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  wt_ckpt_set_limits(0, 0);
  assert_false(exists(p));
  assert_int_equal(count_temporaries(), 0);
  /* where nothing can be written */
  snprintf(q, sizeof q, "%s/no/such/dir/x.ckpt", fixdir);
  assert_int_not_equal(wt_ckpt_begin(q, 1, 0, &w, &d), 0);
  assert_int_not_equal(wt_ckpt_begin(fixdir, 1, 0, &w, &d), 0); /* a directory */
  assert_int_not_equal(ckpt_open(q, &src, &d), 0);
  assert_int_not_equal(ckpt_open(fixdir, &src, &d), 0);
  assert_null(src);
  /* the MindSpore type names */
  for (int i = 0; i < NDTYPES; i++) {
    assert_string_equal(wt_ms_type_name(dtypes[i].t), dtypes[i].ms);
    assert_int_equal(wt_ms_type_parse(dtypes[i].ms), dtypes[i].t);
  }
  assert_null(wt_ms_type_name(MG_C64));
  assert_int_equal(wt_ms_type_parse("float32"), MG_UNDEFINED);
  mg_diags_free(&d);
}

/* ---- allocation failures ----------------------------------------------------------- */

/* Write and read back with the nth allocation (and every later one) failing, for
 * n = 1, 2, ... until a run no longer reaches the injected failure. Every failure
 * must be reported, leave no temporary and no output, and leak nothing (ASan). */
static void test_faults(void **state) {
  (void)state;
  spec s[NSPECS];
  make_specs(s);
  char p[4200];
  fx(p, "fault.ckpt");
  wt_ckpt_set_limits(VALUE_BYTES, FILL_BYTES);
  for (long n = 1;; n++) {
    unlink(p);
    mg_diags d;
    mg_diags_init(&d);
    mg_fault_fail_at(n, 1);
    int rc = write_specs(p, s, NSPECS, 1, &d);
    wt_source *src = NULL;
    if (rc == 0) rc = ckpt_open(p, &src, &d);
    long reached = mg_fault_count() >= n;
    mg_fault_fail_at(0, 0);
    assert_int_equal(count_temporaries(), 0);
    if (rc) {
      assert_true(d.errors > 0);
      assert_null(src);
    } else {
      check_source(src, s, NSPECS, 0);
      wt_close(src);
    }
    mg_diags_free(&d);
    if (!reached) {
      assert_int_equal(rc, 0);
      break;
    }
    assert_true(n < 100000);
  }
  wt_ckpt_set_limits(0, 0);
  unlink(p);
}

/* View callback state: the whole tensor computed up front; every other range is
 * handed out from it, the rest left to fill, and a failure can be injected. */
typedef struct {
  fill_ctx f;
  unsigned char *all;
  size_t es;
  int calls, fail_at_call;
} view_ctx;

static int view_cb(void *p, int64_t first, int64_t count, const void **out) {
  view_ctx *v = p;
  assert_int_equal(first, v->f.next);
  *out = NULL;
  if (++v->calls == v->fail_at_call) return -1;
  if (v->calls % 2) return 0;
  *out = v->all + (size_t)first * v->es;
  v->f.next = first + count;
  return 0;
}

static int view_fill_cb(void *p, int64_t first, int64_t count, void *dst) {
  return fill_cb(&((view_ctx *)p)->f, first, count, dst);
}

/* Writes specs (with a 6 MB tensor among small ones, so that large pieces go out
 * directly while small ones are staged) through fill alone or through view and
 * fill; returns the file's bytes. */
static unsigned char *write_mixed(const char *path, int with_view, int crc, size_t *len) {
  spec s[3] = {{"small.a", MG_F32, K_FORMULA, 2, 1, {3, 4}},
               {"big", MG_F32, K_SPLIT, 2, 1, {1500, 1000}},
               {"small.b", MG_I16, K_FORMULA, 2, 1, {3, 4}}};
  mg_diags d;
  mg_diags_init(&d);
  wt_ckpt_writer *w;
  assert_int_equal(wt_ckpt_begin(path, 1, crc, &w, &d), 0);
  for (int i = 0; i < 3; i++) {
    int64_t n = spec_numel(&s[i]);
    view_ctx v = {.f = {.s = &s[i]}, .es = mg_dtype_size(s[i].t)};
    v.all = malloc((size_t)n * v.es);
    assert_non_null(v.all);
    formula(s[i].kind, s[i].t, 0, n, v.all);
    if (with_view) assert_int_equal(wt_ckpt_add_view(w, s[i].tag, s[i].t, 2, s[i].dims, view_fill_cb, view_cb, &v), 0);
    else assert_int_equal(wt_ckpt_add(w, s[i].tag, s[i].t, 2, s[i].dims, fill_cb, &v.f), 0);
    free(v.all);
  }
  assert_int_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  assert_int_equal(d.errors, 0);
  mg_diags_free(&d);
  return slurp(path, len);
}

/* Content handed out by view is written exactly as fill's would be, staged or
 * direct, with and without the CRC trailer; a failing view breaks the writer
 * like a failing fill. */
static void test_view_writes(void **state) {
  (void)state;
  char p[4200];
  wt_ckpt_set_limits(0, 0); /* 4 MB chunks: the big tensor's go out directly */
  for (int crc = 0; crc < 2; crc++) {
    size_t na, nb;
    unsigned char *a = write_mixed(fx(p, "mixed_fill.ckpt"), 0, crc, &na);
    unsigned char *b = write_mixed(fx(p, "mixed_view.ckpt"), 1, crc, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    assert_true(na > (size_t)6000000);
    free(a);
    free(b);
  }
  spec big = {"big", MG_F32, K_SPLIT, 2, 1, {1500, 1000}};
  mg_diags d;
  mg_diags_init(&d);
  wt_ckpt_writer *w;
  assert_int_equal(wt_ckpt_begin(fx(p, "mixed_fail.ckpt"), 1, 0, &w, &d), 0);
  view_ctx v = {.f = {.s = &big}, .es = 4, .fail_at_call = 2};
  assert_int_not_equal(wt_ckpt_add_view(w, big.tag, big.t, 2, big.dims, view_fill_cb, view_cb, &v), 0);
  assert_int_not_equal(wt_ckpt_commit(w), 0);
  wt_ckpt_abort(w);
  assert_false(exists(fx(p, "mixed_fail.ckpt")));
  unlink(fx(p, "mixed_fill.ckpt"));
  unlink(fx(p, "mixed_view.ckpt"));
  assert_int_equal(count_temporaries(), 0);
  mg_diags_free(&d);
}

/* CRC-32 bit by bit, straight from the definition (reflected 0xEDB88320). */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t n) {
  crc = ~crc;
  while (n--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++) crc = crc & 1 ? 0xedb88320u ^ (crc >> 1) : crc >> 1;
  }
  return ~crc;
}

/* wt_crc32 (vector path where the CPU has one) and the table path agree with the
 * definition on the check value, on every length and alignment around the 16- and
 * 64-byte vector steps, and when a buffer is summed in pieces. */
static void test_crc32(void **state) {
  (void)state;
  assert_int_equal(wt_crc32(0, "123456789", 9), 0xcbf43926u);
  assert_int_equal(wt_crc32_portable(0, "123456789", 9), 0xcbf43926u);
  enum { N = 70000 };
  unsigned char *b = malloc(N);
  assert_non_null(b);
  uint32_t x = 12345;
  for (size_t i = 0; i < N; i++) x = x * 1103515245u + 12345u, b[i] = (unsigned char)(x >> 16);
  for (size_t off = 0; off < 16; off++)
    for (size_t n = 0; n < 300; n++) {
      uint32_t want = crc_bitwise(0x5a5a5a5au, b + off, n);
      assert_int_equal(wt_crc32(0x5a5a5a5au, b + off, n), want);
      assert_int_equal(wt_crc32_portable(0x5a5a5a5au, b + off, n), want);
    }
  uint32_t whole = crc_bitwise(0, b, N), parts = 0;
  assert_int_equal(wt_crc32(0, b, N), whole);
  for (size_t at = 0, step = 1; at < N; at += step, step = step * 3 + 1)
    parts = wt_crc32(parts, b + at, at + step <= N ? step : N - at);
  assert_int_equal(parts, whole);
  free(b);
}

/* wt_export_dtype: --precision's checkpoint dtype per tensor. The expected
 * dtypes are the rule itself (AMP O2's black list, facts.md section 6): every
 * float tensor in 16 bits but those of BatchNorm* and LayerNorm modules, integer
 * tensors untouched, and nothing converted without to_float. */
static void test_export_dtype(void **state) {
  (void)state;
  wt_tensor f32 = {.name = "w", .dtype = MG_F32}, i64 = {.name = "n", .dtype = MG_I64};
  wt_plan_entry conv = {.src = &f32, .module_type = NULL}, bn = {.src = &f32, .module_type = "BatchNorm2d"},
                bn1 = {.src = &f32, .module_type = "BatchNorm1d"}, ln = {.src = &f32, .module_type = "LayerNorm"},
                gn = {.src = &f32, .module_type = "GroupNorm"}, idx = {.src = &i64, .module_type = "BatchNorm2d"};
  wt_export_opts keep = {.to_float = MG_UNDEFINED, .keep_norm_fp32 = 1};
  assert_int_equal(wt_export_dtype(&keep, &conv), MG_F32);
  assert_int_equal(wt_export_dtype(&keep, &idx), MG_I64);
  wt_export_opts f16 = {.to_float = MG_F16, .keep_norm_fp32 = 1};
  assert_int_equal(wt_export_dtype(&f16, &conv), MG_F16);
  assert_int_equal(wt_export_dtype(&f16, &gn), MG_F16); /* GroupNorm is not on the black list */
  assert_int_equal(wt_export_dtype(&f16, &bn), MG_F32);
  assert_int_equal(wt_export_dtype(&f16, &bn1), MG_F32);
  assert_int_equal(wt_export_dtype(&f16, &ln), MG_F32);
  assert_int_equal(wt_export_dtype(&f16, &idx), MG_I64);
  wt_export_opts bf16_all = {.to_float = MG_BF16}; /* migc weights --dtype bf16: every float tensor */
  assert_int_equal(wt_export_dtype(&bf16_all, &bn), MG_BF16);
  assert_int_equal(wt_export_dtype(&bf16_all, &ln), MG_BF16);
}

int main(void) {
  const char *dir = getenv("MIGC_CKPT_FIXTURES");
  if (!dir || !*dir) {
    fprintf(stderr, "test_ckpt: set MIGC_CKPT_FIXTURES to a directory for the files it writes\n");
    return 1;
  }
  snprintf(fixdir, sizeof fixdir, "%s", dir);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", fixdir);
  if (system(cmd) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),    cmocka_unit_test(test_handmade), cmocka_unit_test(test_truncate),
      cmocka_unit_test(test_corrupt),      cmocka_unit_test(test_writer_rules),
      cmocka_unit_test(test_faults),       cmocka_unit_test(test_crc32),
      cmocka_unit_test(test_view_writes),  cmocka_unit_test(test_export_dtype),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
