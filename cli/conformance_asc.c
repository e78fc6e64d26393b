/* The conformance runner's ascend-emu backend: the C backend's queue, build and runs
 * (conformance_c.c) with emit_ascend in place of emit_c. Every queued test is
 * prepared as the C backend prepares it (shape-deciding integer inputs bound, data
 * shapes from set 0), converted as `migc convert --target ascend` converts it, with
 * the prefix tN into one work folder (tN.c, tN.h, tN.weights and its host fallbacks
 * tN_host_*), and all are compiled with the aclnn emulator (ascend_emu/, copied to
 * WORK/emu/) into one runner. A run whose log holds "acl-emu: error" fails with that
 * line; a pass through a host fallback is printed as such; a node neither an aclnn
 * call nor a host fallback takes is a skip. */
#define _XOPEN_SOURCE 700
#include "ascend.h"
#include "cli.h"
#include "codegen.h"
#include "conformance.h"
#include "writer.h"
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  rule_set *rs[MAP_TARGET_COUNT];
  int quiet; /* set up failed: no summary line */
} asc_conf;

/* The files every runner shares: the emulator, acl_decls.h (acl_all.h: it declares
 * everything), the CPU runtime's headers and common.c. */
static int write_shared(const char *work, mg_diags *d) {
  static const char *const emu[] = {".c", ".h"}, *const headers[] = {".h"};
  char from[PATH_MAX], to[PATH_MAX];
  snprintf(from, sizeof from, "%s/ascend_emu", cg_source_dir());
  snprintf(to, sizeof to, "%s/emu", work);
  if (cg_copy_matching(d, from, to, emu, 2)) return -1;
  snprintf(from, sizeof from, "%s/ascend_emu/acl_all.h", cg_source_dir());
  if (cg_copy_file(d, from, work, "acl_decls.h")) return -1;
  snprintf(from, sizeof from, "%s/runtime", cg_source_dir());
  snprintf(to, sizeof to, "%s/runtime", work);
  if (cg_copy_matching(d, from, to, headers, 1)) return -1;
  snprintf(from, sizeof from, "%s/runtime/common.c", cg_source_dir());
  return cg_copy_file(d, from, to, "common.c");
}

/* The first error (or "not supported" diagnostic, when unsupported) from d->items[from]. */
static void first_message(const mg_diags *d, size_t from, int unsupported, char *why, size_t wn, const char *lead) {
  for (size_t i = from; i < d->count; i++) {
    const mg_diag *it = &d->items[i];
    if (it->severity != MG_SEV_ERROR || (unsupported && it->code != MG_D_UNSUPPORTED)) continue;
    char line[1024];
    if (unsupported) snprintf(line, sizeof line, "%s", it->message ? it->message : "");
    else mg_diag_format(it, line, sizeof line);
    snprintf(why, wn, "%s%s", lead, line);
    return;
  }
  snprintf(why, wn, "%s(no diagnostic)", lead);
}

/* The op types of the host fallbacks in d->items[from...], "Op" or "Op, Op2". */
static char *fallback_note(const mg_diags *d, size_t from) {
  char ops[512] = "";
  size_t n = 0;
  for (size_t i = from; i < d->count; i++) {
    const mg_diag *it = &d->items[i];
    if (it->code != MG_D_UNSUPPORTED || !it->message || !strstr(it->message, "host-fallback (cpu kernel)")) continue;
    const char *op = it->op ? it->op : "?";
    char pat[80];
    snprintf(pat, sizeof pat, "%s", op);
    int seen = 0;
    for (const char *p = ops; (p = strstr(p, pat)) && !seen; p++) {
      size_t l = strlen(pat);
      seen = (p == ops || p[-1] == ' ') && (p[l] == ',' || !p[l]);
    }
    if (!seen) n += (size_t)snprintf(ops + n, n < sizeof ops ? sizeof ops - n : 0, "%s%s", n ? ", " : "", op);
    if (n >= sizeof ops) break;
  }
  size_t len = strlen("host fallback: ") + strlen(ops) + 1;
  char *s = malloc(len);
  if (s) snprintf(s, len, "host fallback: %s", ops);
  return s;
}

/* The objects of prefix's host fallbacks: WORK/<prefix>_host_*.c, as .o names. */
static int fallback_objs(const char *work, const char *prefix, char ***objs, int *n_objs) {
  DIR *dp = opendir(work);
  if (!dp) return -1;
  char lead[64];
  snprintf(lead, sizeof lead, "%s_host_", prefix);
  size_t ll = strlen(lead);
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(dp))) {
    size_t len = strlen(e->d_name);
    if (len <= ll + 2 || strncmp(e->d_name, lead, ll) || strcmp(e->d_name + len - 2, ".c")) continue;
    char **grown = realloc(*objs, sizeof(char *) * (size_t)(*n_objs + 1));
    char *o = grown ? strdup(e->d_name) : NULL;
    if (grown) *objs = grown;
    if (!o) {
      rc = -1;
      break;
    }
    o[len - 1] = 'o';
    (*objs)[(*n_objs)++] = o;
  }
  closedir(dp);
  return rc;
}

static result asc_emit(void *ctx, mg_model *m, const char *prefix, const char *work, const char *model_path,
                       mg_diags *d, char *why, size_t wn, char **note, char ***objs, int *n_objs) {
  asc_conf *a = ctx;
  asc_options o = {.prefix = prefix};
  asc_report rep;
  size_t first = d->count;
  if (emit_ascend(m, a->rs[MAP_TARGET_ASCEND], &o, work, model_path, &rep, d)) {
    first_message(d, first, 0, why, wn, "conversion failed: ");
    return R_FAIL;
  }
  if (rep.n_unsupported) {
    first_message(d, first, 1, why, wn, "");
    return R_SKIP;
  }
  if (rep.n_fallbacks) {
    if (!(*note = fallback_note(d, first)) || fallback_objs(work, prefix, objs, n_objs)) {
      snprintf(why, wn, "out of memory listing the host fallbacks");
      return R_FAIL;
    }
  }
  return R_PASS;
}

/* The emulator, compiled once as the models are (the strict flags; -Iemu for its
 * own header). */
static void asc_makefile(void *ctx, FILE *f) {
  (void)ctx;
  fprintf(f, "EXTRA = $(patsubst %%.c,%%.o,$(wildcard emu/*.c))\n"
             "emu/%%.o: emu/%%.c $(wildcard emu/*.h)\n\t$(CC) $(CFLAGS) -Iemu -c $< -o $@\n");
}

static void asc_finish(void *ctx, int n_plain, int n_noted) {
  asc_conf *a = ctx;
  if (!a->quiet) printf("ascend-emu: %d passed on aclnn calls alone, %d through a host fallback\n", n_plain, n_noted);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(a->rs[t]);
  free(a);
}

conf_c *conf_asc_new(const char *work_dir, int keep, int jobs) {
  asc_conf *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  mg_diags d;
  mg_diags_init(&d);
  if (cli_coverage_rules(a->rs, &d)) {
    cli_report(&d);
    mg_diags_free(&d);
    a->quiet = 1;
    asc_finish(a, 0, 0);
    return NULL;
  }
  conf_c_backend be = {asc_emit, asc_makefile, asc_finish, a};
  conf_c *q = conf_c_new_backend(work_dir, keep, jobs, &be);
  a->quiet = 1;
  if (!q) {
    asc_finish(a, 0, 0);
    mg_diags_free(&d);
    return NULL;
  }
  if (write_shared(conf_c_work(q), &d)) {
    cli_report(&d);
    mg_diags_free(&d);
    conf_c_finish(NULL, q); /* frees a */
    return NULL;
  }
  a->quiet = 0;
  mg_diags_free(&d);
  return q;
}
