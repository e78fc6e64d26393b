#include "tmpfiles.h"
#include "arena.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum { TMP_SLOTS = 64 };

/* The handler reads these while the program may be writing them: a slot is a
 * complete string before its pointer is stored, and cleared before it is freed. */
static char *volatile slots[TMP_SLOTS];

static void on_signal(int sig) {
  for (int i = 0; i < TMP_SLOTS; i++) {
    char *p = slots[i];
    if (p) unlink(p); /* async-signal-safe */
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void mg_tmp_install_signal_cleanup(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) sigaddset(&sa.sa_mask, sigs[k]);
    sigaction(sigs[i], &sa, NULL);
  }
}

int mg_tmp_register(const char *path) {
  size_t n = strlen(path) + 1;
  char *copy = mg_malloc(n);
  if (!copy) return -1;
  memcpy(copy, path, n);
  for (int i = 0; i < TMP_SLOTS; i++)
    if (!slots[i]) {
      slots[i] = copy;
      return 0;
    }
  mg_free(copy);
  return -1;
}

void mg_tmp_unregister(const char *path) {
  for (int i = 0; i < TMP_SLOTS; i++) {
    char *p = slots[i];
    if (p && !strcmp(p, path)) {
      slots[i] = NULL;
      mg_free(p);
      return;
    }
  }
}

int mg_tmp_sweep(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  char dir[4096], prefix[1024], victim[4096 + 1024];
  if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
  else snprintf(dir, sizeof dir, ".");
  if ((size_t)snprintf(prefix, sizeof prefix, ".%s.tmp-", name) >= sizeof prefix) return 0;
  DIR *dh = opendir(dir);
  if (!dh) return 0;
  int removed = 0;
  size_t plen = strlen(prefix);
  for (struct dirent *e; (e = readdir(dh));) {
    if (strncmp(e->d_name, prefix, plen)) continue;
    char *end;
    long pid = strtol(e->d_name + plen, &end, 10);
    if (end == e->d_name + plen || *end != '-' || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer may still run */
    snprintf(victim, sizeof victim, "%s/%s", dir, e->d_name);
    if (!unlink(victim)) removed++;
  }
  closedir(dh);
  return removed;
}
