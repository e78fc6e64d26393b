/* Writing a generated project: every file goes to a temporary name in its folder
 * and is renamed into place, so a failed conversion never leaves a half-written
 * file under a final name. */
#include "writer.h"
#include "outfile.h"
#include "tmpfiles.h"
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cg_mkdirs(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *q = buf + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      *q = '/';
    }
  return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

FILE *cg_file_open(const char *dir, const char *name, char *tmp, size_t n) {
  snprintf(tmp, n, "%s/.%s.tmp-%ld-0", dir, name, (long)getpid());
  char final[4096];
  snprintf(final, sizeof final, "%s/%s", dir, name);
  mg_tmp_sweep(final);
  FILE *f = fopen(tmp, "wb");
  if (f) mg_tmp_register(tmp);
  return f;
}

int cg_file_commit(mg_diags *d, FILE *f, const char *tmp, const char *dir, const char *name) {
  char final[4096];
  snprintf(final, sizeof final, "%s/%s", dir, name);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad) {
    remove(tmp);
    mg_tmp_unregister(tmp);
    mg_error(d, IO, final, NULL, "cannot write %s: %s", final, strerror(errno ? errno : EIO));
    return -1;
  }
  /* the output rule (core/outfile.h): no input, no earlier output of this run,
   * and an existing file only with --force; a project is cheap to make again,
   * so it is not fsynced */
  if (mg_out_install(tmp, final, 1, d)) {
    remove(tmp);
    mg_tmp_unregister(tmp);
    return -1;
  }
  return 0;
}

int cg_write_text(mg_diags *d, const char *dir, const char *name, const char *text) {
  char tmp[4096];
  FILE *f = cg_file_open(dir, name, tmp, sizeof tmp);
  if (!f) {
    mg_error(d, IO, dir, NULL, "cannot create a file in %s: %s", dir, strerror(errno));
    return -1;
  }
  fputs(text, f);
  return cg_file_commit(d, f, tmp, dir, name);
}

int cg_copy_stream(mg_diags *d, FILE *in, const char *src, const char *dir, const char *name) {
  char tmp[4096];
  FILE *f = cg_file_open(dir, name, tmp, sizeof tmp);
  if (!f) {
    fclose(in);
    mg_error(d, IO, dir, NULL, "cannot create a file in %s: %s", dir, strerror(errno));
    return -1;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, f);
  int bad = ferror(in);
  fclose(in);
  if (bad) {
    fclose(f);
    remove(tmp);
    mg_tmp_unregister(tmp);
    mg_error(d, IO, src, NULL, "error reading %s", src);
    return -1;
  }
  return cg_file_commit(d, f, tmp, dir, name);
}

int cg_copy_file(mg_diags *d, const char *src, const char *dir, const char *name) {
  FILE *in = fopen(src, "rb");
  if (!in) {
    mg_error(d, IO, src, NULL, "cannot read %s (set MIGC_SOURCE_DIR to migc's source tree): %s", src,
             strerror(errno));
    return -1;
  }
  return cg_copy_stream(d, in, src, dir, name);
}

int cg_copy_matching(mg_diags *d, const char *src_dir, const char *dir, const char *const *suffixes, int n) {
  DIR *dp = opendir(src_dir);
  if (!dp) {
    mg_error(d, IO, src_dir, NULL, "cannot list %s (set MIGC_SOURCE_DIR to migc's source tree)", src_dir);
    return -1;
  }
  int rc = 0;
  if (cg_mkdirs(dir)) {
    mg_error(d, IO, dir, NULL, "cannot create %s", dir);
    rc = -1;
  }
  struct dirent *e;
  while (!rc && (e = readdir(dp))) {
    size_t len = strlen(e->d_name);
    int want = 0;
    for (int k = 0; k < n && !want; k++) {
      size_t sl = strlen(suffixes[k]);
      want = len > sl && !strcmp(e->d_name + len - sl, suffixes[k]);
    }
    if (!want) continue;
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", src_dir, e->d_name);
    rc = cg_copy_file(d, path, dir, e->d_name);
  }
  closedir(dp);
  return rc;
}
