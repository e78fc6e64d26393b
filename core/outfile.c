/* The output rule (outfile.h). */
#include "outfile.h"
#include "mapfile.h"
#include "tmpfiles.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  dev_t dev;
  ino_t ino;
} file_id;

/* Rings of the inputs read and the files written by this run: the newest are
 * kept when a run has more. A spin lock guards them, since a command may convert
 * on several threads. */
static file_id inputs[MG_OUT_MAX_INPUTS], written[MG_OUT_MAX_WRITTEN];
static int n_inputs, n_written, next_input, next_written;
static atomic_flag lock = ATOMIC_FLAG_INIT;
static int force = 1, strict; /* the scratch policy until a command says otherwise */
static atomic_uint counter;   /* distinguishes the temporaries of one process */

static void take(void) {
  while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
  }
}
static void give(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

void mg_out_run(int f) {
  take();
  force = f != 0, strict = 1, n_written = next_written = 0;
  give();
}

void mg_out_scratch(void) {
  take();
  force = 1, strict = 0, n_written = next_written = 0;
  give();
}

int mg_out_forced(void) { return force; }

static void remember(file_id *ring, int cap, int *n, int *next, const struct stat *st) {
  take();
  int known = 0;
  for (int i = 0; i < *n && !known; i++) known = ring[i].dev == st->st_dev && ring[i].ino == st->st_ino;
  if (!known) {
    ring[*next] = (file_id){st->st_dev, st->st_ino};
    *next = (*next + 1) % cap;
    if (*n < cap) (*n)++;
  }
  give();
}

static int known_in(const file_id *ring, const int *n, const struct stat *st) {
  take();
  int known = 0;
  for (int i = 0; i < *n && !known; i++) known = ring[i].dev == st->st_dev && ring[i].ino == st->st_ino;
  give();
  return known;
}

void mg_out_note_input_fd(int fd) {
  struct stat st;
  if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode))
    remember(inputs, MG_OUT_MAX_INPUTS, &n_inputs, &next_input, &st);
}

void mg_out_note_input(const char *path) {
  struct stat st;
  if (path && !stat(path, &st) && S_ISREG(st.st_mode)) remember(inputs, MG_OUT_MAX_INPUTS, &n_inputs, &next_input, &st);
}

/* Records an error about path on d, under path's name. */
static int refuse(mg_diags *d, const char *path, const char *why) {
  const char *saved = d->file;
  d->file = path;
  mg_error(d, IO, NULL, NULL, "%s", why);
  d->file = saved;
  return -1;
}

/* Whether files a and b hold the same bytes. */
static int same_bytes(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int same = fa && fb;
  char x[8192], y[8192];
  while (same) {
    size_t na = fread(x, 1, sizeof x, fa), nb = fread(y, 1, sizeof y, fb);
    same = na == nb && !memcmp(x, y, na) && !ferror(fa) && !ferror(fb);
    if (na < sizeof x) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* The rule against what is at path now; st receives it (st_mode 0: nothing).
 * tmp, when not NULL, is the content about to replace it: the same bytes as a
 * file this run wrote there already is no collision (a project that copies one
 * runtime header twice loses nothing), and returns 1; tmp "" stands for content
 * still to come, judged at install. */
static int check_existing(const char *path, const char *tmp, int replace, struct stat *st, mg_diags *d) {
  memset(st, 0, sizeof *st);
  if (lstat(path, st)) {
    if (errno == ENOENT) return 0;
    return refuse(d, path, strerror(errno));
  }
  struct stat target;
  if (strict && !stat(path, &target) && known_in(inputs, &n_inputs, &target))
    return refuse(d, path, "is an input of this run; refusing to overwrite it");
  if (!S_ISREG(st->st_mode)) return refuse(d, path, "exists and is not a regular file; refusing to replace it");
  if (strict && known_in(written, &n_written, st)) {
    if (tmp && (!*tmp || same_bytes(tmp, path))) return 1;
    return refuse(d, path, "two outputs of this run have this name; refusing to replace the first one");
  }
  if (!(replace && force)) return refuse(d, path, "exists; --force replaces it");
  return 0;
}

int mg_out_check(const char *path, int replace, mg_diags *d) {
  struct stat st;
  return check_existing(path, NULL, replace, &st, d);
}

int mg_out_begin(mg_out_file *o, const char *path, mg_diags *d) {
  o->fd = -1, o->f = NULL, o->tmp[0] = 0, o->durable = 1;
  if (strlen(path) >= sizeof o->path) return refuse(d, path, "the path is too long");
  memcpy(o->path, path, strlen(path) + 1);
  struct stat st;
  if (check_existing(path, "", 1, &st, d) < 0) return -1;
  mg_tmp_sweep(path); /* what a killed run left for this output */
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path + 1) : 0;
  for (int attempt = 0; o->fd < 0; attempt++) {
    snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.tmp-%ld-%u", dir_len, path, path + dir_len, (long)getpid(),
             atomic_fetch_add(&counter, 1u));
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (o->fd < 0 && (errno != EEXIST || attempt >= 100)) {
      char why[256];
      snprintf(why, sizeof why, "cannot create a temporary file beside it: %s", strerror(errno));
      o->tmp[0] = 0;
      return refuse(d, path, why);
    }
  }
  mg_tmp_register(o->tmp); /* best effort: a full table leaves it to abort and the sweep */
  return 0;
}

int mg_out_fopen(mg_out_file *o, const char *path, mg_diags *d) {
  if (mg_out_begin(o, path, d)) return -1;
  if (!(o->f = fdopen(o->fd, "wb"))) {
    mg_out_abort(o);
    return refuse(d, path, "cannot open a stream on its temporary file");
  }
  return 0;
}

void mg_out_abort(mg_out_file *o) {
  if (o->f) fclose(o->f);
  else if (o->fd >= 0) close(o->fd);
  o->f = NULL, o->fd = -1;
  if (o->tmp[0]) {
    unlink(o->tmp);
    mg_tmp_unregister(o->tmp);
    o->tmp[0] = 0;
  }
}

/* Makes path's folder entry durable; best effort, as some filesystems refuse. */
static void sync_folder(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1, slash ? path : ".");
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
}

int mg_out_install(const char *tmp, const char *path, int replace, mg_diags *d) {
  if (mg_map_check(d)) return -1; /* what was read is not what the input holds */
  struct stat st;
  int rc = check_existing(path, tmp, replace, &st, d);
  if (rc < 0) return -1;
  if (rc > 0) { /* this run's own file, with these very bytes, is in place */
    unlink(tmp);
    mg_tmp_unregister(tmp);
    return 0;
  }
  if (!(replace && force)) {
    /* link() refuses a file that appeared since the check; filesystems without
     * hard links fall back to the check just made and a rename */
    rc = link(tmp, path);
    if (!rc) unlink(tmp);
    else if (errno == EEXIST) return refuse(d, path, "appeared while it was being written; refusing to overwrite it");
    else rc = rename(tmp, path);
  } else {
    rc = rename(tmp, path);
  }
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "cannot move its temporary file into place: %s", strerror(errno));
    return refuse(d, path, why);
  }
  mg_tmp_unregister(tmp);
  if (strict && !lstat(path, &st)) remember(written, MG_OUT_MAX_WRITTEN, &n_written, &next_written, &st);
  return 0;
}

int mg_out_commit(mg_out_file *o, mg_diags *d) {
  int bad = 0, why = 0;
  if (o->f) {
    bad = fflush(o->f) != 0 || ferror(o->f);
    if (bad) why = errno;
  }
  if (!bad && o->durable && fsync(o->fd)) bad = 1, why = errno;
  int closed = o->f ? fclose(o->f) : close(o->fd);
  o->f = NULL, o->fd = -1;
  if (!bad && closed) bad = 1, why = errno;
  if (bad) {
    char msg[256];
    snprintf(msg, sizeof msg, "cannot write it: %s", strerror(why ? why : EIO));
    mg_out_abort(o);
    return refuse(d, o->path, msg);
  }
  if (mg_out_install(o->tmp, o->path, 1, d)) {
    mg_out_abort(o);
    return -1;
  }
  o->tmp[0] = 0;
  if (o->durable) sync_folder(o->path);
  return 0;
}
