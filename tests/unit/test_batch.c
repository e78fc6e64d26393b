/* Unit tests for cli/batch_hash.c: SHA-256 against the test vectors of FIPS 180-2
 * (appendix B) and NIST's examples, through memory and through a file (which is read
 * in 64 KiB pieces, so the million-'a' vector crosses piece boundaries), and the
 * shard of a name, against values worked out with Python's hashlib. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch.h"

static void test_vectors(void **state) {
  (void)state;
  char hex[65];
  batch_sha256_hex("", 0, hex);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  batch_sha256_hex("abc", 3, hex);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes: two padding blocks */
  batch_sha256_hex(m448, strlen(m448), hex);
  assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                     "mnopqrstnopqrstu";
  batch_sha256_hex(m896, strlen(m896), hex);
  assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_file(void **state) {
  (void)state;
  char path[] = "/tmp/migc-test-batch-XXXXXX", hex[65];
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  char *a = malloc(1000000);
  assert_non_null(a);
  memset(a, 'a', 1000000);
  assert_int_equal(write(fd, a, 1000000), 1000000);
  close(fd);
  free(a);
  assert_int_equal(batch_sha256_file(path, hex), 0);
  assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  unlink(path);
  assert_int_equal(batch_sha256_file(path, hex), -1);
}

/* int(hashlib.sha256(name.encode()).hexdigest()[:16], 16) % n, computed in Python */
static void test_shard(void **state) {
  (void)state;
  assert_int_equal(batch_shard_of("resnet18", 1), 0);
  /* sha256("abc")[:16] = ba7816bf8f01cfea = 13436514500253700074 */
  assert_int_equal(batch_shard_of("abc", 3), 0);
  assert_int_equal(batch_shard_of("abc", 1000), 74);
  assert_int_equal(batch_shard_of("resnet18", 7), 6);
  assert_int_equal(batch_shard_of("mobilenet_v3_small", 5), 1);
  for (int n = 1; n < 50; n++) {
    int s = batch_shard_of("mobilenet_v3_small", n);
    assert_true(s >= 0 && s < n);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_vectors), cmocka_unit_test(test_file),
                                     cmocka_unit_test(test_shard)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
