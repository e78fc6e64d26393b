/* Tests for the weights readers (weights/pth.c, unpickle.c, safetensors.c,
 * onnx_weights.c) against files torch itself wrote
 * (tests/fixtures/make_weights_fixtures.py).
 *
 * MIGC_WEIGHTS_FIXTURES names the fixture directory; without it the test fails,
 * so a misconfigured run can never pass by testing nothing. Every expected value
 * comes from torch/numpy (expect/<set>/<i>.bin), never from migc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "unpickle.h"
#include "weights.h"

static const char *fixtures(void) {
  const char *d = getenv("MIGC_WEIGHTS_FIXTURES");
  if (!d || !*d) fail_msg("MIGC_WEIGHTS_FIXTURES is not set (run make_weights_fixtures.py OUTDIR first)");
  return d;
}

static const char *fx(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", fixtures(), name);
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

static void print_diags(const mg_diags *d) {
  char line[1024];
  for (size_t i = 0; i < d->count; i++) {
    mg_diag_format(&d->items[i], line, sizeof line);
    print_message("  %s\n", line);
  }
}

/* One expected tensor from a manifest line. */
typedef struct {
  char name[256];
  char dtype[32];
  int rank;
  int64_t dims[WT_MAX_RANK];
  char file[64];
} expect_t;

static int read_manifest(const char *set, expect_t *out, int cap) {
  char p[1024], line[2048];
  snprintf(p, sizeof p, "%s/expect/%s/manifest.txt", fixtures(), set);
  FILE *fp = fopen(p, "r");
  if (!fp) fail_msg("cannot open %s", p);
  int n = 0;
  while (fgets(line, sizeof line, fp)) {
    assert_true(n < cap);
    expect_t *e = &out[n++];
    char *tok[5];
    char *save = NULL, *s = line;
    for (int i = 0; i < 5; i++, s = NULL) {
      tok[i] = strtok_r(s, "\t\n", &save);
      assert_non_null(tok[i]);
    }
    snprintf(e->name, sizeof e->name, "%s", tok[0]);
    snprintf(e->dtype, sizeof e->dtype, "%s", tok[1]);
    e->rank = atoi(tok[2]);
    char *dp = tok[3];
    for (int i = 0; i < e->rank; i++) e->dims[i] = strtoll(dp, &dp, 10);
    snprintf(e->file, sizeof e->file, "%s", tok[4]);
  }
  fclose(fp);
  return n;
}

/* Checks that src holds exactly the tensors of expectation set `set`, with
 * torch's dtypes, shapes and bytes. Reads each tensor whole, then again in
 * chunks of `chunk` elements (exercising strided runs that start mid-row). */
static void check_set(const wt_source *src, const char *set, int chunk) {
  expect_t exp[64];
  int n = read_manifest(set, exp, 64);
  assert_int_equal(wt_count(src), n);
  for (int i = 0; i < n; i++) {
    const wt_tensor *t = wt_find(src, exp[i].name);
    if (!t) fail_msg("%s: tensor '%s' missing", set, exp[i].name);
    assert_string_equal(mg_dtype_name(t->dtype), exp[i].dtype);
    assert_int_equal(t->rank, exp[i].rank);
    for (int k = 0; k < t->rank; k++) assert_int_equal(t->dims[k], exp[i].dims[k]);
    char p[1024];
    snprintf(p, sizeof p, "%s/expect/%s/%s", fixtures(), set, exp[i].file);
    size_t len;
    unsigned char *want = slurp(p, &len);
    size_t es = mg_dtype_size(t->dtype);
    assert_int_equal(len, (size_t)wt_numel(t) * es);
    unsigned char *got = malloc(len + 1);
    mg_diags d;
    mg_diags_init(&d);
    int rc = wt_read(src, t, 0, wt_numel(t), got, &d);
    if (rc) print_diags(&d);
    assert_int_equal(rc, 0);
    if (memcmp(got, want, len)) fail_msg("%s: bytes of '%s' differ from torch's", set, t->name);
    memset(got, 0xAB, len);
    for (int64_t f = 0; f < wt_numel(t); f += chunk) {
      int64_t c = wt_numel(t) - f < chunk ? wt_numel(t) - f : chunk;
      assert_int_equal(wt_read(src, t, f, c, got + (size_t)f * es, &d), 0);
    }
    if (memcmp(got, want, len)) fail_msg("%s: chunked bytes of '%s' differ", set, t->name);
    assert_int_equal(d.errors, 0);
    mg_diags_free(&d);
    free(got);
    free(want);
  }
}

/* Opens `file` with `open` ('p' pth_open, 'w' weights_open, 's' safetensors_open)
 * and checks it against `set`. */
static wt_source *open_ok(char how, const char *file, const char *key) {
  char p[1024];
  fx(p, sizeof p, file);
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = NULL;
  int rc = how == 'p' ? pth_open(p, key, &s, &d) : how == 's' ? safetensors_open(p, &s, &d) : weights_open(p, key, &s, &d);
  if (rc) print_diags(&d);
  assert_int_equal(rc, 0);
  assert_non_null(s);
  assert_int_equal(d.errors, 0);
  mg_diags_free(&d);
  return s;
}

static void test_pth_zip_every_dtype(void **state) {
  (void)state;
  wt_source *s = open_ok('p', "sd.pth", NULL);
  check_set(s, "sd", 1);
  check_set(s, "sd", 5);
  /* Views of one storage stay views: same storage, element offset 3. */
  const wt_tensor *base = wt_find(s, "shared_base"), *view = wt_find(s, "shared_view"),
                  *tr = wt_find(s, "transposed"), *st = wt_find(s, "strided");
  assert_int_equal(view->storage, base->storage);
  assert_int_equal(view->offset, 3);
  assert_int_equal(st->storage, base->storage);
  assert_int_equal(st->strides[0], 4);
  assert_int_equal(tr->strides[0], 1);
  assert_int_equal(tr->strides[1], 5);
  wt_close(s);
}

static void test_pth_legacy_every_dtype(void **state) {
  (void)state;
  wt_source *s = open_ok('p', "sd_legacy.pth", NULL);
  check_set(s, "sd", 3);
  assert_int_equal(wt_find(s, "shared_view")->storage, wt_find(s, "shared_base")->storage);
  wt_close(s);
}

static void test_pth_deflated(void **state) {
  (void)state;
  wt_source *s = open_ok('p', "sd_deflated.pth", NULL);
  check_set(s, "sd", 2);
  wt_close(s);
}

static void test_safetensors_every_dtype(void **state) {
  (void)state;
  wt_source *s = open_ok('s', "sd.safetensors", NULL);
  check_set(s, "sd", 4);
  wt_close(s);
}

static void test_weights_open_chooses_by_content(void **state) {
  (void)state;
  const char *files[] = {"sd.pth", "sd_legacy.pth", "sd.safetensors", "sd_deflated.pth"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    wt_source *s = open_ok('w', files[i], NULL);
    check_set(s, "sd", 7);
    wt_close(s);
  }
  wt_source *s = open_ok('w', "init.onnx", NULL);
  check_set(s, "onnx", 2);
  wt_close(s);
}

static void test_v3_untyped_storage_and_parameter(void **state) {
  (void)state;
  wt_source *s = open_ok('p', "v3.pth", NULL);
  check_set(s, "v3", 1);
  wt_close(s);
}

static void test_checkpoint_keys(void **state) {
  (void)state;
  const char *files[] = {"ckpt.pth", "ckpt_legacy.pth"};
  for (int f = 0; f < 2; f++) {
    /* Automatic: state_dict is the shallowest dict of tensors (the optimizer's
     * per-parameter dicts are deeper). */
    wt_source *s = open_ok('p', files[f], NULL);
    check_set(s, "sd", 3);
    wt_close(s);
    s = open_ok('p', files[f], "state_dict");
    check_set(s, "sd", 3);
    wt_close(s);
    s = open_ok('p', files[f], "optimizer.state");
    check_set(s, "optim_state", 3);
    wt_close(s);
    s = open_ok('p', files[f], "ema_params");
    check_set(s, "ema", 3);
    wt_close(s);
    /* A dotted path to one tensor lists that tensor under its path. */
    s = open_ok('p', files[f], "state_dict.fc.weight");
    assert_int_equal(wt_count(s), 1);
    assert_string_equal(wt_get(s, 0)->name, "state_dict.fc.weight");
    wt_close(s);
  }
}

/* Expects opening `file` (with `key`) to fail with an error of `code` whose text
 * (message, or node) contains `needle`. */
static void expect_fail(char how, const char *file, const char *key, mg_diag_code code, const char *needle) {
  char p[1024];
  fx(p, sizeof p, file);
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = (wt_source *)1;
  int rc = how == 'p' ? pth_open(p, key, &s, &d) : how == 's' ? safetensors_open(p, &s, &d) : weights_open(p, key, &s, &d);
  if (rc == 0) fail_msg("%s opened, but should not", file);
  assert_null(s);
  assert_true(d.errors >= 1);
  int found = 0;
  for (size_t i = 0; i < d.count; i++) {
    const mg_diag *g = &d.items[i];
    if (g->code == code && ((g->message && strstr(g->message, needle)) || (g->node && strstr(g->node, needle))))
      found = 1;
  }
  if (!found) {
    print_diags(&d);
    fail_msg("%s: no %s error mentioning '%s'", file, mg_diag_code_name(code), needle);
  }
  mg_diags_free(&d);
}

static void test_malicious_pickles_rejected(void **state) {
  (void)state;
  expect_fail('p', "evil_os.pth", NULL, MG_D_INVALID, "os.system");
  expect_fail('p', "evil_eval.pth", NULL, MG_D_INVALID, "builtins.eval");
  expect_fail('p', "evil_posix.pth", NULL, MG_D_INVALID, "posix.system");
  expect_fail('p', "evil_stack_global.pth", NULL, MG_D_INVALID, "subprocess.Popen");
  expect_fail('p', "evil_legacy.pth", NULL, MG_D_INVALID, "os.system");
  expect_fail('w', "evil_os.pth", "state_dict", MG_D_INVALID, "os.system");
  expect_fail('p', "evil_module.pth", NULL, MG_D_INVALID, "torch.nn.modules.linear.Linear");
  char p[1024];
  struct stat sb;
  assert_int_not_equal(stat(fx(p, sizeof p, "pwned"), &sb), 0); /* nothing ran */
}

static void test_bad_pth_files(void **state) {
  (void)state;
  expect_fail('p', "bad_truncated.pth", NULL, MG_D_MALFORMED, "zip");
  expect_fail('p', "bad_truncated_legacy.pth", NULL, MG_D_MALFORMED, "truncated");
  expect_fail('p', "bad_truncated_legacy_pickle.pth", NULL, MG_D_MALFORMED, "");
  expect_fail('p', "bad_missing_storage.pth", NULL, MG_D_INVALID, "missing");
  expect_fail('p', "bad_short_storage.pth", NULL, MG_D_INVALID, "holds");
  expect_fail('p', "bad_no_pickle.pth", NULL, MG_D_INVALID, "data.pkl");
  expect_fail('p', "bad_big_endian.pth", NULL, MG_D_UNSUPPORTED_ATTR, "big-endian");
  expect_fail('p', "bad_underflow.pth", NULL, MG_D_MALFORMED, "stack underflow");
  expect_fail('p', "bad_opcode.pth", NULL, MG_D_MALFORMED, "unknown opcode 0xff");
  expect_fail('p', "bad_memo.pth", NULL, MG_D_MALFORMED, "memo index 5");
  expect_fail('p', "bad_memo_put.pth", NULL, MG_D_MALFORMED, "memo index");
  expect_fail('p', "bad_no_stop.pth", NULL, MG_D_MALFORMED, "truncated");
  expect_fail('p', "bad_storage_type.pth", NULL, MG_D_INVALID, "torch.FooStorage");
  expect_fail('p', "bad_quantized.pth", NULL, MG_D_UNSUPPORTED_DTYPE, "torch.QInt8Storage");
  expect_fail('p', "bad_view_past_end.pth", NULL, MG_D_INVALID, "holds 16");
  expect_fail('p', "bad_huge_stride.pth", NULL, MG_D_INVALID, "");
  expect_fail('p', "bad_persid.pth", NULL, MG_D_INVALID, "persistent id");
  expect_fail('p', "bad_deep.pth", "w", MG_D_LIMIT, "nested deeper");
  expect_fail('p', "bad_deep.pth", NULL, MG_D_INVALID, "no dict of tensors");
  expect_fail('p', "bad_cycle.pth", "w", MG_D_LIMIT, "nested deeper");
  expect_fail('p', "bad_dag.pth", "w", MG_D_LIMIT, "too large");
  expect_fail('p', "bad_legacy_count.pth", NULL, MG_D_INVALID, "elements");
  expect_fail('p', "ambiguous.pth", NULL, MG_D_USAGE, "'model', 'ema'");
  expect_fail('p', "ckpt.pth", "nope", MG_D_USAGE, "'state_dict'");
  expect_fail('p', "ckpt.pth", "epoch", MG_D_INVALID, "no tensors");
  expect_fail('p', "sd.safetensors", NULL, MG_D_INVALID, "neither a zip");
  wt_source *s = open_ok('p', "legacy_crafted.pth", NULL);
  assert_int_equal(wt_count(s), 1);
  wt_close(s);
}

/* Reads tensor `name` of s whole, in pieces of `per` elements; wt_read's status. */
static int read_whole(const wt_source *s, const char *name, int64_t per, mg_diags *d) {
  const wt_tensor *t = wt_find(s, name);
  assert_non_null(t);
  int64_t n = wt_numel(t);
  unsigned char *buf = malloc((size_t)per * mg_dtype_size(t->dtype) + 1);
  assert_non_null(buf);
  int rc = 0;
  for (int64_t f = 0; f < n && !rc; f += per) rc = wt_read(s, t, f, n - f < per ? n - f : per, buf, d);
  free(buf);
  return rc;
}

/* Whether d holds an error of kind `code` whose message mentions needle. */
static int has_diag(const mg_diags *d, mg_diag_code code, const char *needle) {
  for (size_t i = 0; i < d->count; i++)
    if (d->items[i].code == code && d->items[i].message && strstr(d->items[i].message, needle)) return 1;
  return 0;
}

/* A flipped bit under a zip CRC is found: in data.pkl at open, in a storage when
 * a tensor over it is read to its end, even when the bit lies outside the bytes
 * that tensor views; the other tensors still read. From a file and from memory. */
static void test_zip_crc(void **state) {
  (void)state;
  expect_fail('p', "bad_crc_pickle.pth", NULL, MG_D_MALFORMED, "CRC");
  char p[1024];
  for (int from_memory = 0; from_memory < 2; from_memory++) {
    mg_diags d;
    mg_diags_init(&d);
    wt_source *s = NULL;
    size_t len;
    unsigned char *buf = NULL;
    if (from_memory) {
      buf = slurp(fx(p, sizeof p, "bad_crc_storage.pth"), &len);
      assert_int_equal(pth_open_buffer(buf, len, NULL, &s, &d), 0);
    } else {
      assert_int_equal(pth_open(fx(p, sizeof p, "bad_crc_storage.pth"), NULL, &s, &d), 0);
    }
    /* The largest storage is wide_t's (200x300 floats, read transposed); its bit
     * is in the middle. */
    assert_int_equal(read_whole(s, "shared_base", 12, &d), 0);
    assert_int_equal(read_whole(s, "big", 1000, &d), 0);
    assert_int_not_equal(read_whole(s, "wide_t", 1000, &d), 0);
    assert_true(has_diag(&d, MG_D_MALFORMED, "corrupt"));
    assert_int_not_equal(read_whole(s, "wide_t", 60000, &d), 0); /* and stays corrupt */
    assert_int_equal(read_whole(s, "conv.weight", 7, &d), 0);
    wt_close(s);
    mg_diags_free(&d);
    free(buf);
  }
  wt_source *s = open_ok('p', "bad_crc_outside_view.pth", NULL);
  mg_diags d;
  mg_diags_init(&d);
  float got[3];
  assert_int_equal(wt_read(s, wt_find(s, "shared_view"), 0, 3, got, &d), 0); /* not yet to its end */
  assert_int_not_equal(read_whole(s, "shared_view", 6, &d), 0);
  assert_true(has_diag(&d, MG_D_MALFORMED, "corrupt"));
  wt_close(s);
  mg_diags_free(&d);
  /* With each allocation failing in turn, the corrupt storage never reads: one of
   * them is the central directory index, without which the storages are read
   * through libzip, whose CRC check must then be reached. */
  for (long n = 1;; n++) {
    mg_diags_init(&d);
    mg_fault_fail_at(n, 1);
    s = NULL;
    int rc = pth_open(fx(p, sizeof p, "bad_crc_storage.pth"), NULL, &s, &d);
    if (!rc) rc = read_whole(s, "wide_t", 1000, &d);
    long used = mg_fault_count();
    mg_fault_fail_at(0, 0);
    assert_int_not_equal(rc, 0);
    wt_close(s);
    mg_diags_free(&d);
    if (used < n) break;
  }
  s = open_ok('p', "bad_crc_deflated.pth", NULL);
  mg_diags_init(&d);
  assert_int_not_equal(read_whole(s, "shared_base", 12, &d), 0);
  assert_true(d.errors >= 1);
  wt_close(s);
  mg_diags_free(&d);
}

/* wt_view hands out the mapped bytes of contiguous tensors of a stored archive,
 * equal to what wt_read copies, and nothing for a transposed tensor or a deflated
 * archive (wt_read is the way there). */
static void test_view(void **state) {
  (void)state;
  const char *files[] = {"sd.pth", "sd_deflated.pth"};
  for (int f = 0; f < 2; f++) {
    wt_source *s = open_ok('p', files[f], NULL);
    mg_diags d;
    mg_diags_init(&d);
    int viewed = 0;
    for (int i = 0; i < wt_count(s); i++) {
      const wt_tensor *t = wt_get(s, i);
      int64_t n = wt_numel(t);
      size_t bytes = (size_t)n * mg_dtype_size(t->dtype);
      const void *v = (const void *)1;
      assert_int_equal(wt_view(s, t, 0, n, &v, &d), 0);
      if (!v) continue;
      unsigned char *got = malloc(bytes + 1);
      assert_non_null(got);
      assert_int_equal(wt_read(s, t, 0, n, got, &d), 0);
      assert_memory_equal(v, got, bytes);
      free(got);
      viewed++;
    }
    const void *v = (const void *)1;
    assert_int_equal(wt_view(s, wt_find(s, "transposed"), 0, 15, &v, &d), 0);
    assert_null(v);
    if (f == 0) assert_true(viewed >= wt_count(s) - 4); /* all but the strided, transposed, empty ones */
    else assert_int_equal(viewed, 0);
    wt_close(s);
    mg_diags_free(&d);
  }
}

static void test_bad_safetensors(void **state) {
  (void)state;
  expect_fail('s', "bad_json.safetensors", NULL, MG_D_MALFORMED, "header");
  expect_fail('s', "bad_header_len.safetensors", NULL, MG_D_MALFORMED, "exceeds");
  expect_fail('s', "bad_range.safetensors", NULL, MG_D_INVALID, "outside");
  expect_fail('s', "bad_size.safetensors", NULL, MG_D_INVALID, "need 16");
  expect_fail('s', "bad_overlap.safetensors", NULL, MG_D_INVALID, "overlaps");
  expect_fail('s', "bad_dtype.safetensors", NULL, MG_D_UNSUPPORTED_DTYPE, "F8_E4M3");
  expect_fail('s', "bad_shape.safetensors", NULL, MG_D_INVALID, "negative");
  expect_fail('s', "sd.pth", NULL, MG_D_MALFORMED, "");
}

/* The unpickler alone, on pickles written here byte by byte. */
static int load(const char *bytes, size_t n, mg_diags *d, pk_obj **out) {
  pk_ctx *c = pk_new();
  assert_non_null(c);
  size_t used;
  int rc = pk_load(c, (const unsigned char *)bytes, n, "t", &used, out, d);
  pk_free(c); /* *out dies with c: callers only look at rc and d */
  *out = NULL;
  return rc;
}

static void test_unpickler_edges(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t n;
    const char *needle;
  } bad[] = {
      {"\x80\x02", 2, "truncated"},
      {"\x80\x02(.", 4, "stack underflow in STOP"},          /* STOP right after MARK */
      {"\x80\x02]a.", 5, "stack underflow in APPEND"},
      {"\x80\x02)]s.", 5, "stack underflow"},
      {"\x80\x02}(K\x01u.", 8, "odd number"},
      {"\x80\x02K\x01K\x02" "a.", 8, "APPEND on a int"},
      {"\x80\x02t.", 4, "without a MARK"},
      {"\x80\x02X\xff\xff\xff\x7f.", 8, "runs past the end"},
      {"\x80\x02j\x00\x00\x00\x01.", 8, "not defined"},
      {"\x80\x09N.", 4, "protocol 9"},
      {"\x80\x02" "cos\nsystem\n.", 15, "'os.system' is not allowed"},
      {"\x80\x02" "ctorch\nload\n.", 15, "'torch.load' is not allowed"},
      {"\x80\x02" "ctorch\nFloatStorage\n)R.", 24, "does not interpret"},
      {"\x80\x02" "ctorch.nn.parameter\nParameter\n)\x81.", 34, "Parameter built from"},
      {"\x80\x02" "ccollections\nOrderedDict\n)\x81.", 30, "instantiates"},
      {"\x80\x02N)b.", 6, "BUILD on a None"},
      {"\x80\x02i.", 4, "INST/OBJ"},
      {"\x80\x02\x82\x01.", 5, "extension"},
      {"\x80\x02" "cos\x00x\nsystem\n.", 17, "os?x.system"},
      {"\x80\x02" "ctorch._utils\n_rebuild_qtensor\n.", 33, "only dense tensors"},
      {"\x80\x02" "c_codecs\nencode\nX\x01\x00\x00\x00" "aX\x04\x00\x00\x00" "utf8\x86R.", 36, "only interpreted"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mg_diags d;
    mg_diags_init(&d);
    pk_obj *o;
    assert_int_equal(load(bad[i].bytes, bad[i].n, &d, &o), -1);
    assert_true(d.errors >= 1);
    if (!strstr(d.items[0].message, bad[i].needle)) {
      print_diags(&d);
      fail_msg("case %zu: no '%s'", i, bad[i].needle);
    }
    mg_diags_free(&d);
  }
  /* Values a checkpoint may hold besides tensors all load. */
  static const char ok[] =
      "\x80\x02}(X\x01\x00\x00\x00" "aK\x01X\x01\x00\x00\x00" "bG\x3f\xf0\x00\x00\x00\x00\x00\x00"
      "X\x01\x00\x00\x00" "cNX\x01\x00\x00\x00" "d\x88X\x01\x00\x00\x00" "e\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
      "X\x01\x00\x00\x00" "f]q\x00(K\x01J\xff\xff\xff\xff" "e"
      "X\x01\x00\x00\x00gcbuiltins\nset\n](K\x01K\x02" "e\x85R"
      "X\x01\x00\x00\x00hctorch\nSize\n(K\x02K\x03t\x85R"
      "X\x01\x00\x00\x00ictorch\nfloat16\n"
      "X\x01\x00\x00\x00jh\x00"
      "X\x01\x00\x00\x00kc_codecs\nencode\nX\x03\x00\x00\x00" "a\xc3\xbfX\x06\x00\x00\x00" "latin1\x86R"
      "u.";
  mg_diags d;
  mg_diags_init(&d);
  pk_ctx *c = pk_new();
  pk_obj *o;
  size_t used;
  int rc = pk_load(c, (const unsigned char *)ok, sizeof ok - 1, "t", &used, &o, &d);
  if (rc) print_diags(&d);
  assert_int_equal(rc, 0);
  assert_int_equal(used, sizeof ok - 1);
  assert_int_equal(o->kind, PK_DICT);
  assert_int_equal(o->u.dict.n, 11);
  assert_int_equal(pk_dict_get(o, "a")->u.i, 1);
  assert_true(pk_dict_get(o, "b")->u.f == 1.0);
  assert_int_equal(pk_dict_get(o, "c")->kind, PK_NONE);
  assert_int_equal(pk_dict_get(o, "e")->kind, PK_BIGINT);
  assert_int_equal(pk_dict_get(o, "f")->u.seq.items[1]->u.i, -1);
  assert_int_equal(pk_dict_get(o, "g")->kind, PK_SET);
  assert_int_equal(pk_dict_get(o, "h")->u.seq.n, 2);
  assert_int_equal(pk_dict_get(o, "i")->u.global.dtype, MG_F16);
  assert_ptr_equal(pk_dict_get(o, "j"), pk_dict_get(o, "f")); /* the memo shares */
  const pk_obj *by = pk_dict_get(o, "k"); /* protocol-2 bytes: b"a\xff" */
  assert_int_equal(by->kind, PK_BYTES);
  assert_int_equal(by->u.str.n, 2);
  assert_memory_equal(by->u.str.s, "a\xff", 2);
  pk_free(c);
  mg_diags_free(&d);
}

/* The memory-buffer entry points agree with the file ones. */
static void test_buffers(void **state) {
  (void)state;
  char p[1024];
  size_t len;
  const char *files[] = {"sd.pth", "sd_legacy.pth"};
  for (int i = 0; i < 2; i++) {
    unsigned char *buf = slurp(fx(p, sizeof p, files[i]), &len);
    mg_diags d;
    mg_diags_init(&d);
    wt_source *s;
    assert_int_equal(pth_open_buffer(buf, len, NULL, &s, &d), 0);
    check_set(s, "sd", 4);
    wt_close(s);
    mg_diags_free(&d);
    free(buf);
  }
  unsigned char *buf = slurp(fx(p, sizeof p, "sd.safetensors"), &len);
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s;
  assert_int_equal(safetensors_open_buffer(buf, len, &s, &d), 0);
  check_set(s, "sd", 4);
  wt_close(s);
  free(buf);
  /* A bare data.pkl lists the tensors; storages read as zeros. */
  static const char pkl[] =
      "\x80\x02}X\x01\x00\x00\x00w"
      "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
      "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x06tQK\x00K\x02K\x03\x86K\x01K\x02\x86\x89"
      "ccollections\nOrderedDict\n)RtRs.";
  assert_int_equal(pth_open_pickle_buffer(pkl, sizeof pkl - 1, NULL, &s, &d), 0);
  assert_int_equal(wt_count(s), 1);
  float got[6] = {1};
  assert_int_equal(wt_read(s, wt_get(s, 0), 0, 6, got, &d), 0);
  assert_true(got[0] == 0 && got[5] == 0);
  wt_close(s);
  mg_diags_free(&d);
}

/* Every allocation of an open + full read fails once in turn: each failure must
 * come back as an error (or, where the allocation was optional, a success), never
 * a crash, and under ASan never a leak. */
static void fault_loop(char how, const char *file, const char *key) {
  char p[1024];
  fx(p, sizeof p, file);
  for (long n = 1;; n++) {
    mg_diags d;
    mg_diags_init(&d);
    mg_fault_fail_at(n, 1);
    wt_source *s = NULL;
    int rc = how == 'p' ? pth_open(p, key, &s, &d) : how == 's' ? safetensors_open(p, &s, &d) : weights_open(p, key, &s, &d);
    unsigned char buf[4096];
    for (int i = 0; !rc && i < wt_count(s); i++) {
      const wt_tensor *t = wt_get(s, i);
      int64_t k = wt_numel(t), per = (int64_t)(sizeof buf / (mg_dtype_size(t->dtype) ? mg_dtype_size(t->dtype) : 1));
      for (int64_t f = 0; f < k && !rc; f += per) rc = wt_read(s, t, f, k - f < per ? k - f : per, buf, &d);
    }
    long used = mg_fault_count();
    mg_fault_fail_at(0, 0);
    if (rc) assert_true(d.errors >= 1 || d.dropped >= 1);
    wt_close(s);
    mg_diags_free(&d);
    if (used < n) { /* no injected failure was reached: the run is complete */
      print_message("  %s: %ld allocations, each failed once\n", file, n - 1);
      assert_int_equal(rc, 0);
      break;
    }
    assert_true(n < 100000);
  }
}

static void test_fault_injection(void **state) {
  (void)state;
  fault_loop('p', "sd.pth", NULL);
  fault_loop('p', "sd_deflated.pth", NULL);
  fault_loop('p', "sd_legacy.pth", NULL);
  fault_loop('p', "ckpt.pth", NULL);
  fault_loop('s', "sd.safetensors", NULL);
  fault_loop('w', "init.onnx", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pth_zip_every_dtype),
      cmocka_unit_test(test_pth_legacy_every_dtype),
      cmocka_unit_test(test_pth_deflated),
      cmocka_unit_test(test_safetensors_every_dtype),
      cmocka_unit_test(test_weights_open_chooses_by_content),
      cmocka_unit_test(test_v3_untyped_storage_and_parameter),
      cmocka_unit_test(test_checkpoint_keys),
      cmocka_unit_test(test_malicious_pickles_rejected),
      cmocka_unit_test(test_bad_pth_files),
      cmocka_unit_test(test_zip_crc),
      cmocka_unit_test(test_view),
      cmocka_unit_test(test_bad_safetensors),
      cmocka_unit_test(test_unpickler_edges),
      cmocka_unit_test(test_buffers),
      cmocka_unit_test(test_fault_injection),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
