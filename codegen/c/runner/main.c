/* The runner migc ships with every generated CPU project (copied verbatim).
 *
 *   runner [--model NAME] [--weights FILE] --input NAME=x.npy... [--output-dir D]
 *          [--repeat N [--cpu-time]] [--threads N] [--trace DIR] [--profile N] [--max-dim NAME=N]
 *          [--list]
 *
 * It reads each graph input from a .npy file (dtype and shape must match the
 * model exactly; string inputs are numpy unicode arrays, '<U<n>', passed to the
 * model as UTF-8), runs the model once, and writes D/<output name>.npy (written
 * to a temporary file, then renamed; D is created if missing). With --repeat N it then runs N more timed
 * inferences and prints "median_ms X" (with --cpu-time also "median_cpu_ms X", the
 * process's CPU time per run, which a busy machine inflates less). --threads N runs
 * the model on N threads (up to what it was converted for). A model with a symbolic
 * batch takes its batch from the inputs' leading axis (every batch input must
 * agree), is initialised for that batch or for --max-dim BATCH=N's, and runs at it. With --trace DIR the run also writes every
 * node's output to DIR/<value name>.npy, for layer-by-layer comparison. With --profile N it runs N more
 * times through the trace hook and prints each node's median time (with --cpu-time,
 * the process's CPU time), slowest first
 * (the time between one node's hook and the next: the node, with any activation
 * fused into it). --trace and --profile take batch 1 only. The weights file defaults to the one
 * written next to the runner. Exit status: 0 ok, 2 bad input or usage, 3 a
 * failure inside the model. The models it serves are listed in models.c. */
#define _POSIX_C_SOURCE 200809L
#include "mg_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

extern const mg_rt_model *const mg_rt_models[];
extern const char *const mg_rt_weights_files[];
extern const int mg_rt_n_models;

#define MAX_IO 256

static const char *dtype_descr(mg_rt_dtype t) {
  switch (t) {
  case MG_RT_F32: return "<f4";
  case MG_RT_F64: return "<f8";
  case MG_RT_F16: return "<f2";
  case MG_RT_I8: return "|i1";
  case MG_RT_I16: return "<i2";
  case MG_RT_I32: return "<i4";
  case MG_RT_I64: return "<i8";
  case MG_RT_U8: return "|u1";
  case MG_RT_U16: return "<u2";
  case MG_RT_U32: return "<u4";
  case MG_RT_U64: return "<u8";
  case MG_RT_BOOL: return "|b1";
  case MG_RT_BF16: return "<f4"; /* numpy has no bfloat16: exchanged as float32 (bf16_*) */
  case MG_RT_STRING: return "U"; /* '<U<n>', n varies */
  }
  return NULL;
}

/* bfloat16 from float32, rounded to nearest even (NaN kept a quiet NaN), and the
 * exact widening back: the .npy files of a bfloat16 input or output hold float32. */
static uint16_t bf16_from_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
  return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}
static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Appends code point u as UTF-8 to out; returns the bytes written, 0 for a value
 * that is no Unicode scalar. */
static size_t utf8_put(unsigned long u, unsigned char *out) {
  if (u < 0x80) {
    out[0] = (unsigned char)u;
    return 1;
  }
  if (u < 0x800) {
    out[0] = (unsigned char)(0xc0 | u >> 6);
    out[1] = (unsigned char)(0x80 | (u & 0x3f));
    return 2;
  }
  if ((u >= 0xd800 && u < 0xe000) || u > 0x10ffff) return 0;
  if (u < 0x10000) {
    out[0] = (unsigned char)(0xe0 | u >> 12);
    out[1] = (unsigned char)(0x80 | (u >> 6 & 0x3f));
    out[2] = (unsigned char)(0x80 | (u & 0x3f));
    return 3;
  }
  out[0] = (unsigned char)(0xf0 | u >> 18);
  out[1] = (unsigned char)(0x80 | (u >> 12 & 0x3f));
  out[2] = (unsigned char)(0x80 | (u >> 6 & 0x3f));
  out[3] = (unsigned char)(0x80 | (u & 0x3f));
  return 4;
}

/* The code point at *p (UTF-8), advancing *p; 0xFFFD for a malformed byte, which
 * is skipped alone (model strings come from valid UTF-8 inputs and attributes). */
static unsigned long utf8_get(const unsigned char **p) {
  const unsigned char *q = *p;
  unsigned long u;
  int more, k;
  if (q[0] < 0x80) u = q[0], more = 0;
  else if ((q[0] & 0xe0) == 0xc0) u = q[0] & 0x1fu, more = 1;
  else if ((q[0] & 0xf0) == 0xe0) u = q[0] & 0x0fu, more = 2;
  else if ((q[0] & 0xf8) == 0xf0) u = q[0] & 0x07u, more = 3;
  else {
    *p = q + 1;
    return 0xfffd;
  }
  for (k = 1; k <= more; k++) {
    if ((q[k] & 0xc0) != 0x80) {
      *p = q + 1;
      return 0xfffd;
    }
    u = u << 6 | (q[k] & 0x3fu);
  }
  *p = q + more + 1;
  return u;
}

/* Reads count '<U<width>' elements (UTF-32, byte order swap if big) from f into
 * one malloc'd block: count const char * pointers, then the UTF-8 strings they
 * point to. NULL after printing why. */
static void *read_unicode(FILE *f, const char *path, size_t count, size_t width, int big) {
  size_t unit = 4 * width, total, i, k, off;
  unsigned char *raw;
  char *block;
  const char **ptrs;
  if (width && count > ((size_t)-1 / 8) / unit) return NULL;
  total = count * unit;
  raw = (unsigned char *)malloc(total ? total : 1);
  /* each code point is at most 4 UTF-8 bytes: the block never outgrows this */
  block = (char *)malloc(count * sizeof(char *) + total + count + 1);
  if (!raw || !block || fread(raw, 1, total, f) != total) {
    fprintf(stderr, "runner: %s: truncated data\n", path);
    free(raw);
    free(block);
    return NULL;
  }
  ptrs = (const char **)(void *)block;
  off = count * sizeof(char *);
  for (i = 0; i < count; i++) {
    size_t len = width;
    const unsigned char *e = raw + i * unit;
    unsigned long u;
#define CP(j) (big ? (unsigned long)e[4 * (j)] << 24 | (unsigned long)e[4 * (j) + 1] << 16 | \
                         (unsigned long)e[4 * (j) + 2] << 8 | e[4 * (j) + 3]                  \
                   : (unsigned long)e[4 * (j) + 3] << 24 | (unsigned long)e[4 * (j) + 2] << 16 | \
                         (unsigned long)e[4 * (j) + 1] << 8 | e[4 * (j)])
    while (len && CP(len - 1) == 0) len--;
    ptrs[i] = block + off;
    for (k = 0; k < len; k++) {
      size_t w;
      u = CP(k);
      w = u ? utf8_put(u, (unsigned char *)block + off) : 0;
      if (!w) {
        fprintf(stderr, "runner: %s: string %lu holds code point 0x%lx, which UTF-8 cannot carry\n", path,
                (unsigned long)i, u);
        free(raw);
        free(block);
        return NULL;
      }
      off += w;
    }
#undef CP
    block[off++] = 0;
  }
  free(raw);
  return block;
}

static void usage(FILE *f) {
  fprintf(f, "usage: runner [--model NAME] [--weights FILE] --input NAME=x.npy... [--output-dir D]\n"
             "              [--repeat N [--cpu-time]] [--threads N] [--trace DIR] [--profile N]\n"
             "              [--max-dim NAME=N] [--list]\n"
             "Runs the generated model on .npy inputs and writes D/<output>.npy; with --repeat N\n"
             "also times N runs after one warm-up and prints 'median_ms X' (--cpu-time: also\n"
             "'median_cpu_ms X', CPU time per run); --trace DIR writes every node's output to\n"
             "DIR/<value name>.npy; --profile N runs N more times and prints each node's median\n"
             "time (--cpu-time: CPU time), slowest first, as 'profile RANK MS SHARE%% NAME'.\n"
             "A bfloat16 input or output is exchanged as a float32 .npy (numpy has no\n"
             "bfloat16), rounded to nearest even. A model with a symbolic batch runs at the\n"
             "batch of its inputs' leading axis; --max-dim BATCH=N initialises it for up to N\n"
             "(a larger input batch then fails: exit 3). --trace and --profile take batch 1.\n");
}

/* The leading dim of the .npy at path (0 for a scalar), or -1 if it cannot be read. */
/* Dim axis of an .npy file's shape; -1 when it has none or cannot be read. */
static long long npy_dim(const char *path, int axis) {
  FILE *f = fopen(path, "rb");
  char header[4096], *p;
  size_t n;
  long long d = -1;
  if (!f) return -1;
  n = fread(header, 1, sizeof header - 1, f);
  fclose(f);
  header[n] = 0;
  if (n < 10 || memcmp(header, "\x93NUMPY", 6)) return -1;
  p = strstr(header + 10, "'shape':");
  if (p && (p = strchr(p, '('))) {
    for (p++; *p == ' '; p++) continue;
    for (; axis > 0 && *p >= '0' && *p <= '9'; axis--) {
      while (*p >= '0' && *p <= '9') p++;
      while (*p == ',' || *p == ' ') p++;
    }
    d = axis > 0 ? -1 : *p == ')' ? 0 : *p >= '0' && *p <= '9' ? strtoll(p, NULL, 10) : -1;
  }
  return d;
}

/* Reads an .npy whose dtype and shape must equal io's; returns a malloc'd buffer
 * of io->bytes bytes, or NULL after printing why. */
static void *read_npy(const char *path, const mg_rt_io *io) {
  FILE *f = fopen(path, "rb");
  unsigned char pre[10];
  char *header = NULL, want[512], *p;
  void *data = NULL;
  size_t hlen, uwidth = 0;
  int k, ubig = 0;
  if (!f) {
    fprintf(stderr, "runner: cannot open %s\n", path);
    return NULL;
  }
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) goto bad;
  if (pre[6] == 1) hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  else {
    unsigned char more[2];
    if (fread(more, 1, 2, f) != 2) goto bad;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)more[0] << 16 | (size_t)more[1] << 24;
  }
  if (hlen > 1 << 20) goto bad;
  header = malloc(hlen + 1);
  if (!header || fread(header, 1, hlen, f) != hlen) goto bad;
  header[hlen] = 0;
  /* compare the parts that matter, whitespace-insensitively */
  if (!dtype_descr(io->dtype)) {
    fprintf(stderr, "runner: input '%s' has a dtype .npy cannot hold\n", io->name);
    goto fail;
  }
  p = strstr(header, "'descr':");
  if (io->dtype == MG_RT_STRING) {
    char *q = p ? strchr(p + 8, '\'') : NULL;
    if (!q || (q[1] != '<' && q[1] != '>' && q[1] != '=' && q[1] != '|') || q[2] != 'U' || q[3] < '1' || q[3] > '9') {
      fprintf(stderr, "runner: %s: input '%s' wants a unicode array ('<U<n>')\n", path, io->name);
      goto fail;
    }
    uwidth = strtoul(q + 3, NULL, 10);
    ubig = q[1] == '>';
  } else if (!p || !strstr(p, dtype_descr(io->dtype)) || strstr(p, dtype_descr(io->dtype)) - p > 16) {
    fprintf(stderr, "runner: %s: input '%s' wants dtype %s\n", path, io->name, dtype_descr(io->dtype));
    goto fail;
  }
  if (!strstr(header, "'fortran_order': False")) {
    fprintf(stderr, "runner: %s: Fortran-order arrays are not accepted\n", path);
    goto fail;
  }
  p = strstr(header, "'shape':");
  if (!p) goto bad;
  p = strchr(p, '(');
  if (!p) goto bad;
  {
    char got[512];
    size_t n = 0;
    for (p++; *p && *p != ')' && n + 1 < sizeof got; p++)
      if (*p != ' ') got[n++] = *p;
    got[n] = 0;
    if (n && got[n - 1] == ',') got[--n] = 0;
    want[0] = 0;
    for (k = 0; k < io->rank; k++) {
      char d[32];
      sprintf(d, "%s%lld", k ? "," : "", (long long)io->shape[k]);
      strcat(want, d);
    }
    if (strcmp(got, want)) {
      fprintf(stderr, "runner: %s: input '%s' wants shape (%s), got (%s)\n", path, io->name, want, got);
      goto fail;
    }
  }
  if (io->dtype == MG_RT_STRING) {
    data = read_unicode(f, path, io->bytes / sizeof(char *), uwidth, ubig);
    if (!data) goto fail;
    free(header);
    fclose(f);
    return data;
  }
  if (io->dtype == MG_RT_BF16) { /* float32 in the file, rounded to bfloat16 */
    size_t n = io->bytes / 2, i;
    float *wide = malloc(n ? n * 4 : 1);
    data = malloc(io->bytes ? io->bytes : 1);
    if (!wide || !data || fread(wide, 4, n, f) != n) {
      free(wide);
      fprintf(stderr, "runner: %s: truncated data\n", path);
      goto fail;
    }
    for (i = 0; i < n; i++) ((uint16_t *)data)[i] = bf16_from_f32(wide[i]);
    free(wide);
    free(header);
    fclose(f);
    return data;
  }
  data = malloc(io->bytes ? io->bytes : 1);
  if (!data || fread(data, 1, io->bytes, f) != io->bytes) {
    fprintf(stderr, "runner: %s: truncated data\n", path);
    goto fail;
  }
  free(header);
  fclose(f);
  return data;
bad:
  fprintf(stderr, "runner: %s is not a valid .npy file\n", path);
fail:
  free(header);
  free(data);
  fclose(f);
  return NULL;
}

static void safe_name(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++)
    out[k++] = (*in == '/' || *in == '\\' || *in == ':' || (unsigned char)*in < 32) ? '_' : *in;
  out[k] = 0;
  if (!k || !strcmp(out, ".") || !strcmp(out, "..")) sprintf(out, "output");
}

/* The file name (without .npy) of output i of md, as migc run names it
 * (cli_output_file): safe_name's, or "NAME-i" when an earlier output's safe name
 * is the same, so no output overwrites another. */
static void output_file(const mg_rt_model *md, int i, char *out, size_t n) {
  char other[512];
  int j;
  safe_name(md->outputs[i].name, out, n);
  for (j = 0; j < i; j++) {
    safe_name(md->outputs[j].name, other, sizeof other);
    if (!strcmp(out, other)) {
      sprintf(out + strlen(out), "-%d", i);
      return;
    }
  }
}

/* Writes D/output_names.json, each output's name to its file, when two outputs'
 * safe names are the same (output_file then told them apart). 0, or -1. */
static int write_output_names(const char *dir, const mg_rt_model *md) {
  char a[520], b[520], path[4096];
  int i, j, clash = 0;
  FILE *f;
  for (i = 0; i < md->n_outputs && !clash; i++)
    for (j = 0; j < i && !clash; j++) {
      safe_name(md->outputs[i].name, a, sizeof a);
      safe_name(md->outputs[j].name, b, sizeof b);
      clash = !strcmp(a, b);
    }
  if (!clash) return 0;
  sprintf(path, "%.4000s/output_names.json", dir);
  if (!(f = fopen(path, "w"))) return -1;
  fputs("{", f);
  for (i = 0; i < md->n_outputs; i++) {
    const unsigned char *q = (const unsigned char *)md->outputs[i].name;
    fputs(i ? ",\n  \"" : "\n  \"", f);
    for (; *q; q++) /* JSON string escapes; UTF-8 passes through */
      if (*q == '"' || *q == '\\') fprintf(f, "\\%c", *q);
      else if (*q < 32) fprintf(f, "\\u%04x", *q);
      else fputc(*q, f);
    output_file(md, i, a, sizeof a - 4);
    fprintf(f, "\": \"%s.npy\"", a); /* safe names hold no quote or backslash */
  }
  fputs("\n}\n", f);
  return fclose(f) ? -1 : 0;
}

/* Writes D/<name>.npy (name: file, or io's safe name when NULL) for data of io's
 * dtype in dims (io->rank of them; io's own shape when NULL). Strings are written
 * as '<U<n>', n the longest. */
static int write_npy(const char *dir, const mg_rt_io *io, const char *file, const void *data,
                     const int64_t *dims) {
  char name[512], path[4096], tmp[4200], header[1024], shape[512] = "", descr[32];
  int k;
  size_t len, total, count = 1, width = 1, i;
  FILE *f;
  if (!dims) dims = io->shape;
  for (k = 0; k < io->rank; k++) count *= (size_t)dims[k];
  if (!dtype_descr(io->dtype)) {
    fprintf(stderr, "runner: output '%s' has a dtype .npy cannot hold\n", io->name);
    return -1;
  }
  if (file) sprintf(name, "%.500s", file);
  else safe_name(io->name, name, sizeof name);
  sprintf(path, "%.3000s/%.500s.npy", dir, name);
  sprintf(tmp, "%s.tmp", path);
  for (k = 0; k < io->rank; k++) {
    char d[32];
    sprintf(d, "%lld,%s", (long long)dims[k], io->rank > 1 && k + 1 < io->rank ? " " : "");
    strcat(shape, d);
  }
  if (io->rank > 1) shape[strlen(shape) - 1] = 0; /* numpy writes (2, 3) but (2,) */
  if (io->dtype == MG_RT_STRING) {
    for (i = 0; i < count; i++) {
      const unsigned char *q = (const unsigned char *)((const char *const *)data)[i];
      size_t n = 0;
      while (*q) utf8_get(&q), n++;
      if (n > width) width = n;
    }
    sprintf(descr, "<U%lu", (unsigned long)width);
  } else {
    sprintf(descr, "%s", dtype_descr(io->dtype));
  }
  len = (size_t)sprintf(header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
  total = 10 + len + 1;
  while (total % 64) header[len++] = ' ', total++;
  header[len++] = '\n';
  f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "runner: cannot write %s\n", tmp);
    return -1;
  }
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc((int)(len & 0xff), f);
  fputc((int)(len >> 8), f);
  fwrite(header, 1, len, f);
  if (io->dtype == MG_RT_STRING) {
    for (i = 0; i < count; i++) { /* UTF-32LE, NUL-padded to width */
      const unsigned char *q = (const unsigned char *)((const char *const *)data)[i];
      size_t n = 0;
      for (; n < width; n++) {
        unsigned long u = *q ? utf8_get(&q) : 0;
        unsigned char b[4];
        b[0] = (unsigned char)(u & 0xff);
        b[1] = (unsigned char)(u >> 8 & 0xff);
        b[2] = (unsigned char)(u >> 16 & 0xff);
        b[3] = (unsigned char)(u >> 24);
        fwrite(b, 1, 4, f);
      }
    }
  } else if (io->dtype == MG_RT_BF16) {
    for (i = 0; i < count; i++) {
      float w = bf16_to_f32(((const uint16_t *)data)[i]);
      fwrite(&w, 4, 1, f);
    }
  } else {
    fwrite(data, 1, count * mg_rt_dtype_size(io->dtype), f);
  }
  if (ferror(f) | fclose(f) || rename(tmp, path)) {
    remove(tmp);
    fprintf(stderr, "runner: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

/* mkdir -p; 0 when dir exists afterwards. */
static int make_dirs(const char *dir) {
  char buf[4096];
  size_t i, n = strlen(dir);
  if (n >= sizeof buf) return -1;
  memcpy(buf, dir, n + 1);
  for (i = 1; i < n; i++)
    if (buf[i] == '/') {
      buf[i] = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) return -1;
      buf[i] = '/';
    }
  return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

typedef struct {
  const char *dir;
  int failed;
} trace_ctx;

static void trace_write(void *ctx, const mg_rt_io *what, const void *data) {
  trace_ctx *t = ctx;
  if (!t->failed && write_npy(t->dir, what, NULL, data, NULL)) t->failed = 1;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* CPU time of the process (all its threads), for timing on a shared machine: a
 * run that waits for a core does not count. */
static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* --profile: the trace hook records the time since the previous hook returned,
 * so a node's share is its own work (the hook's cost is left out). */
typedef struct {
  double (*clock)(void); /* now_ms, or cpu_ms with --cpu-time */
  double last;
  int k, cap;          /* hooks this run; room in ms[] and name[] */
  double *ms;          /* by hook index */
  const char **name;
} prof_ctx;

static void prof_hook(void *ctx, const mg_rt_io *what, const void *data) {
  prof_ctx *p = ctx;
  (void)data;
  if (p->k < p->cap) {
    p->ms[p->k] = p->clock() - p->last;
    p->name[p->k] = what->name;
  }
  p->k++;
  p->last = p->clock();
}

typedef struct {
  double ms;
  const char *name;
} prof_row;

static int cmp_row_desc(const void *a, const void *b) {
  double x = ((const prof_row *)a)->ms, y = ((const prof_row *)b)->ms;
  return x > y ? -1 : x < y;
}

/* Runs md `runs` times through prof_hook and prints every node's median time,
 * slowest first. 0, an MG_RT_* code (from the model, or MG_RT_ENOMEM), or -1 after
 * printing why. */
static int profile(const mg_rt_model *md, void *inst, void *const *inputs, void *const *outputs, int runs,
                   int cpu_time) {
  prof_ctx p = {0};
  double *all = NULL, *col = NULL, total = 0;
  prof_row *rows = NULL;
  int r, k, nodes, rc;
  p.clock = cpu_time ? cpu_ms : now_ms;
  p.last = p.clock(); /* a first run counts the hooks */
  rc = md->run_trace(inst, (const void *const *)inputs, outputs, prof_hook, &p);
  nodes = p.k;
  if (rc || !nodes) return rc;
  all = malloc(sizeof(double) * (size_t)nodes * (size_t)runs);
  col = malloc(sizeof(double) * (size_t)runs);
  rows = malloc(sizeof(prof_row) * (size_t)nodes);
  p.name = malloc(sizeof(const char *) * (size_t)nodes);
  if (!all || !col || !rows || !p.name) {
    rc = MG_RT_ENOMEM;
    goto out;
  }
  p.cap = nodes;
  for (r = 0; r < runs && !rc; r++) {
    p.ms = all + (size_t)r * nodes;
    p.k = 0;
    p.last = p.clock();
    rc = md->run_trace(inst, (const void *const *)inputs, outputs, prof_hook, &p);
    if (!rc && p.k != nodes) { /* a model runs the same nodes every time */
      fprintf(stderr, "runner: --profile: run %d reported %d nodes, the first %d\n", r + 1, p.k, nodes);
      rc = -1;
    }
  }
  if (rc) goto out;
  for (k = 0; k < nodes; k++) {
    for (r = 0; r < runs; r++) col[r] = all[(size_t)r * nodes + k];
    qsort(col, (size_t)runs, sizeof *col, cmp_double);
    rows[k].ms = runs % 2 ? col[runs / 2] : (col[runs / 2 - 1] + col[runs / 2]) / 2;
    rows[k].name = p.name[k];
    total += rows[k].ms;
  }
  qsort(rows, (size_t)nodes, sizeof *rows, cmp_row_desc);
  printf("profile: %d nodes, median of %d runs, %.4f ms %s in all\n", nodes, runs, total,
         cpu_time ? "of CPU time" : "wall");
  for (k = 0; k < nodes; k++)
    printf("profile %d %.4f %.1f%% %s\n", k + 1, rows[k].ms, total > 0 ? 100 * rows[k].ms / total : 0,
           rows[k].name);
out:
  free(all);
  free(col);
  free(rows);
  free((void *)p.name);
  return rc;
}

/* One inference: at dims for a model with a symbolic batch, else at its shapes. */
static int run_model(const mg_rt_model *md, void *inst, const int64_t *dims, void **inputs, void **outputs) {
  if (md->n_dims) return md->run_dims(inst, dims, (const void *const *)inputs, outputs);
  return md->run(inst, (const void *const *)inputs, outputs);
}

int main(int argc, char **argv) {
  const char *model_name = NULL, *weights = NULL, *outdir = ".", *trace_dir = NULL;
  const char *in_names[MAX_IO], *in_paths[MAX_IO];
  void *inputs[MAX_IO] = {0}, *outputs[MAX_IO] = {0};
  int n_in = 0, repeat = 0, list = 0, cpu_time = 0, threads = 0, profile_runs = 0, i, rc = 0;
  const mg_rt_model *md = NULL;
  const char *wfile = NULL, *max_dim[2] = {NULL, NULL};
  int n_max_dim = 0, d;
  /* a symbolic batch: the actual one, the init maximum, and the batch inputs'
   * and outputs' descriptions at it */
  int64_t dims[2] = {1, 1}, max_dims[2] = {0, 0};
  int got_dim[2] = {0, 0};
  mg_rt_io ios[2 * MAX_IO];
  int64_t *shapes[2 * MAX_IO] = {0};
  char wpath[4096];
  void *inst = NULL;
  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || eq == argv[i] || n_in >= MAX_IO) {
        fprintf(stderr, "runner: --input wants NAME=FILE.npy, got '%s'\n", argv[i]);
        return 2;
      }
      *eq = 0;
      in_names[n_in] = argv[i];
      in_paths[n_in++] = eq + 1;
    } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
      outdir = argv[++i];
    } else if (!strcmp(argv[i], "--cpu-time")) {
      cpu_time = 1;
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > 64) {
        fprintf(stderr, "runner: --threads wants a count from 1 to 64\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = atoi(argv[++i]);
      if (repeat < 1 || repeat > 1000000) {
        fprintf(stderr, "runner: --repeat wants a count from 1 to 1000000\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
      model_name = argv[++i];
    } else if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
      weights = argv[++i];
    } else if (!strcmp(argv[i], "--profile") && i + 1 < argc) {
      profile_runs = atoi(argv[++i]);
      if (profile_runs < 1 || profile_runs > 100000) {
        fprintf(stderr, "runner: --profile wants a count from 1 to 100000\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
      trace_dir = argv[++i];
    } else if (!strcmp(argv[i], "--max-dim") && i + 1 < argc && n_max_dim < 2) {
      max_dim[n_max_dim++] = argv[++i];
    } else if (!strcmp(argv[i], "--list")) {
      list = 1;
    } else {
      fprintf(stderr, "runner: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (list) {
    for (i = 0; i < mg_rt_n_models; i++) printf("%s\n", mg_rt_models[i]->name);
    return 0;
  }
  for (i = 0; i < mg_rt_n_models; i++)
    if (!model_name || !strcmp(model_name, mg_rt_models[i]->name)) {
      md = mg_rt_models[i];
      wfile = mg_rt_weights_files[i];
      break;
    }
  if (!md || (!model_name && mg_rt_n_models > 1)) {
    fprintf(stderr, "runner: %s\n", model_name ? "no such model (see --list)" : "several models: pick one with --model");
    return 2;
  }
  if (md->n_inputs > MAX_IO || md->n_outputs > MAX_IO) {
    fprintf(stderr, "runner: too many inputs or outputs\n");
    return 2;
  }
  for (i = 0; i < md->n_inputs + md->n_outputs; i++) ios[i] = i < md->n_inputs ? md->inputs[i] : md->outputs[i - md->n_inputs];
  for (d = 0; d < n_max_dim; d++) {
    int k, hit = -1;
    for (k = 0; k < md->n_dims && hit < 0; k++) {
      size_t len = strlen(md->dim_names[k]);
      if (!strncmp(max_dim[d], md->dim_names[k], len) && max_dim[d][len] == '=') hit = k;
    }
    if (hit < 0 || (max_dims[hit] = atoll(strchr(max_dim[d], '=') + 1)) < 1 || trace_dir) {
      fprintf(stderr, "runner: --max-dim wants %s%s%s%s=N (N >= 1), without --trace\n",
              md->n_dims ? md->dim_names[0] : "", md->n_dims > 1 ? " or " : "", md->n_dims > 1 ? md->dim_names[1] : "",
              md->n_dims ? "" : "a symbolic dim of the model (it has none)");
      return 2;
    }
  }
  /* the actual dims: the batch leads its inputs, the sequence is at in_seq's axis */
  for (i = 0; md->n_dims && i < md->n_inputs; i++) {
    for (d = 0; d < md->n_dims; d++) {
      int j, axis = d ? md->in_seq[i] : md->in_batch[i] ? 0 : -1;
      long long got = -1;
      if (axis < 0) continue;
      for (j = 0; j < n_in; j++)
        if (!strcmp(in_names[j], md->inputs[i].name)) got = npy_dim(in_paths[j], axis);
      if (got < 1 || (got_dim[d] && got != dims[d])) {
        fprintf(stderr, "runner: input '%s': its axis %d is the symbolic '%s', and %s\n", md->inputs[i].name, axis,
                md->dim_names[d], got < 1 ? "its file gives none (or 0)" : "another input gives another length");
        rc = 2;
        goto done;
      }
      dims[d] = got;
      got_dim[d] = 1;
    }
  }
  for (i = 0; md->n_dims && i < md->n_inputs + md->n_outputs; i++) {
    int k, at_seq = md->n_dims < 2 ? -1 : i < md->n_inputs ? md->in_seq[i] : md->out_seq[i - md->n_inputs];
    size_t numel = 1, ref = 1;
    if ((!(i < md->n_inputs ? md->in_batch[i] : md->out_batch[i - md->n_inputs]) && at_seq < 0) || ios[i].rank < 1)
      continue;
    if (!(shapes[i] = malloc(sizeof(int64_t) * (size_t)ios[i].rank))) {
      rc = 3;
      goto done;
    }
    for (k = 0; k < ios[i].rank; k++) shapes[i][k] = ios[i].shape[k];
    if (i < md->n_inputs ? md->in_batch[i] : md->out_batch[i - md->n_inputs]) shapes[i][0] = dims[0];
    if (at_seq >= 0) shapes[i][at_seq] = dims[1];
    for (k = 0; k < ios[i].rank; k++) numel *= (size_t)shapes[i][k], ref *= (size_t)ios[i].shape[k];
    ios[i].shape = shapes[i];
    ios[i].bytes = ref ? ios[i].bytes / ref * numel : 0;
  }
  for (d = 0; d < md->n_dims; d++)
    if (!max_dims[d]) max_dims[d] = dims[d];
  if (md->n_dims && (trace_dir || profile_runs) && (dims[0] != 1 || (md->n_dims > 1 && shapes[0] &&
                                                                     md->in_seq[0] >= 0 &&
                                                                     dims[1] != md->inputs[0].shape[md->in_seq[0]]))) {
    /* run_trace runs the shapes of the model's description */
    fprintf(stderr, "runner: --%s runs batch 1%s; the inputs hold batch %lld\n", trace_dir ? "trace" : "profile",
            md->n_dims > 1 ? " at the shortest sequence" : "", (long long)dims[0]);
    rc = 2;
    goto done;
  }
  for (i = 0; i < md->n_inputs; i++) {
    int j, found = -1;
    for (j = 0; j < n_in; j++)
      if (!strcmp(in_names[j], md->inputs[i].name)) found = j;
    if (found < 0) {
      fprintf(stderr, "runner: missing --input %s=FILE.npy\n", md->inputs[i].name);
      rc = 2;
      goto done;
    }
    inputs[i] = read_npy(in_paths[found], &ios[i]);
    if (!inputs[i]) {
      rc = 2;
      goto done;
    }
  }
  for (i = 0; i < n_in; i++) {
    int j, known = 0;
    for (j = 0; j < md->n_inputs; j++) known |= !strcmp(in_names[i], md->inputs[j].name);
    if (!known) {
      fprintf(stderr, "runner: the model has no input named '%s'\n", in_names[i]);
      rc = 2;
      goto done;
    }
  }
  for (i = 0; i < md->n_outputs; i++) {
    outputs[i] = malloc(ios[md->n_inputs + i].bytes ? ios[md->n_inputs + i].bytes : 1);
    if (!outputs[i]) {
      fprintf(stderr, "runner: out of memory\n");
      rc = 3;
      goto done;
    }
  }
  if (!weights && wfile) { /* next to the runner */
    const char *slash = strrchr(argv[0], '/');
    if (slash) sprintf(wpath, "%.*s/%.200s", (int)(slash - argv[0] > 3800 ? 3800 : slash - argv[0]), argv[0], wfile);
    else sprintf(wpath, "%.200s", wfile);
    weights = wpath;
  }
  inst = calloc(1, md->instance_size);
  if (!inst) {
    fprintf(stderr, "runner: out of memory\n");
    rc = 3;
    goto done;
  }
  rc = md->n_dims ? md->init_dims(inst, weights, max_dims) : md->init(inst, weights);
  if (rc) {
    fprintf(stderr, "runner: cannot initialise the model%s%s: %s\n", weights ? " from " : "", weights ? weights : "",
            mg_rt_strerror(rc));
    free(inst);
    inst = NULL;
    rc = rc == MG_RT_EARG || rc == MG_RT_EIO || rc == MG_RT_EFORMAT || rc == MG_RT_ELAYOUT ? 2 : 3;
    goto done;
  }
  if (threads) {
    rc = md->set_threads ? md->set_threads(inst, threads) : threads == 1 ? MG_RT_OK : MG_RT_EARG;
    if (rc) {
      fprintf(stderr, "runner: cannot run on %d threads: %s (the project was converted for fewer: migc "
                      "convert --threads N)\n", threads, mg_rt_strerror(rc));
      rc = 2;
      goto done;
    }
  }
  if (trace_dir) {
    trace_ctx tc;
    tc.dir = trace_dir;
    tc.failed = 0;
    if (make_dirs(trace_dir)) {
      fprintf(stderr, "runner: cannot create %s\n", trace_dir);
      rc = 2;
      goto done;
    }
    rc = md->run_trace(inst, (const void *const *)inputs, outputs, trace_write, &tc);
    if (!rc && tc.failed) {
      rc = 2;
      goto done;
    }
  } else {
    rc = run_model(md, inst, dims, inputs, outputs);
  }
  if (rc) {
    fprintf(stderr, "runner: the model failed: %s\n", mg_rt_strerror(rc));
    rc = 3;
    goto done;
  }
  if (make_dirs(outdir)) {
    fprintf(stderr, "runner: cannot create %s\n", outdir);
    rc = 2;
    goto done;
  }
  for (i = 0; i < md->n_outputs; i++) {
    char file[520];
    output_file(md, i, file, sizeof file - 8);
    if (write_npy(outdir, &ios[md->n_inputs + i], file, outputs[i], md->output_dims ? md->output_dims(inst, i) : NULL)) {
      rc = 2;
      goto done;
    }
  }
  if (write_output_names(outdir, md)) {
    fprintf(stderr, "runner: cannot write %s/output_names.json\n", outdir);
    rc = 2;
    goto done;
  }
  if (repeat) {
    double *t = malloc(sizeof(double) * (size_t)repeat * 2), *ct = t + repeat;
    int r;
    if (!t) {
      rc = 3;
      goto done;
    }
    run_model(md, inst, dims, inputs, outputs); /* warm-up */
    for (r = 0; r < repeat; r++) {
      double t0 = now_ms(), c0 = cpu_ms();
      run_model(md, inst, dims, inputs, outputs);
      t[r] = now_ms() - t0;
      ct[r] = cpu_ms() - c0;
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    qsort(ct, (size_t)repeat, sizeof *ct, cmp_double);
    printf("median_ms %.4f\n", repeat % 2 ? t[repeat / 2] : (t[repeat / 2 - 1] + t[repeat / 2]) / 2);
    if (cpu_time)
      printf("median_cpu_ms %.4f\n", repeat % 2 ? ct[repeat / 2] : (ct[repeat / 2 - 1] + ct[repeat / 2]) / 2);
    free(t);
  }
  if (profile_runs) {
    rc = profile(md, inst, inputs, outputs, profile_runs, cpu_time);
    if (rc) {
      if (rc > 0) fprintf(stderr, "runner: --profile: %s\n", mg_rt_strerror(rc));
      rc = 3;
      goto done;
    }
  }
done:
  if (inst) {
    md->release(inst);
    free(inst);
  }
  for (i = 0; i < MAX_IO; i++) {
    free(inputs[i]);
    free(outputs[i]);
  }
  for (i = 0; i < 2 * MAX_IO; i++) free(shapes[i]);
  return rc;
}
