/* Tests for verify/parity.c, verify/policy.c, verify/junit.c and the scope-name
 * rule of verify/localize.c. Expected values are worked out by hand in the
 * comments, never taken from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "junit.h"
#include "localize.h"
#include "parity.h"
#include "policy.h"

static mg_array f64(double *v, int64_t n) {
  return (mg_array){.dtype = MG_F64, .rank = 1, .dims = {n}, .data = v, .nbytes = (size_t)n * 8};
}
static mg_array f32(float *v, int64_t n) {
  return (mg_array){.dtype = MG_F32, .rank = 1, .dims = {n}, .data = v, .nbytes = (size_t)n * 4};
}

static void test_identical(void **st) {
  (void)st;
  double a[3] = {1, -2, 3};
  mg_array x = f64(a, 3);
  parity_tol t = parity_default_forward();
  parity_metrics m;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(parity_compare(&x, &x, &t, &m, "x", &d), 0);
  assert_true(m.max_abs == 0 && m.max_rel == 0 && m.rel_norm == 0 && m.n_over == 0);
  assert_true(fabs(m.cosine - 1) < 1e-15);
  assert_true(m.ulp_max == 0);
  assert_true(parity_passes(&m, &t, 0, NULL, 0));
  mg_diags_free(&d);
}

static void test_known_errors(void **st) {
  (void)st;
  double r[4] = {1, -2, 0, 4}, g[4] = {1, -2, 1e-7, 4.5};
  mg_array R = f64(r, 4), G = f64(g, 4);
  parity_tol t = {1e-4, 1e-5, 0.99999, 1e-3};
  parity_metrics m;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(parity_compare(&G, &R, &t, &m, "x", &d), 0);
  assert_int_equal(m.n, 4);
  assert_true(fabs(m.max_abs - 0.5) < 1e-12);
  assert_int_equal(m.worst_index, 3);
  /* rel: 0.5/4 = 0.125 beats 1e-7/max(0, 1e-6) = 0.1 */
  assert_true(fabs(m.max_rel - 0.125) < 1e-12);
  /* ||g-r|| = sqrt(0.25 + 1e-14), ||r|| = sqrt(21) */
  assert_true(fabs(m.rel_norm - sqrt(0.25 + 1e-14) / sqrt(21)) < 1e-12);
  /* <g,r> = 1 + 4 + 0 + 18 = 23; ||g|| = sqrt(25.25 + 1e-14) */
  assert_true(fabs(m.cosine - 23 / (sqrt(25.25 + 1e-14) * sqrt(21))) < 1e-12);
  /* only element 3 is over 1e-5 + 1e-4*|ref|; element 2 (1e-7) is under atol */
  assert_int_equal(m.n_over, 1);
  assert_true(fabs(m.frac_over - 0.25) < 1e-15);
  char why[256];
  assert_false(parity_passes(&m, &t, 0, why, sizeof why));
  assert_non_null(strstr(why, "1 of 4 elements"));
  /* as a gradient: cosine 0.99..., rel norm 0.109 > 1e-3 */
  assert_false(parity_passes(&m, &t, 1, why, sizeof why));
  mg_diags_free(&d);
}

static void test_ulp(void **st) {
  (void)st;
  float r[6] = {1, 1, 1, 1, 0.0f, 1e-45f}, g[6];
  g[0] = 1;
  g[1] = nextafterf(1, 2);
  g[2] = nextafterf(g[1], 2);
  g[3] = nextafterf(g[2], 2);
  g[4] = -0.0f;   /* +0 and -0 are the same point: 0 ULP */
  g[5] = -1e-45f; /* smallest subnormal to its negative: 2 ULP */
  mg_array R = f32(r, 6), G = f32(g, 6);
  parity_tol t = parity_default_forward();
  parity_metrics m;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(parity_compare(&G, &R, &t, &m, "x", &d), 0);
  /* distances sorted: 0 0 1 2 2 3 -> median [3] = 2, p99 [floor(5*0.99)=4] = 2, max 3 */
  assert_true(m.ulp_median == 2 && m.ulp_p99 == 2 && m.ulp_max == 3);
  mg_diags_free(&d);
}

static void test_nonfinite_and_mismatch(void **st) {
  (void)st;
  double r[3] = {NAN, INFINITY, 1}, g[3] = {NAN, INFINITY, NAN};
  mg_array R = f64(r, 3), G = f64(g, 3);
  parity_tol t = parity_default_forward();
  parity_metrics m;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(parity_compare(&G, &R, &t, &m, "x", &d), 0);
  assert_int_equal(m.n_nonfinite, 1); /* NaN=NaN and Inf=Inf agree; NaN vs 1 does not */
  char why[128];
  assert_false(parity_passes(&m, &t, 0, why, sizeof why));
  assert_false(parity_passes(&m, &t, 1, why, sizeof why));
  mg_array short_one = f64(r, 2);
  assert_int_equal(parity_compare(&short_one, &R, &t, &m, "x", &d), -1);
  assert_int_equal(d.errors, 1);
  mg_diags_free(&d);
}

static void test_group(void **st) {
  (void)st;
  double r1[2] = {1, 0}, g1[2] = {1, 0}, r2[2] = {0, 1}, g2[2] = {0, 2};
  mg_array R1 = f64(r1, 2), G1 = f64(g1, 2), R2 = f64(r2, 2), G2 = f64(g2, 2);
  parity_tol t = parity_default_grad();
  parity_metrics m1, m2, m;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(parity_compare(&G1, &R1, &t, &m1, "a", &d), 0);
  assert_int_equal(parity_compare(&G2, &R2, &t, &m2, "b", &d), 0);
  parity_group g;
  parity_group_init(&g);
  parity_group_add(&g, &G1, &R1, &m1);
  parity_group_add(&g, &G2, &R2, &m2);
  parity_group_finish(&g, &m);
  /* concatenation: r = (1,0,0,1), g = (1,0,0,2): cos = 3/(sqrt2*sqrt5), rel norm = 1/sqrt2 */
  assert_true(fabs(m.cosine - 3 / (sqrt(2) * sqrt(5))) < 1e-12);
  assert_true(fabs(m.rel_norm - 1 / sqrt(2)) < 1e-12);
  assert_int_equal(m.n, 4);
  assert_true(fabs(m.max_abs - 1) < 1e-15);
  mg_diags_free(&d);
}

static char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/test_parity_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

static void test_policy(void **st) {
  (void)st;
  const char *xml = "<parity-policy>\n"
                    "  <forward rtol=\"1e-3\"/>\n"
                    "  <grad cosine=\"0.999\"/>\n"
                    "  <op type=\"Softmax\" atol=\"1e-6\"/>\n"
                    "  <model match=\"resnet*\">\n"
                    "    <forward rtol=\"2e-3\"/>\n"
                    "    <output name=\"logits\" cosine=\"0.9\"/>\n"
                    "    <param match=\"fc.*\" rel-norm=\"5e-3\"/>\n"
                    "  </model>\n"
                    "</parity-policy>\n";
  char *path = write_tmp(xml);
  parity_policy *p;
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(policy_load(path, &p, &d), 0);
  parity_tol t = policy_forward(p, "vgg", "Relu", "out");
  assert_true(t.rtol == 1e-3 && t.atol == 1e-5 && t.min_cosine == 0.99999);
  t = policy_forward(p, "resnet18", "Softmax", "logits");
  assert_true(t.rtol == 2e-3 && t.atol == 1e-6 && t.min_cosine == 0.9);
  t = policy_grad(p, "resnet18", "fc.weight");
  assert_true(t.min_cosine == 0.999 && t.max_rel_norm == 5e-3);
  t = policy_grad(p, "resnet18", "conv1.weight");
  assert_true(t.min_cosine == 0.999 && t.max_rel_norm == 1e-3);
  t = policy_grad(NULL, "x", "y");
  assert_true(t.min_cosine == 0.9999 && t.max_rel_norm == 1e-3);
  policy_free(p);
  unlink(path);

  /* errors carry file:line */
  path = write_tmp("<parity-policy>\n  <forward rtol=\"1e-3\"/>\n  <forward rtol=\"abc\"/>\n</parity-policy>\n");
  assert_int_equal(policy_load(path, &p, &d), -1);
  char want[128];
  snprintf(want, sizeof want, "%s:3:", path);
  assert_non_null(strstr(d.items[d.count - 1].message, want));
  unlink(path);
  path = write_tmp("<parity-policy>\n\n  <output name=\"x\"/>\n</parity-policy>\n");
  assert_int_equal(policy_load(path, &p, &d), -1); /* <output> only inside <model> */
  assert_non_null(strstr(d.items[d.count - 1].message, ":3:"));
  unlink(path);
  path = write_tmp("<parity-policy>\n  <grad colour=\"red\"/>\n</parity-policy>\n");
  assert_int_equal(policy_load(path, &p, &d), -1);
  assert_non_null(strstr(d.items[d.count - 1].message, "colour"));
  unlink(path);
  path = write_tmp("<parity-policy>\n  <grad\n</parity-policy>\n");
  assert_int_equal(policy_load(path, &p, &d), -1);
  unlink(path);
  /* a DTD is refused before it is parsed: no entity (billion laughs, external) is ever expanded */
  path = write_tmp("<?xml version=\"1.0\"?>\n<!DOCTYPE p [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>\n"
                   "<parity-policy><forward rtol=\"1e-3\" note=\"&b;\"/></parity-policy>\n");
  assert_int_equal(policy_load(path, &p, &d), -1);
  assert_non_null(strstr(d.items[d.count - 1].message, ":2: a <!DOCTYPE is not accepted"));
  unlink(path);
  mg_diags_free(&d);
}

static void test_module_path(void **st) {
  (void)st;
  char out[128];
  mg_scope_module("/layer1/layer1.0/conv1/Conv", out, sizeof out);
  assert_string_equal(out, "layer1.0.conv1");
  mg_scope_module("/features/conv1/Conv", out, sizeof out);
  assert_string_equal(out, "features.conv1");
  mg_scope_module("/encoder/layers/encoder_layer_0/ln_1/LayerNormalization", out, sizeof out);
  assert_string_equal(out, "encoder.layers.encoder_layer_0.ln_1");
  mg_scope_module("/features/features.0/features.0.1/Relu", out, sizeof out);
  assert_string_equal(out, "features.0.1");
  mg_scope_module("/backbone/features.0/features.0.13/features.0.13.2/HardSwish", out, sizeof out);
  assert_string_equal(out, "backbone.features.0.13.2");
  mg_scope_module("/layer2/layer2.0/downsample/downsample.0/Conv", out, sizeof out);
  assert_string_equal(out, "layer2.0.downsample.0");
  mg_scope_module("/backbone/features.0/features.0.1/block/block.0/block.0.0/Conv", out, sizeof out);
  assert_string_equal(out, "backbone.features.0.1.block.0.0");
  assert_int_equal(mg_scope_module("/a/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/Conv", out, 16), -1);
  mg_scope_module("/Relu", out, sizeof out);
  assert_string_equal(out, "");
  mg_scope_module("Conv_12", out, sizeof out);
  assert_string_equal(out, "");
}

static void test_junit(void **st) {
  (void)st;
  char path[] = "/tmp/test_parity_junit_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  junit_case c[2] = {{"output y", "verify.forward", JUNIT_PASS, NULL, NULL, NULL, 0.5},
                     {"grad module fc", "verify.gradients", JUNIT_FAILURE, "cosine 0.9 < 0.9999 & <x>", "parity", NULL, 0}};
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(junit_write(path, "suite \"q\"", c, 2, 1.25, &d), 0);
  FILE *f = fopen(path, "r");
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  assert_non_null(strstr(buf, "<testsuites>"));
  assert_non_null(strstr(buf, "tests=\"2\" failures=\"1\" errors=\"0\""));
  assert_non_null(strstr(buf, "name=\"suite &quot;q&quot;\""));
  assert_non_null(strstr(buf, "message=\"cosine 0.9 &lt; 0.9999 &amp; &lt;x&gt;\""));
  unlink(path);
  assert_int_equal(junit_write("/nonexistent/dir/x.xml", "s", c, 2, 0, &d), -1);
  mg_diags_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identical), cmocka_unit_test(test_known_errors), cmocka_unit_test(test_ulp),
      cmocka_unit_test(test_nonfinite_and_mismatch), cmocka_unit_test(test_group), cmocka_unit_test(test_policy),
      cmocka_unit_test(test_module_path), cmocka_unit_test(test_junit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
