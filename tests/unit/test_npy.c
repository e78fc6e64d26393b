/* Tests for interp/npy.c against files numpy wrote (tests/unit/make_npy_fixtures.py).
 *
 * MIGC_NPY_FIXTURES names the fixture directory; without it the test fails, so
 * a misconfigured run can never pass by testing nothing. Files this test writes
 * go to $MIGC_NPY_FIXTURES/written, where `make_npy_fixtures.py --check` has
 * numpy read them back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "arena.h"
#include "npy.h"

enum { N = 12 }; /* elements in each formula array, shape (3, 4) */

static const struct {
  const char *name;
  mg_dtype t;
} dtypes[] = {
    {"float16", MG_F16}, {"float32", MG_F32},  {"float64", MG_F64},     {"int8", MG_I8},
    {"int16", MG_I16},   {"int32", MG_I32},    {"int64", MG_I64},       {"uint8", MG_U8},
    {"uint16", MG_U16},  {"uint32", MG_U32},   {"uint64", MG_U64},      {"bool", MG_BOOL},
    {"complex64", MG_C64}, {"complex128", MG_C128},
};
enum { NDTYPES = sizeof dtypes / sizeof dtypes[0] };

/* Element k of the arrays make_npy_fixtures.py formula() writes, computed here
 * independently so a reader bug cannot agree with itself. */
static void fill_formula(mg_dtype t, void *buf, size_t n) {
  for (size_t k = 0; k < n; k++) {
    double f = (double)k * 0.5 - 3;
    int64_t s = (int64_t)k - 6;
    switch (t) {
      case MG_F16: ((uint16_t *)buf)[k] = mg_f32_to_f16((float)f); break;
      case MG_F32: ((float *)buf)[k] = (float)f; break;
      case MG_F64: ((double *)buf)[k] = f; break;
      case MG_I8: ((int8_t *)buf)[k] = (int8_t)s; break;
      case MG_I16: ((int16_t *)buf)[k] = (int16_t)(s * 1000); break;
      case MG_I32: ((int32_t *)buf)[k] = (int32_t)(s * 100000000); break;
      case MG_I64: ((int64_t *)buf)[k] = s * 1000000000000000LL; break;
      case MG_U8: ((uint8_t *)buf)[k] = (uint8_t)(k * 20); break;
      case MG_U16: ((uint16_t *)buf)[k] = (uint16_t)(k * 5000); break;
      case MG_U32: ((uint32_t *)buf)[k] = (uint32_t)(k * 300000000u); break;
      case MG_U64: ((uint64_t *)buf)[k] = (uint64_t)k * 1500000000000000000ULL; break;
      case MG_BOOL: ((uint8_t *)buf)[k] = k % 3 == 0; break;
      case MG_C64: ((float *)buf)[2 * k] = (float)f, ((float *)buf)[2 * k + 1] = (float)k; break;
      case MG_C128: ((double *)buf)[2 * k] = f, ((double *)buf)[2 * k + 1] = (double)k; break;
      default: fail_msg("no formula for %s", mg_dtype_name(t));
    }
  }
}

/* Path of a fixture (sub may be "written/..."); buf must hold PATH_MAX-ish. */
static const char *fx(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", getenv("MIGC_NPY_FIXTURES"), name);
  return buf;
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

static void spill(const char *path, const void *buf, size_t len) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(buf, 1, len, fp), len);
  fclose(fp);
}

static int has_code(const mg_diags *d, mg_diag_code c) {
  for (size_t i = 0; i < d->count; i++)
    if (d->items[i].code == c && d->items[i].severity == MG_SEV_ERROR) return 1;
  return 0;
}

/* Assert that a holds the formula for t with the given shape. */
static void expect_formula(const mg_array *a, mg_dtype t, int rank, const int64_t *dims) {
  size_t n = 1;
  assert_int_equal(a->dtype, t);
  assert_int_equal(a->rank, rank);
  for (int i = 0; i < rank; i++) {
    assert_int_equal(a->dims[i], dims[i]);
    n *= (size_t)dims[i];
  }
  assert_int_equal(a->nbytes, n * mg_dtype_size(t));
  void *want = malloc(a->nbytes + 1);
  fill_formula(t, want, n);
  assert_memory_equal(a->data, want, a->nbytes);
  free(want);
}

/* Read a fixture that must load cleanly. */
static void read_ok(const char *name, mg_array *a) {
  char p[4096];
  mg_diags d;
  mg_diags_init(&d);
  int rc = npy_read_file(fx(p, sizeof p, name), a, &d);
  if (rc != 0 || d.errors) {
    char line[1200];
    if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
    fail_msg("%s: rc %d, %s", name, rc, d.count ? line : "no diagnostic");
  }
  assert_int_equal(d.warnings, 0);
  mg_diags_free(&d);
}

static const int64_t shape34[] = {3, 4};

static void test_each_dtype_from_numpy(void **state) {
  (void)state;
  for (int i = 0; i < NDTYPES; i++) {
    char name[64];
    mg_array a;
    snprintf(name, sizeof name, "%s.npy", dtypes[i].name);
    read_ok(name, &a);
    assert_null(a.name);
    expect_formula(&a, dtypes[i].t, 2, shape34);
    mg_array_free(&a);
  }
}

static void test_big_endian_converted(void **state) {
  (void)state;
  static const struct { const char *file; mg_dtype t; } cases[] = {
      {"be_float64.npy", MG_F64}, {"be_int32.npy", MG_I32}, {"be_complex64.npy", MG_C64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mg_array a;
    read_ok(cases[i].file, &a);
    expect_formula(&a, cases[i].t, 2, shape34);
    mg_array_free(&a);
  }
}

static void test_fortran_order_converted(void **state) {
  (void)state;
  mg_array a;
  read_ok("fortran_float32.npy", &a);
  assert_int_equal(a.rank, 3);
  assert_int_equal(a.dims[0], 2);
  assert_int_equal(a.dims[1], 3);
  assert_int_equal(a.dims[2], 4);
  for (int i = 0; i < 24; i++) assert_true(((float *)a.data)[i] == (float)i);
  mg_array_free(&a);
  read_ok("fortran_uint16.npy", &a);
  assert_int_equal(a.rank, 2);
  assert_int_equal(a.dims[0], 3);
  assert_int_equal(a.dims[1], 5);
  for (int i = 0; i < 15; i++) assert_int_equal(((uint16_t *)a.data)[i], i * 7);
  mg_array_free(&a);
}

static void test_zero_d_and_empty(void **state) {
  (void)state;
  mg_array a;
  read_ok("scalar.npy", &a);
  assert_int_equal(a.rank, 0);
  assert_int_equal(a.dtype, MG_F64);
  assert_int_equal(a.nbytes, 8);
  assert_true(*(double *)a.data == 2.5);
  mg_array_free(&a);
  read_ok("empty.npy", &a);
  assert_int_equal(a.rank, 2);
  assert_int_equal(a.dims[0], 0);
  assert_int_equal(a.dims[1], 3);
  assert_int_equal(a.nbytes, 0);
  mg_array_free(&a);
  read_ok("empty1d.npy", &a);
  assert_int_equal(a.rank, 1);
  assert_int_equal(a.dims[0], 0);
  assert_int_equal(a.dtype, MG_I64);
  mg_array_free(&a);
}

static void test_format_versions_2_and_3(void **state) {
  (void)state;
  mg_array a;
  read_ok("v2.npy", &a);
  expect_formula(&a, MG_F32, 2, shape34);
  mg_array_free(&a);
  read_ok("v3.npy", &a);
  expect_formula(&a, MG_I32, 2, shape34);
  mg_array_free(&a);
}

/* The five members make_npy_fixtures.py npz_members() puts in an archive. */
static void expect_members(mg_array *arr, int count) {
  static const int64_t b_dims[] = {N}, e_dims[] = {0, 3};
  assert_int_equal(count, 5);
  const char *names[] = {"a", "b", "c", "s", "e"};
  for (int i = 0; i < 5; i++) assert_string_equal(arr[i].name, names[i]);
  expect_formula(&arr[0], MG_F32, 2, shape34);
  expect_formula(&arr[1], MG_I64, 1, b_dims);
  expect_formula(&arr[2], MG_BOOL, 2, shape34);
  assert_int_equal(arr[3].rank, 0);
  assert_true(*(double *)arr[3].data == 2.5);
  assert_int_equal(arr[4].dtype, MG_F32);
  assert_int_equal(arr[4].rank, 2);
  assert_memory_equal(arr[4].dims, e_dims, sizeof e_dims);
  assert_int_equal(arr[4].nbytes, 0);
}

static void test_npz_from_numpy(void **state) {
  (void)state;
  const char *files[] = {"stored.npz", "deflated.npz"};
  for (int f = 0; f < 2; f++) {
    char p[4096];
    mg_array *arr;
    int count;
    mg_diags d;
    mg_diags_init(&d);
    assert_int_equal(npz_read_file(fx(p, sizeof p, files[f]), &arr, &count, &d), 0);
    assert_int_equal(d.errors + d.warnings, 0);
    expect_members(arr, count);
    mg_arrays_free(arr, count);
    mg_diags_free(&d);
  }
  char p[4096];
  mg_array *arr;
  int count;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npz_read_file(fx(p, sizeof p, "positional.npz"), &arr, &count, &d), 0);
  assert_int_equal(count, 2);
  assert_string_equal(arr[0].name, "arr_0");
  assert_string_equal(arr[1].name, "arr_1");
  static const int64_t n_dims[] = {N};
  expect_formula(&arr[0], MG_F32, 1, n_dims);
  expect_formula(&arr[1], MG_I8, 1, n_dims);
  mg_arrays_free(arr, count);
  mg_diags_free(&d);
}

/* An array holding the formula for t with shape (3, 4); data is malloc'd. */
static mg_array formula_array(mg_dtype t, const char *name) {
  mg_array a = {.dtype = t, .rank = 2, .dims = {3, 4}, .nbytes = N * mg_dtype_size(t)};
  a.data = malloc(a.nbytes);
  fill_formula(t, a.data, N);
  a.name = (char *)name;
  return a;
}

/* No writer may leave its temporary file behind in written/. */
static void expect_no_temporaries(void) {
  char p[4096];
  DIR *dir = opendir(fx(p, sizeof p, "written"));
  assert_non_null(dir);
  for (struct dirent *e; (e = readdir(dir));)
    if (strstr(e->d_name, ".tmp")) fail_msg("temporary file left behind: %s", e->d_name);
  closedir(dir);
}

/* make_npy_fixtures.py STRINGS, as UTF-8. */
static const char *const STRINGS[6] = {"monday", "", "h\xc3\xa9llo", "\xe2\x82\xac" "5", "\xf0\x9f\x98\x80!", "x"};

static int contains(const unsigned char *buf, size_t len, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i + n <= len; i++)
    if (!memcmp(buf + i, s, n)) return 1;
  return 0;
}

static void expect_strings(const mg_array *a, const int *order) {
  assert_int_equal(a->dtype, MG_STRING);
  assert_int_equal(a->rank, 2);
  assert_int_equal(a->dims[0], 2);
  assert_int_equal(a->dims[1], 3);
  assert_int_equal(a->nbytes, 6 * sizeof(char *));
  for (int i = 0; i < 6; i++) assert_string_equal(((char **)a->data)[i], STRINGS[order ? order[i] : i]);
}

/* numpy's '<U6', '>U6' and Fortran-order unicode arrays read as UTF-8 strings;
 * ours are written as '<U6' (the longest string is 6 code points) and read back. */
static void test_unicode(void **state) {
  (void)state;
  static const char *const files[] = {"unicode.npy", "be_unicode.npy", "fortran_unicode.npy"};
  for (int f = 0; f < 3; f++) {
    mg_array a;
    read_ok(files[f], &a);
    expect_strings(&a, NULL);
    mg_array_free(&a);
  }
  char *strs[6];
  for (int i = 0; i < 6; i++) strs[i] = (char *)STRINGS[i];
  mg_array w = {.dtype = MG_STRING, .rank = 2, .dims = {2, 3}, .data = strs, .nbytes = sizeof strs}, r;
  char p[4096];
  size_t len;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npy_write_file(fx(p, sizeof p, "written/unicode.npy"), &w, &d), 0);
  assert_int_equal(npy_read_file(p, &r, &d), 0);
  expect_strings(&r, NULL);
  mg_array_free(&r);
  unsigned char *buf = slurp(p, &len);
  assert_true(contains(buf, len, "'descr': '<U6'"));
  assert_int_equal(len, 128 + 6 * 6 * 4);
  free(buf);
  /* all empty: numpy's '<U1' */
  char *empty[2] = {"", ""};
  mg_array e = {.dtype = MG_STRING, .rank = 1, .dims = {2}, .data = empty, .nbytes = sizeof empty};
  assert_int_equal(npy_write_file(fx(p, sizeof p, "written/unicode_empty.npy"), &e, &d), 0);
  buf = slurp(p, &len);
  assert_true(contains(buf, len, "'descr': '<U1'"));
  free(buf);
  assert_int_equal(d.errors + d.warnings, 0);
  /* invalid UTF-8 is refused, and so is a UTF-32 surrogate */
  char *bad[1] = {"\xc3("};
  mg_array b = {.dtype = MG_STRING, .rank = 1, .dims = {1}, .data = bad, .nbytes = sizeof bad};
  assert_int_equal(npy_write_file(fx(p, sizeof p, "written/rejected.npy"), &b, &d), -1);
  assert_true(d.errors > 0);
  mg_diags_free(&d);
  mg_diags_init(&d);
  buf = slurp(fx(p, sizeof p, "unicode.npy"), &len);
  memcpy(buf + len - 20, "\x00\xd8\x00\x00", 4); /* the last string becomes "x" U+D800 */
  assert_int_equal(npy_read_mem(buf, len, "surrogate", &r, &d), -1);
  assert_true(d.errors > 0);
  assert_null(r.data);
  for (size_t cut = 0; cut + 4 < len; cut += 7) { /* truncations fail cleanly */
    assert_int_equal(npy_read_mem(buf, cut, "cut", &r, &d), -1);
    assert_null(r.data);
  }
  free(buf);
  mg_diags_free(&d);
}

/* Write through our writer, read back through our reader, compare bytes.
 * The files stay in written/ for make_npy_fixtures.py --check. */
static void test_write_npy_roundtrip(void **state) {
  (void)state;
  double scalar = 2.5;
  for (int i = 0; i < NDTYPES + 2; i++) {
    char name[64], p[4096];
    mg_array w = {0}, r;
    if (i < NDTYPES) {
      w = formula_array(dtypes[i].t, NULL);
      snprintf(name, sizeof name, "written/%s.npy", dtypes[i].name);
    } else if (i == NDTYPES) {
      w = (mg_array){.dtype = MG_F64, .rank = 0, .data = malloc(8), .nbytes = 8};
      memcpy(w.data, &scalar, 8);
      snprintf(name, sizeof name, "written/scalar.npy");
    } else {
      w = (mg_array){.dtype = MG_F32, .rank = 2, .dims = {0, 3}};
      snprintf(name, sizeof name, "written/empty.npy");
    }
    mg_diags d;
    mg_diags_init(&d);
    assert_int_equal(npy_write_file(fx(p, sizeof p, name), &w, &d), 0);
    assert_int_equal(npy_read_file(p, &r, &d), 0);
    assert_int_equal(d.errors + d.warnings, 0);
    assert_int_equal(r.dtype, w.dtype);
    assert_int_equal(r.rank, w.rank);
    assert_memory_equal(r.dims, w.dims, sizeof w.dims);
    assert_int_equal(r.nbytes, w.nbytes);
    if (w.nbytes) assert_memory_equal(r.data, w.data, w.nbytes);
    size_t len;
    unsigned char *raw = slurp(p, &len);
    assert_memory_equal(raw, "\x93NUMPY\x01\x00", 8); /* format 1.0 */
    assert_int_equal((10 + (raw[8] | raw[9] << 8)) % 64, 0);
    free(raw);
    mg_array_free(&r);
    free(w.data);
    mg_diags_free(&d);
  }
  expect_no_temporaries();
}

/* The archive members npz_members() describes, built in C. */
static void build_members(mg_array m[5], double *scalar) {
  m[0] = formula_array(MG_F32, "a");
  m[1] = formula_array(MG_I64, "b");
  m[1].rank = 1;
  m[1].dims[0] = N;
  m[2] = formula_array(MG_BOOL, "c");
  *scalar = 2.5;
  m[3] = (mg_array){.dtype = MG_F64, .rank = 0, .data = scalar, .nbytes = 8, .name = "s"};
  m[4] = (mg_array){.dtype = MG_F32, .rank = 2, .dims = {0, 3}, .name = "e"};
}

static void test_write_npz_roundtrip(void **state) {
  (void)state;
  mg_array m[5];
  double scalar;
  build_members(m, &scalar);
  for (int compress = 0; compress < 2; compress++) {
    char p[4096];
    mg_array *arr;
    int count;
    mg_diags d;
    mg_diags_init(&d);
    fx(p, sizeof p, compress ? "written/deflated.npz" : "written/stored.npz");
    assert_int_equal(npz_write_file(p, m, 5, compress, &d), 0);
    assert_int_equal(npz_read_file(p, &arr, &count, &d), 0);
    assert_int_equal(d.errors + d.warnings, 0);
    expect_members(arr, count);
    mg_arrays_free(arr, count);
    zip_t *z = zip_open(p, ZIP_RDONLY, NULL);
    assert_non_null(z);
    for (int i = 0; i < 3; i++) { /* members with data; empty ones may be stored */
      zip_stat_t st;
      assert_int_equal(zip_stat_index(z, (zip_uint64_t)i, 0, &st), 0);
      assert_int_equal(st.comp_method, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE);
    }
    zip_discard(z);
    mg_diags_free(&d);
  }
  char p[4096];
  mg_array *arr;
  int count;
  mg_diags d;
  mg_diags_init(&d);
  fx(p, sizeof p, "written/none.npz");
  assert_int_equal(npz_write_file(p, NULL, 0, 1, &d), 0);
  assert_int_equal(npz_read_file(p, &arr, &count, &d), 0);
  assert_int_equal(count, 0);
  mg_arrays_free(arr, count);
  mg_diags_free(&d);
  for (int i = 0; i < 3; i++) free(m[i].data);
  expect_no_temporaries();
}

static void test_writer_rejects_bad_arrays(void **state) {
  (void)state;
  char p[4096];
  uint16_t bf[4] = {0};
  mg_array bf16 = {.dtype = MG_BF16, .rank = 1, .dims = {4}, .data = bf, .nbytes = 8};
  mg_array short_data = {.dtype = MG_F32, .rank = 1, .dims = {4}, .data = bf, .nbytes = 8};
  mg_array neg = {.dtype = MG_F32, .rank = 1, .dims = {-1}, .data = bf, .nbytes = 0};
  const struct { mg_array *a; mg_diag_code code; } cases[] = {
      {&bf16, MG_D_UNSUPPORTED_DTYPE}, {&short_data, MG_D_INVALID}, {&neg, MG_D_INVALID}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mg_diags d;
    mg_diags_init(&d);
    assert_int_equal(npy_write_file(fx(p, sizeof p, "written/rejected.npy"), cases[i].a, &d), -1);
    assert_true(has_code(&d, cases[i].code));
    assert_int_equal(access(p, F_OK), -1);
    mg_diags_free(&d);
  }
  /* Unnamed array 1 is "arr_1" in the archive, so it collides with a named one. */
  float v = 1;
  mg_array dup[3] = {{.dtype = MG_F32, .data = &v, .nbytes = 4, .name = "arr_1"},
                     {.dtype = MG_F32, .data = &v, .nbytes = 4},
                     {.dtype = MG_F32, .data = &v, .nbytes = 4, .name = "x"}};
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npz_write_file(fx(p, sizeof p, "written/dup.npz"), dup, 3, 0, &d), -1);
  assert_true(has_code(&d, MG_D_INVALID));
  assert_int_equal(access(p, F_OK), -1);
  assert_int_equal(npy_write_file(fx(p, sizeof p, "no/such/dir/x.npy"), &dup[0], &d), -1);
  assert_true(has_code(&d, MG_D_IO));
  mg_diags_free(&d);
  expect_no_temporaries();
}

static void test_write_replaces_atomically(void **state) {
  (void)state;
  char p[4096];
  mg_array a = formula_array(MG_I32, NULL), b = formula_array(MG_U8, NULL), r;
  mg_diags d;
  mg_diags_init(&d);
  fx(p, sizeof p, "written/replace.npy");
  assert_int_equal(npy_write_file(p, &a, &d), 0);
  assert_int_equal(npy_write_file(p, &b, &d), 0);
  assert_int_equal(npy_read_file(p, &r, &d), 0);
  expect_formula(&r, MG_U8, 2, shape34);
  mg_array_free(&r);
  assert_int_equal(unlink(p), 0);
  free(a.data);
  free(b.data);
  mg_diags_free(&d);
  expect_no_temporaries();
}

/* Every proper prefix of a valid file must be refused, with a diagnostic. */
static void test_truncated_files_fail_cleanly(void **state) {
  (void)state;
  const char *files[] = {"float32.npy", "scalar.npy", "empty.npy", "v2.npy", "v3.npy",
                         "fortran_uint16.npy"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char p[4096];
    size_t len;
    unsigned char *buf = slurp(fx(p, sizeof p, files[f]), &len);
    for (size_t cut = 0; cut < len; cut++) {
      mg_array a;
      mg_diags d;
      mg_diags_init(&d);
      assert_int_equal(npy_read_mem(buf, cut, files[f], &a, &d), -1);
      assert_true(d.errors > 0);
      assert_null(a.data);
      mg_diags_free(&d);
    }
    free(buf);
  }
  char p[4096], q[4096];
  size_t len;
  unsigned char *buf = slurp(fx(p, sizeof p, "deflated.npz"), &len);
  fx(q, sizeof q, "written/cut.npz");
  for (size_t cut = 0; cut < len; cut++) {
    mg_array *arr = (mg_array *)1;
    int count = 7;
    mg_diags d;
    mg_diags_init(&d);
    spill(q, buf, cut);
    assert_int_equal(npz_read_file(q, &arr, &count, &d), -1);
    assert_true(d.errors > 0);
    assert_null(arr);
    assert_int_equal(count, 0);
    mg_diags_free(&d);
  }
  unlink(q);
  free(buf);
}

/* A stored member whose data was altered must fail its CRC check, not load. */
static void test_npz_crc_checked(void **state) {
  (void)state;
  char p[4096], q[4096];
  size_t len;
  unsigned char *buf = slurp(fx(p, sizeof p, "stored.npz"), &len);
  unsigned char *magic = NULL;
  for (size_t i = 0; !magic && i + 6 <= len; i++)
    if (!memcmp(buf + i, "\x93NUMPY", 6)) magic = buf + i;
  assert_non_null(magic);
  magic[128 + 5] ^= 0x40; /* inside member a's data, after its 128-byte header */
  spill(fx(q, sizeof q, "written/crc.npz"), buf, len);
  mg_array *arr;
  int count;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npz_read_file(q, &arr, &count, &d), -1);
  assert_true(has_code(&d, MG_D_MALFORMED));
  mg_diags_free(&d);
  unlink(q);
  free(buf);
}

/* A version 1.0 .npy image with the given header text and data bytes. */
static unsigned char *make_npy(const char *header, const void *data, size_t dlen, size_t *len) {
  size_t hl = strlen(header);
  unsigned char *buf = malloc(10 + hl + dlen + 1);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(hl & 0xff);
  buf[9] = (unsigned char)(hl >> 8);
  memcpy(buf + 10, header, hl);
  if (dlen) memcpy(buf + 10 + hl, data, dlen);
  *len = 10 + hl + dlen;
  return buf;
}

static void test_garbage_headers(void **state) {
  (void)state;
  static const struct { const char *header; mg_diag_code code; } cases[] = {
      {"", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False}\n", MG_D_INVALID},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", MG_D_INVALID},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", MG_D_INVALID},
      {"{'descr': '|S5', 'fortran_order': False, 'shape': (2,)}", MG_D_UNSUPPORTED_DTYPE},
      {"{'descr': '<U5', 'fortran_order': False, 'shape': (2,)}", MG_D_MALFORMED}, /* needs 40 bytes */
      {"{'descr': '<U0', 'fortran_order': False, 'shape': (2,)}", MG_D_UNSUPPORTED_DTYPE},
      {"{'descr': '<f3', 'fortran_order': False, 'shape': (2,)}", MG_D_UNSUPPORTED_DTYPE},
      {"{'descr': '', 'fortran_order': False, 'shape': (2,)}", MG_D_UNSUPPORTED_DTYPE},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
       MG_D_UNSUPPORTED_DTYPE},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", MG_D_INVALID},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,)}", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", MG_D_MALFORMED},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", MG_D_MALFORMED},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
       MG_D_LIMIT},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4)}",
       MG_D_LIMIT},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,)}",
       MG_D_MALFORMED}, /* fits size_t, but the data is not there */
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}", MG_D_LIMIT},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", MG_D_MALFORMED},
  };
  float data[2] = {1, 2};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len;
    unsigned char *buf = make_npy(cases[i].header, data, sizeof data, &len);
    mg_array a;
    mg_diags d;
    mg_diags_init(&d);
    if (npy_read_mem(buf, len, "garbage", &a, &d) != -1) fail_msg("accepted: %s", cases[i].header);
    if (!has_code(&d, cases[i].code))
      fail_msg("case %zu: wanted %s, got %s", i, mg_diag_code_name(cases[i].code),
               d.count ? mg_diag_code_name(d.items[0].code) : "nothing");
    mg_diags_free(&d);
    free(buf);
  }
  /* Bad magic, unknown versions, a header length past the end. */
  const char *raw[] = {"\x93NUMPX\x01\x00\x02\x00{}", "\x93NUMPY\x04\x00\x02\x00{}",
                       "\x93NUMPY\x01\x01\x02\x00{}", "\x93NUMPY\x02\x00\xff\xff\xff\x7f{}",
                       "\x93NUMPY\x01\x00\xff\xff{}"};
  for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
    mg_array a;
    mg_diags d;
    mg_diags_init(&d);
    assert_int_equal(npy_read_mem(raw[i], 12, "raw", &a, &d), -1);
    assert_true(d.errors > 0);
    mg_diags_free(&d);
  }
}

static void test_lenient_but_exact_cases(void **state) {
  (void)state;
  /* Python 2 era long suffixes, double quotes, no padding; bools become 0/1;
   * trailing bytes earn a warning, not an error. */
  unsigned char bools[4] = {0, 2, 1, 255};
  size_t len;
  unsigned char *buf =
      make_npy("{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": (2L, 2L)}", bools, 4,
               &len);
  mg_array a;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npy_read_mem(buf, len, "py2", &a, &d), 0);
  assert_int_equal(a.rank, 2);
  assert_memory_equal(a.data, "\0\1\1\1", 4);
  mg_array_free(&a);
  free(buf);
  buf = make_npy("{'descr': '>u1', 'fortran_order': True, 'shape': (2,)}", bools, 4, &len);
  assert_int_equal(npy_read_mem(buf, len, "trailing", &a, &d), 0);
  assert_int_equal(d.errors, 0);
  assert_int_equal(d.warnings, 1);
  mg_array_free(&a);
  free(buf);
  assert_int_equal(npy_read_file("/nonexistent/x.npy", &a, &d), -1);
  assert_true(has_code(&d, MG_D_IO));
  mg_array *arr;
  int count;
  assert_int_equal(npz_read_file("/nonexistent/x.npz", &arr, &count, &d), -1);
  mg_diags_free(&d);
}

/* Deterministic byte mutations of valid files: read must succeed or fail with
 * a diagnostic, never crash (ASan/UBSan builds catch the subtle cases). */
static void test_mutations_never_crash(void **state) {
  (void)state;
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  const char *files[] = {"fortran_float32.npy", "v3.npy", "complex128.npy", "deflated.npz"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char p[4096], q[4096];
    size_t len;
    unsigned char *orig = slurp(fx(p, sizeof p, files[f]), &len);
    unsigned char *buf = malloc(len);
    int npz = strstr(files[f], ".npz") != NULL;
    fx(q, sizeof q, "written/mutant.npz");
    for (int iter = 0; iter < (npz ? 400 : 3000); iter++) {
      memcpy(buf, orig, len);
      for (int k = 0, edits = 1 + iter % 4; k < edits; k++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t span = iter % 2 || npz ? len : (len < 128 ? len : 128); /* favour headers */
        buf[(seed >> 33) % span] = (unsigned char)(seed >> 17);
      }
      mg_diags d;
      mg_diags_init(&d);
      int rc;
      if (npz) {
        mg_array *arr;
        int count;
        spill(q, buf, len);
        rc = npz_read_file(q, &arr, &count, &d);
        if (rc == 0) mg_arrays_free(arr, count);
      } else {
        mg_array a;
        rc = npy_read_mem(buf, len, "mutant", &a, &d);
        if (rc == 0) mg_array_free(&a);
      }
      assert_true(rc == 0 ? d.errors == 0 : (rc == -1 && d.errors > 0));
      mg_diags_free(&d);
    }
    unlink(q);
    free(buf);
    free(orig);
  }
}

/* Fail the nth allocation (and all later ones) for n = 1, 2, ... until the
 * operation succeeds; every failing run must fail cleanly. ASan proves that
 * nothing leaks on any of the error paths. Returns the run that succeeded. */
static long fault_loop(int (*op)(void *ctx, mg_diags *d), void *ctx) {
  for (long n = 1; n < 100000; n++) {
    mg_diags d;
    mg_diags_init(&d);
    mg_fault_fail_at(n, 1);
    int rc = op(ctx, &d);
    mg_fault_fail_at(0, 0);
    if (rc == 0) {
      mg_diags_free(&d);
      return n;
    }
    assert_int_equal(rc, -1);
    assert_true(d.errors > 0);
    mg_diags_free(&d);
  }
  fail_msg("never succeeded");
  return 0;
}

static int op_read_npz(void *path, mg_diags *d) {
  mg_array *arr;
  int count;
  int rc = npz_read_file(path, &arr, &count, d);
  mg_fault_fail_at(0, 0);
  if (rc == 0) {
    expect_members(arr, count);
    mg_arrays_free(arr, count);
  } else {
    assert_null(arr);
  }
  return rc;
}

static int op_read_npy(void *path, mg_diags *d) {
  mg_array a;
  int rc = npy_read_file(path, &a, d);
  mg_fault_fail_at(0, 0);
  if (rc == 0) mg_array_free(&a);
  return rc;
}

typedef struct {
  const char *path;
  mg_array *members;
} write_job;

/* A failed write must leave neither the target nor a temporary behind. */
static int op_write_npz(void *ctx, mg_diags *d) {
  write_job *job = ctx;
  unlink(job->path);
  int rc = npz_write_file(job->path, job->members, 5, 1, d);
  mg_fault_fail_at(0, 0);
  if (rc != 0) assert_int_equal(access(job->path, F_OK), -1);
  expect_no_temporaries();
  return rc;
}

static void test_fault_injection(void **state) {
  (void)state;
  char p[4096];
  assert_true(fault_loop(op_read_npz, (void *)fx(p, sizeof p, "deflated.npz")) > 5);
  assert_true(fault_loop(op_read_npz, (void *)fx(p, sizeof p, "stored.npz")) > 5);
  assert_true(fault_loop(op_read_npy, (void *)fx(p, sizeof p, "fortran_float32.npy")) > 2);
  mg_array m[5];
  double scalar;
  build_members(m, &scalar);
  write_job job = {fx(p, sizeof p, "written/fault.npz"), m};
  assert_true(fault_loop(op_write_npz, &job) > 3);
  mg_array *arr;
  int count;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(npz_read_file(job.path, &arr, &count, &d), 0);
  expect_members(arr, count);
  mg_arrays_free(arr, count);
  mg_diags_free(&d);
  unlink(job.path);
  for (int i = 0; i < 3; i++) free(m[i].data);
}

int main(void) {
  if (!getenv("MIGC_NPY_FIXTURES")) {
    fprintf(stderr, "test_npy: MIGC_NPY_FIXTURES is not set; run "
                    "tests/unit/make_npy_fixtures.py DIR and point it there\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unicode),
      cmocka_unit_test(test_each_dtype_from_numpy),
      cmocka_unit_test(test_big_endian_converted),
      cmocka_unit_test(test_fortran_order_converted),
      cmocka_unit_test(test_zero_d_and_empty),
      cmocka_unit_test(test_format_versions_2_and_3),
      cmocka_unit_test(test_npz_from_numpy),
      cmocka_unit_test(test_write_npy_roundtrip),
      cmocka_unit_test(test_write_npz_roundtrip),
      cmocka_unit_test(test_writer_rejects_bad_arrays),
      cmocka_unit_test(test_write_replaces_atomically),
      cmocka_unit_test(test_truncated_files_fail_cleanly),
      cmocka_unit_test(test_npz_crc_checked),
      cmocka_unit_test(test_garbage_headers),
      cmocka_unit_test(test_lenient_but_exact_cases),
      cmocka_unit_test(test_mutations_never_crash),
      cmocka_unit_test(test_fault_injection),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
