/* The part of cmocka's API that tests/unit/test_runtime.c uses, for targets where
 * cmocka is not installed: the aarch64 cross build run under qemu
 * (tests/e2e/runtime_aarch64.sh). A failed check prints its message and exits 1,
 * ending the run at the first failure; the real cmocka is used everywhere else. */
#ifndef CMOCKA_LITE_H
#define CMOCKA_LITE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CMUnitTest {
  const char *name;
  void (*test)(void **state);
};
#define cmocka_unit_test(f) { #f, f }

static void cml_fail(const char *file, int line, const char *what) {
  printf("FAILED %s:%d: %s\n", file, line, what);
  exit(1);
}
#define assert_true(c) ((c) ? (void)0 : cml_fail(__FILE__, __LINE__, #c))
#define assert_non_null(p) assert_true((p) != NULL)
#define assert_int_equal(a, b) assert_true((long long)(a) == (long long)(b))
#define assert_memory_equal(a, b, n) assert_true(memcmp((a), (b), (n)) == 0)
#define fail_msg(...) (printf(__VA_ARGS__), printf("\n"), cml_fail(__FILE__, __LINE__, "fail_msg"))

#define cmocka_run_group_tests(t, setup, teardown) \
  cml_run((t), (int)(sizeof(t) / sizeof((t)[0])))
static int cml_run(const struct CMUnitTest *t, int n) {
  int i;
  for (i = 0; i < n; i++) {
    void *state = NULL;
    t[i].test(&state);
    printf("[       OK ] %s\n", t[i].name);
  }
  printf("[  PASSED  ] %d test(s).\n", n);
  return 0;
}

#endif
