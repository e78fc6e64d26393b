/* Unit tests for the strings family of runtime/ (strings.c): StringNormalizer
 * against a reference written here (stopwords matched by a per-byte ASCII
 * comparison, case mapped through a lookup of the alphabet), over random string
 * lists with repeated words, mixed case, UTF-8 bytes, empty strings and the
 * all-removed case; the string pool's bounds and overflow; in-place use. Built
 * against migcruntime and with the runtime compiled in under MG_RUNTIME_PORTABLE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mg_runtime.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) { /* xorshift64*: deterministic */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static const char *const UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", *const LOWER = "abcdefghijklmnopqrstuvwxyz";

/* Reference ASCII case maps: position in the alphabet strings, else unchanged. */
static char ref_to(char ch, const char *from, const char *to) {
  const char *p = ch ? strchr(from, ch) : NULL;
  return p ? to[p - from] : ch;
}
static int ref_equal_nocase(const char *a, const char *b) {
  size_t n = strlen(a);
  if (n != strlen(b)) return 0;
  for (size_t i = 0; i < n; i++)
    if (ref_to(a[i], UPPER, LOWER) != ref_to(b[i], UPPER, LOWER)) return 0;
  return 1;
}

/* Random word from a small alphabet (so stopwords recur), possibly with a UTF-8
 * "é" (0xC3 0xA9, which ASCII case mapping must keep) or empty. */
static void rnd_word(char *out) {
  static const char *const parts[] = {"mo", "MO", "nd", "ND", "ay", "Ay", "\xc3\xa9", "x", "1", "-"};
  int n = rnd_int(0, 3);
  out[0] = 0;
  for (int i = 0; i < n; i++) strcat(out, parts[rnd_int(0, 9)]);
}

static void test_string_normalizer_random(void **state) {
  (void)state;
  for (int iter = 0; iter < 2000; iter++) {
    char words[12][16], stops[4][16], pool_mem[512], ref[12][16];
    const char *x[12], *stop_ptrs[4], *y[13];
    int count = rnd_int(0, 12), n_stop = rnd_int(0, 4), sensitive = rnd_int(0, 1);
    mg_case_change how = (mg_case_change)rnd_int(0, 2);
    for (int i = 0; i < count; i++) rnd_word(words[i]), x[i] = words[i];
    for (int k = 0; k < n_stop; k++) {
      if (count && rnd_int(0, 1)) strcpy(stops[k], words[rnd_int(0, count - 1)]);
      else rnd_word(stops[k]);
      stop_ptrs[k] = stops[k];
    }
    /* reference */
    int n_ref = 0;
    for (int i = 0; i < count; i++) {
      int stop = 0;
      for (int k = 0; k < n_stop; k++) stop |= sensitive ? !strcmp(words[i], stops[k]) : ref_equal_nocase(words[i], stops[k]);
      if (stop) continue;
      size_t L = strlen(words[i]);
      for (size_t b = 0; b <= L; b++)
        ref[n_ref][b] = how == MG_CASE_LOWER ? ref_to(words[i][b], UPPER, LOWER)
                        : how == MG_CASE_UPPER ? ref_to(words[i][b], LOWER, UPPER) : words[i][b];
      n_ref++;
    }
    if (!n_ref) ref[n_ref++][0] = 0;
    mg_string_normalizer_params p = {count, how, sensitive, n_stop, stop_ptrs};
    mg_rt_string_pool pool = {pool_mem, sizeof pool_mem, 0};
    int64_t kept = -1;
    for (int i = 0; i < 13; i++) y[i] = NULL;
    int in_place = rnd_int(0, 1);
    const char **out = in_place ? x : y;
    assert_int_equal(mg_string_normalizer(&p, x, out, &kept, &pool), MG_RT_OK);
    assert_int_equal(kept, n_ref);
    for (int j = 0; j < n_ref; j++) assert_string_equal(out[j], ref[j]);
    for (int j = n_ref; j < (count > 0 ? count : 1); j++) assert_string_equal(out[j], "");
    if (!in_place) assert_null(y[count > 0 ? count : 1]); /* nothing past max(C, 1) */
    assert_true(pool.used <= pool.cap);
  }
}

/* ONNX's examples (onnx/backend/test/case/node/stringnormalizer.py). */
static void test_string_normalizer_examples(void **state) {
  (void)state;
  char mem[64];
  const char *x[4] = {"monday", "tuesday", "wednesday", "thursday"}, *stop[1] = {"monday"}, *y[4];
  mg_rt_string_pool pool = {mem, sizeof mem, 0};
  int64_t kept;
  mg_string_normalizer_params lower = {4, MG_CASE_LOWER, 1, 1, stop};
  assert_int_equal(mg_string_normalizer(&lower, x, y, &kept, &pool), 0);
  assert_int_equal(kept, 3);
  assert_string_equal(y[0], "tuesday");
  assert_string_equal(y[2], "thursday");
  assert_string_equal(y[3], "");
  assert_int_equal(pool.used, 0); /* already lower case: nothing copied */
  const char *x2[2] = {"monday", "monday"}, *y2[2];
  mg_string_normalizer_params upper = {2, MG_CASE_UPPER, 1, 1, stop};
  assert_int_equal(mg_string_normalizer(&upper, x2, y2, &kept, &pool), 0);
  assert_int_equal(kept, 1);
  assert_string_equal(y2[0], "");
  const char *x3[3] = {"Monday", "tuesday", "MONDAY"}, *y3[3];
  mg_string_normalizer_params insens = {3, MG_CASE_UPPER, 0, 1, stop};
  assert_int_equal(mg_string_normalizer(&insens, x3, y3, &kept, &pool), 0);
  assert_int_equal(kept, 1);
  assert_string_equal(y3[0], "TUESDAY");
  assert_int_equal(pool.used, 8);
  const char *y0[1];
  mg_string_normalizer_params empty = {0, MG_CASE_NONE, 0, 0, NULL};
  assert_int_equal(mg_string_normalizer(&empty, x, y0, &kept, &pool), 0);
  assert_int_equal(kept, 1);
  assert_string_equal(y0[0], "");
}

/* The pool refuses what does not fit (the NUL included) and never writes past cap. */
static void test_string_pool(void **state) {
  (void)state;
  char mem[16];
  memset(mem, 'z', sizeof mem);
  mg_rt_string_pool pool = {mem, 10, 0};
  char *a = mg_rt_pool_put(&pool, "abcd", 4);
  assert_non_null(a);
  assert_string_equal(a, "abcd");
  assert_int_equal(pool.used, 5);
  assert_null(mg_rt_pool_put(&pool, "efghi", 5)); /* needs 6 of the 5 left */
  assert_non_null(mg_rt_pool_put(&pool, "efgh", 4));
  assert_int_equal(pool.used, 10);
  assert_null(mg_rt_pool_put(&pool, "", 0));
  assert_int_equal(mem[10], 'z');
  const char *x[2] = {"aaaa", "bbbbbbbb"}, *y[2];
  int64_t kept;
  memset(mem, 'z', sizeof mem);
  mg_rt_string_pool small = {mem, 7, 0};
  mg_string_normalizer_params up = {2, MG_CASE_UPPER, 0, 0, NULL};
  assert_int_equal(mg_string_normalizer(&up, x, y, &kept, &small), MG_RT_ENOMEM);
  assert_int_equal(mem[7], 'z');
  mg_rt_string_pool none = {NULL, 0, 0};
  assert_int_equal(mg_string_normalizer(&up, x, y, &kept, &none), MG_RT_ENOMEM);
  assert_int_equal(mg_rt_dtype_size(MG_RT_STRING), sizeof(const char *));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_string_normalizer_random),
      cmocka_unit_test(test_string_normalizer_examples),
      cmocka_unit_test(test_string_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
