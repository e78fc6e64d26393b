/* The output rule (core/outfile.h) and mapped inputs cut short (core/mapfile.h),
 * in a scratch folder of their own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "mapfile.h"
#include "outfile.h"

static char dir[256];

/* dir/name, in a static buffer of its own per call site: k picks one of four. */
static const char *at(int k, const char *name) {
  static char buf[4][512];
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

/* path := text through the rule; the status of mg_out_commit (or of begin). */
static int put(const char *path, const char *text, mg_diags *d) {
  mg_out_file o;
  if (mg_out_fopen(&o, path, d)) return -1;
  fputs(text, o.f);
  return mg_out_commit(&o, d);
}

/* The whole of a small file, or "" when it cannot be read. */
static const char *slurp(const char *path) {
  static char buf[4096];
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  return buf;
}

/* How many entries of dir are temporaries (".NAME.tmp-PID-N"). */
static int temporaries(void) {
  DIR *dp = opendir(dir);
  int n = 0;
  for (struct dirent *e; dp && (e = readdir(dp));) n += strstr(e->d_name, ".tmp-") != NULL;
  if (dp) closedir(dp);
  return n;
}

static mg_diags d; /* each test's diagnostics */

/* A test's start: fresh diagnostics and a run under the rule with force. */
static void begin(int force) {
  mg_diags_init(&d);
  mg_out_run(force);
}

/* A test's end: no temporary file left behind, diagnostics freed. */
static void end(void) {
  assert_int_equal(temporaries(), 0);
  mg_diags_free(&d);
}

/* Whether d's last diagnostic is an error whose message contains what. */
static int said(const mg_diags *g, const char *what) {
  return g->count && g->items[g->count - 1].severity == MG_SEV_ERROR && strstr(g->items[g->count - 1].message, what);
}

static void test_existing_needs_force(void **state) {
  (void)state;
  begin(0);
  assert_int_equal(put(at(0, "a.txt"), "one", &d), 0);
  mg_out_run(0); /* a later run: a.txt is an earlier run's */
  assert_int_equal(put(at(0, "a.txt"), "two", &d), -1);
  assert_true(said(&d, "exists; --force replaces it"));
  assert_true(!strcmp(slurp(at(0, "a.txt")), "one"));
  assert_int_equal(mg_out_check(at(0, "a.txt"), 1, &d), -1);
  mg_out_run(1);
  assert_int_equal(mg_out_check(at(0, "a.txt"), 1, &d), 0);
  assert_int_equal(mg_out_check(at(0, "a.txt"), 0, &d), -1); /* the writer's own "no" wins */
  assert_int_equal(put(at(0, "a.txt"), "three", &d), 0);
  assert_true(!strcmp(slurp(at(0, "a.txt")), "three"));
  end();
}

static void test_input_never_replaced(void **state) {
  (void)state;
  begin(1);
  assert_int_equal(put(at(0, "in.bin"), "input", &d), 0);
  mg_out_run(1); /* even with --force */
  int fd = open(at(0, "in.bin"), O_RDONLY);
  assert_true(fd >= 0);
  mg_out_note_input_fd(fd);
  close(fd);
  assert_int_equal(put(at(0, "in.bin"), "output", &d), -1);
  assert_true(said(&d, "is an input of this run"));
  symlink(at(0, "in.bin"), at(1, "link.bin")); /* another name of the input: refused as well */
  assert_int_equal(mg_out_check(at(1, "link.bin"), 1, &d), -1);
  assert_true(!strcmp(slurp(at(0, "in.bin")), "input"));
  assert_int_equal(mkdir(at(2, "sub"), 0777), 0);
  assert_int_equal(mg_out_check(at(2, "sub"), 1, &d), -1);
  assert_true(said(&d, "not a regular file"));
  end();
}

static void test_two_outputs_one_name(void **state) {
  (void)state;
  begin(1);
  assert_int_equal(put(at(0, "twice.txt"), "first", &d), 0);
  assert_int_equal(put(at(0, "twice.txt"), "first", &d), 0); /* the same bytes: nothing lost */
  assert_int_equal(put(at(0, "twice.txt"), "second", &d), -1); /* --force or not */
  assert_true(said(&d, "two outputs of this run have this name"));
  assert_true(!strcmp(slurp(at(0, "twice.txt")), "first"));
  mg_out_scratch(); /* a folder the caller made: rewriting is its business */
  assert_int_equal(put(at(0, "twice.txt"), "second", &d), 0);
  assert_int_equal(put(at(0, "twice.txt"), "third", &d), 0);
  end();
}

static void test_install_does_not_clobber(void **state) {
  (void)state;
  begin(0);
  mg_out_file o;
  assert_int_equal(mg_out_fopen(&o, at(0, "late.txt"), &d), 0);
  fputs("mine", o.f);
  FILE *f = fopen(at(1, "late.txt"), "w"); /* another writer, meanwhile */
  fputs("theirs", f);
  fclose(f);
  assert_int_equal(mg_out_commit(&o, &d), -1);
  assert_true(said(&d, "exists; --force replaces it"));
  assert_true(!strcmp(slurp(at(0, "late.txt")), "theirs"));
  end();
}

/* A mapped file cut short: the pages past the new end read as zeros (no SIGBUS),
 * the truncation is named, and no output is committed afterwards. */
static void test_truncated_mapping(void **state) {
  (void)state;
  mg_map_install_sigbus();
  begin(1);
  const size_t len = 1 << 20;
  FILE *f = fopen(at(0, "mapped.bin"), "wb");
  for (size_t i = 0; i < len; i++) fputc(0x5a, f);
  fclose(f);
  int fd = open(at(0, "mapped.bin"), O_RDONLY);
  const volatile unsigned char *p = mg_map_file(fd, len, at(1, "mapped.bin"));
  close(fd);
  assert_true((const void *)p != MAP_FAILED);
  assert_int_equal(p[len - 1], 0x5a);
  assert_int_equal(mg_map_check(&d), 0);
  assert_int_equal(truncate(at(0, "mapped.bin"), 4096), 0);
  assert_int_equal(p[100], 0x5a); /* before the new end: the file's bytes */
  assert_int_equal(p[len - 1], 0);  /* after it: zeros, where SIGBUS would have been */
  assert_int_equal(mg_map_truncated(), 1);
  assert_int_equal(mg_map_check(&d), -1);
  assert_true(said(&d, "was truncated while migc was reading it"));
  assert_true(!strcmp(d.items[d.count - 1].file, at(1, "mapped.bin")));
  size_t before = d.count;
  assert_int_equal(mg_map_check(&d), -1);
  assert_int_equal(d.count, before); /* named once per list */
  assert_int_equal(put(at(2, "after.txt"), "x", &d), -1); /* nothing is written from it */
  assert_int_equal(access(at(2, "after.txt"), F_OK), -1);
  mg_unmap_file((void *)p, len);
  end();
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/migc-outfile-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_existing_needs_force), cmocka_unit_test(test_input_never_replaced),
      cmocka_unit_test(test_two_outputs_one_name), cmocka_unit_test(test_install_does_not_clobber),
      cmocka_unit_test(test_truncated_mapping), /* last: the process keeps its truncation */
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) rc = rc ? rc : 1;
  return rc;
}
