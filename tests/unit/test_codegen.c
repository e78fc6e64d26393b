/* Unit tests for the C generator's driver (codegen/): error paths under injected
 * allocation failures, the arena plan against its lower bound, and the lowering
 * passes (BatchNorm folding, activation fusion) as the report counts them.
 * Numerical agreement of generated code is the end-to-end suites' job
 * (conformance --backend c, torchvision_c.sh, convert_cli.sh). */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "codegen.h"
#include "onnx_import.h"
#include "passes.h"

static const char *source_dir(void) {
  const char *s = getenv("MIGC_TEST_SOURCE");
  return s ? s : ".";
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Imports and prepares path with input 0 fixed to `shape` (NULL: as declared). */
static mg_model *load(const char *path, const char *input, const char *shape, mg_diags *d) {
  mg_model *m = NULL;
  mg_shape_override ov = {input, {0}};
  int n_ov = 0;
  if (shape) {
    assert_int_equal(mg_shape_parse(shape, &ov.shape), 0);
    n_ov = 1;
  }
  if (onnx_import(path, d, &m) || mg_prepare(m, &ov, n_ov, d)) {
    mg_model_free(m);
    return NULL;
  }
  return m;
}

/* Whether dir holds a leftover temporary file (name containing ".tmp"). */
static int has_tmp(const char *dir) {
  DIR *dd = opendir(dir);
  if (!dd) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(dd)))
    if (strstr(e->d_name, ".tmp")) found = 1;
  closedir(dd);
  return found;
}

/* Fails allocation N = 1, 2, ... inside emit_c until it succeeds: every failure
 * must be reported (return -1 with an error recorded), leak nothing (ASan build)
 * and leave no temporary file behind. */
static void sweep(const char *model, const char *input, const char *shape, int symbolic_batch) {
  char dir[] = "/tmp/migc-test-codegen-XXXXXX";
  assert_non_null(mkdtemp(dir));
  int failures = 0;
  for (long n = 1;; n++) {
    mg_diags d;
    mg_diags_init(&d);
    mg_model *m = load(model, input, shape, &d);
    assert_non_null(m);
    cg_options o = {.prefix = "model", .symbolic_batch = symbolic_batch};
    cg_report r;
    mg_fault_fail_at(n, 1);
    int rc = emit_c(m, &o, dir, &r, &d);
    mg_fault_fail_at(0, 0);
    mg_model_free(m);
    assert_false(has_tmp(dir));
    if (rc == 0) {
      mg_diags_free(&d);
      break;
    }
    assert_true(d.errors > 0);
    failures++;
    mg_diags_free(&d);
    assert_true(n < 100000);
  }
  print_message("%s: %d injected allocation failures, all reported and clean\n", model, failures);
  assert_true(failures > 10);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The whole of dir/name, NUL-terminated (mg_malloc'd); NULL when unreadable. */
static char *slurp(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? mg_malloc((size_t)n + 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) mg_free(s), s = NULL;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* mg_model_clone: the C generated from a copy (which its lowering rewrites) is
 * the C generated from the original afterwards, byte for byte, for models with
 * subgraphs (If, Loop, Scan bodies reading outer values) and a whole network;
 * and an allocation failure at any point gives NULL with nothing leaked. */
static void test_clone(void **state) {
  (void)state;
  static const char *const models[] = {"node/test_if/model.onnx", "node/test_loop11/model.onnx",
                                       "node/test_scan9_sum/model.onnx", "light/light_inception_v1.onnx"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char path[4096], a[] = "/tmp/migc-test-clone-a-XXXXXX", b[] = "/tmp/migc-test-clone-b-XXXXXX";
    snprintf(path, sizeof path, "%s/../shared/onnx-conformance/%s", source_dir(), models[i]);
    assert_non_null(mkdtemp(a));
    assert_non_null(mkdtemp(b));
    mg_diags d;
    mg_diags_init(&d);
    mg_model *m = load(path, NULL, NULL, &d);
    assert_non_null(m);
    mg_model *copy = mg_model_clone(m);
    assert_non_null(copy);
    assert_int_equal(ir_verify(copy, &d), 0);
    cg_options o = {.prefix = "model", .no_runner = 1};
    cg_report r1, r2;
    assert_int_equal(emit_c(copy, &o, a, &r1, &d), 0);
    assert_int_equal(emit_c(m, &o, b, &r2, &d), 0);
    char *ca = slurp(a, "model.c"), *cb = slurp(b, "model.c");
    assert_non_null(ca);
    assert_non_null(cb);
    assert_string_equal(ca, cb);
    mg_free(ca), mg_free(cb);
    for (long n = 1, failures = 0;; n++) {
      mg_fault_fail_at(n, 1);
      mg_model *c2 = mg_model_clone(m);
      mg_fault_fail_at(0, 0);
      if (c2) {
        mg_model_free(c2);
        assert_true(failures >= 1); /* arenas allocate in blocks: few, but each one fails cleanly */
        break;
      }
      failures++;
      assert_true(n < 100000);
    }
    mg_model_free(copy);
    mg_model_free(m);
    mg_diags_free(&d);
    nftw(a, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    nftw(b, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

/* ops.def's unary column: the runtime kernel takes two float parameters, a and b,
 * which are the op's float attributes in the order its row lists them, so a row
 * with a third float attribute, or one of another kind, would lose it silently
 * (Gelu's approximate is the emitter's to choose the kernel with). */
static void test_unary_column(void **state) {
  (void)state;
  int unary = 0;
  for (int op = 1; op < MG_OP_COUNT; op++) {
    if (!cg_has_unary_kernel((mg_op)op)) continue;
    const mg_op_info *info = mg_op_get((mg_op)op);
    unary++;
    assert_int_equal(info->shape_rule, MG_SH_UNARY);
    assert_true(info->min_in == 1 && info->max_in == 1 && info->max_out == 1);
    int floats = 0;
    for (const char *p = info->attrs; *p;) {
      while (*p == ' ') p++;
      size_t len = strcspn(p, ":");
      if (!strncmp(p + len, ":f", 2) && (p[len + 2] == '=' || p[len + 2] == ' ' || !p[len + 2])) floats++;
      else if (!(op == MG_OP_Gelu && !strncmp(p, "approximate:", 12))) fail_msg("%s: attribute %.*s is not a float", info->name, (int)len, p);
      p += strcspn(p, " ");
    }
    assert_true(floats <= 2);
  }
  assert_true(cg_has_unary_kernel(MG_OP_Relu) && cg_has_unary_kernel(MG_OP_Not) && !cg_has_unary_kernel(MG_OP_Add));
  assert_true(unary >= 30);
}

static void test_allocation_failures(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/samples/tiny_cnn_preserve.onnx", source_dir());
  sweep(path, "input", "1x3x32x32", 0);
  snprintf(path, sizeof path, "%s/../shared/onnx-conformance/light/light_squeezenet.onnx", source_dir());
  sweep(path, NULL, NULL, 0);
  /* the symbolic batch: the copy at another batch, its preparation and lowering */
  snprintf(path, sizeof path, "%s/samples/tiny_cnn.onnx", source_dir());
  sweep(path, NULL, NULL, 1);
}

/* The plan never goes under the lower bound (it is one), and stays within 1.25x
 * of it on whole CNNs. */
static void test_plan_near_lower_bound(void **state) {
  (void)state;
  const char *models[] = {"light_squeezenet", "light_resnet50", "light_densenet121", "light_inception_v1",
                          "light_shufflenet", "light_bvlc_alexnet"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char path[4096], dir[] = "/tmp/migc-test-plan-XXXXXX";
    snprintf(path, sizeof path, "%s/../shared/onnx-conformance/light/%s.onnx", source_dir(), models[i]);
    assert_non_null(mkdtemp(dir));
    mg_diags d;
    mg_diags_init(&d);
    mg_model *m = load(path, NULL, NULL, &d);
    assert_non_null(m);
    cg_options o = {.prefix = "model", .no_runner = 1};
    cg_report r;
    assert_int_equal(emit_c(m, &o, dir, &r, &d), 0);
    print_message("%s: arena %zu, lower bound %zu (%.3fx), %d in place\n", models[i], r.arena_bytes, r.lower_bound,
                  (double)r.arena_bytes / (double)r.lower_bound, r.n_inplace);
    assert_true(r.lower_bound > 0);
    assert_true(r.arena_bytes >= r.lower_bound);
    assert_true((double)r.arena_bytes <= 1.25 * (double)r.lower_bound);
    mg_model_free(m);
    mg_diags_free(&d);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

/* PRESERVE exports keep BatchNormalization after each Conv: both fold, and both
 * Relus fuse into the convolutions. */
static void test_lowering_counts(void **state) {
  (void)state;
  char path[4096], dir[] = "/tmp/migc-test-lower-XXXXXX";
  snprintf(path, sizeof path, "%s/samples/tiny_cnn_preserve.onnx", source_dir());
  assert_non_null(mkdtemp(dir));
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = load(path, "input", "1x3x32x32", &d);
  assert_non_null(m);
  int bn = 0;
  for (int i = 0; i < m->graph->n_nodes; i++) bn += m->graph->nodes[i]->op == MG_OP_BatchNormalization;
  cg_options o = {.prefix = "model", .no_runner = 1};
  cg_report r;
  assert_int_equal(emit_c(m, &o, dir, &r, &d), 0);
  assert_int_equal(bn, 2);
  assert_int_equal(r.n_bn_folded, bn);
  assert_int_equal(r.n_fused, 2);
  assert_int_equal(r.n_unsupported, 0);
  mg_model_free(m);
  mg_diags_free(&d);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A symbolic batch keeps the static batch-1 plan: the same arena and lower bound,
 * every node converted; without symbolic_batch the same model is reported. */
static void test_symbolic_batch_plan(void **state) {
  (void)state;
  char path[4096], dir[] = "/tmp/migc-test-batch-XXXXXX";
  snprintf(path, sizeof path, "%s/samples/tiny_cnn.onnx", source_dir());
  assert_non_null(mkdtemp(dir));
  cg_report st, dy, off;
  for (int k = 0; k < 3; k++) {
    mg_diags d;
    mg_diags_init(&d);
    /* the symbolic one last: its model.h stays in dir */
    mg_model *m = load(path, "input", k == 1 ? "1x3x32x32" : NULL, &d);
    assert_non_null(m);
    cg_options o = {.prefix = "model", .no_runner = 1, .symbolic_batch = k == 2};
    assert_int_equal(emit_c(m, &o, dir, k == 0 ? &off : k == 1 ? &st : &dy, &d), 0);
    mg_model_free(m);
    mg_diags_free(&d);
  }
  assert_int_equal(dy.n_unsupported, 0);
  assert_int_equal(dy.arena_bytes, st.arena_bytes);
  assert_int_equal(dy.lower_bound, st.lower_bound);
  assert_true(off.n_unsupported > 0);
  char *h = slurp(dir, "model.h");
  assert_non_null(h);
  assert_non_null(strstr(h, "int model_init_dims(model_t *m, const char *weights_path, const int64_t *max_dims);"));
  assert_non_null(strstr(h, "#define MODEL_N_DIMS 1"));
  mg_free(h);
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lowering_counts),
      cmocka_unit_test(test_unary_column),
      cmocka_unit_test(test_clone),
      cmocka_unit_test(test_plan_near_lower_bound),
      cmocka_unit_test(test_allocation_failures),
      cmocka_unit_test(test_symbolic_batch_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
