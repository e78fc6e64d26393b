/* Unit tests for the MindSpore package's escapers (codegen/common/text.c) and its
 * flag rules (codegen/mindspore/emit_package.c). Expected texts come from Python's
 * and POSIX sh's literal syntax and from facts.md 1.2's model_algorithm rule, not
 * from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "ms_package.h"
#include "text.h"

/* The text f appends for s. */
static char *run(void (*f)(cg_buf *, const char *), const char *s) {
  static char out[512];
  cg_buf b = {0};
  f(&b, s);
  assert_false(b.failed);
  snprintf(out, sizeof out, "%s", b.s ? b.s : "");
  cg_buf_free(&b);
  return out;
}

static void test_py_literal(void **state) {
  (void)state;
  assert_string_equal(run(cg_buf_py_literal, "input"), "\"input\"");
  assert_string_equal(run(cg_buf_py_literal, "a\"b\\c"), "\"a\\\"b\\\\c\"");
  assert_string_equal(run(cg_buf_py_literal, "a\nb\r\t\x7f"), "\"a\\x0ab\\x0d\\x09\\x7f\"");
  assert_string_equal(run(cg_buf_py_literal, "$(x)'`"), "\"$(x)'`\"");
  /* UTF-8 decoded: e-acute U+00E9, the euro U+20AC, U+1F600, U+2028 (a line separator) */
  assert_string_equal(run(cg_buf_py_literal, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x80\xa8"),
                      "\"\\u00e9\\u20ac\\U0001f600\\u2028\"");
  /* not UTF-8: an overlong '/', a lone continuation byte, a surrogate, a cut sequence */
  assert_string_equal(run(cg_buf_py_literal, "\xc0\xaf"), "\"\\xc0\\xaf\"");
  assert_string_equal(run(cg_buf_py_literal, "\x80z"), "\"\\x80z\"");
  assert_string_equal(run(cg_buf_py_literal, "\xed\xa0\x80"), "\"\\xed\\xa0\\x80\"");
  assert_string_equal(run(cg_buf_py_literal, "\xe2\x82"), "\"\\xe2\\x82\"");
}

static void test_sh_literal(void **state) {
  (void)state;
  assert_string_equal(run(cg_buf_sh_literal, "x:1,3"), "'x:1,3'");
  assert_string_equal(run(cg_buf_sh_literal, "it's"), "'it'\\''s'");
  assert_string_equal(run(cg_buf_sh_literal, "$(touch X)`y`\n\"\\"), "'$(touch X)`y`\n\"\\'");
  assert_string_equal(run(cg_buf_sh_literal, ""), "''");
}

static void test_printable_and_utf8(void **state) {
  (void)state;
  assert_string_equal(run(cg_buf_printable, "a\nb\x1b|\xc3\xa9"), "a\\x0ab\\x1b|\xc3\xa9");
  assert_string_equal(run(cg_buf_printable, "\xff"), "\\xff");
  assert_true(cg_utf8_valid("plain \xc3\xa9 \xf4\x8f\xbf\xbf"));  /* U+10FFFF, the last */
  assert_false(cg_utf8_valid("\xf4\x90\x80\x80"));                 /* past U+10FFFF */
  assert_false(cg_utf8_valid("\xe0\x80\x80"));                     /* overlong */
  assert_false(cg_utf8_valid("\xc3"));
}

static void test_model_algorithm_rule(void **state) {
  (void)state;
  assert_null(ms_package_algorithm_check("image_classification"));
  assert_null(ms_package_algorithm_check("predict_analysis"));
  assert_null(ms_package_algorithm_check(MS_PACKAGE_DEFAULT_ALGORITHM));
  assert_null(ms_package_algorithm_check("a23456789012345678901234567890123456")); /* 36 */
  assert_non_null(ms_package_algorithm_check("a234567890123456789012345678901234567")); /* 37 */
  assert_non_null(ms_package_algorithm_check(""));
  assert_non_null(ms_package_algorithm_check("1st"));
  assert_non_null(ms_package_algorithm_check("_x"));
  const char *bad = "&!'\"<>=";
  for (const char *p = bad; *p; p++) {
    char s[8] = {'a', *p, 'b', 0};
    assert_non_null(ms_package_algorithm_check(s));
  }
  assert_null(ms_package_algorithm_check("a-b.c d"));
}

static void test_runtime_rule(void **state) {
  (void)state;
  assert_null(ms_package_runtime_check(MS_PACKAGE_DEFAULT_RUNTIME));
  assert_null(ms_package_runtime_check("mindspore_1.9.0-cann_6.0.1-py_3.7-euler_2.9.9-x86_64-snt3p-300i"));
  assert_non_null(ms_package_runtime_check(""));
  assert_non_null(ms_package_runtime_check("a b"));
  assert_non_null(ms_package_runtime_check("a\"b"));
  assert_non_null(ms_package_runtime_check("x\n"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_py_literal),          cmocka_unit_test(test_sh_literal),
      cmocka_unit_test(test_printable_and_utf8),  cmocka_unit_test(test_model_algorithm_rule),
      cmocka_unit_test(test_runtime_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
