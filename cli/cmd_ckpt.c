/* migc ckpt dump FILE.ckpt [--json]
 * migc ckpt diff A.ckpt B.ckpt [--rtol R] [--atol A]
 *
 * Both read through ckpt_open (so they see exactly what the loader sees: split
 * tensors joined, the CRC trailer verified) and stream each tensor in bounded
 * blocks, so a multi-GB checkpoint needs a few MB of memory. */
#include "ckpt_internal.h"
#include "cli.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK_BYTES = 4 << 20 }; /* bytes read from a tensor at a time */

static void help(FILE *f) {
  fprintf(f,
          "usage: migc ckpt dump FILE.ckpt [--json]\n"
          "       migc ckpt diff A.ckpt B.ckpt [--rtol R] [--atol A]\n"
          "\n"
          "Reads MindSpore checkpoints as MindSpore's loader does: a tensor split over\n"
          "several Values is joined, and a CRC trailer (MindSpore >= 2.3) is verified.\n"
          "\n"
          "dump  lists every tensor: tag, tensor_type, shape, content bytes and the\n"
          "      CRC-32 of the content (as zlib and Python's binascii.crc32 compute it),\n"
          "      then a summary line.\n"
          "      --json   machine-readable output\n"
          "diff  compares two checkpoints by tag: tags in only one of them, dtype or\n"
          "      shape differences, and values beyond tolerance. Floating-point values\n"
          "      are compared as doubles, |a - b| <= atol + rtol * |b| (NaN equals NaN);\n"
          "      integers and bools exactly. One line per difference, then a summary.\n"
          "      --rtol R, --atol A   tolerances (default 0: exact)\n"
          "\n"
          "Exit status: 0 ok (diff: equal within tolerance), 1 diff found differences,\n"
          "2 bad usage or an unreadable or corrupt checkpoint, 3 internal error.\n");
}

/* Opens a checkpoint, printing its diagnostics (errors, or warnings about what
 * was skipped). NULL on failure. */
static wt_source *open_ckpt(const char *path) {
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = NULL;
  ckpt_open(path, &s, &d);
  cli_report(&d);
  mg_diags_free(&d);
  return s;
}

/* "[64, 3, 7, 7]" (or "[]" for a scalar) into buf. */
static const char *shape_str(const wt_tensor *t, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < t->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* CRC-32 of t's content, read in blocks through buf (BLOCK_BYTES). 0 on success. */
static int content_crc(const wt_source *s, const wt_tensor *t, unsigned char *buf, uint32_t *crc) {
  size_t es = mg_dtype_size(t->dtype);
  int64_t n = wt_numel(t), step = BLOCK_BYTES / (int64_t)es;
  uint32_t c = 0;
  mg_diags d;
  mg_diags_init(&d);
  for (int64_t k = 0; k < n; k += step) {
    int64_t cnt = n - k < step ? n - k : step;
    if (wt_read(s, t, k, cnt, buf, &d)) {
      cli_report(&d);
      mg_diags_free(&d);
      return -1;
    }
    c = wt_crc32(c, buf, (size_t)cnt * es);
  }
  mg_diags_free(&d);
  *crc = c;
  return 0;
}

/* A JSON string for a tag; tags that are not UTF-8 (jansson refuses those) are
 * given with their bytes above 0x7f as '?', so the output stays valid JSON. */
static json_t *tag_json(const char *tag) {
  json_t *j = json_string(tag);
  if (j) return j;
  char *copy = strdup(tag);
  if (!copy) return NULL;
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  j = json_string(copy);
  free(copy);
  return j;
}

/* migc ckpt dump: one line (or JSON object) per tensor, then a summary. */
static int ckpt_dump(int argc, char **argv) {
  const char *path = NULL;
  int as_json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) as_json = 1;
    else if (argv[i][0] == '-' || path) {
      fprintf(stderr, "migc ckpt dump: unexpected argument '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else path = argv[i];
  }
  if (!path) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  wt_source *s = open_ckpt(path);
  if (!s) return EXIT_BAD_INPUT;
  ckpt_info info;
  ckpt_source_info(s, &info);
  unsigned char *buf = malloc(BLOCK_BYTES);
  json_t *root = as_json ? json_object() : NULL, *list = as_json ? json_array() : NULL;
  int rc = EXIT_OK;
  if (!buf || (as_json && (!root || !list))) {
    fprintf(stderr, "migc ckpt dump: out of memory\n");
    rc = EXIT_INTERNAL;
    goto done;
  }
  int64_t elements = 0, bytes = 0;
  for (int i = 0; i < wt_count(s); i++) {
    const wt_tensor *t = wt_get(s, i);
    uint32_t crc;
    if (content_crc(s, t, buf, &crc)) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
    int64_t n = wt_numel(t), nb = n * (int64_t)mg_dtype_size(t->dtype);
    elements += n;
    bytes += nb;
    char shape[512];
    if (!as_json) {
      printf("%s  %s  %s  %lld bytes  crc32 %08x\n", t->name, wt_ms_type_name(t->dtype),
             shape_str(t, shape, sizeof shape), (long long)nb, crc);
      continue;
    }
    json_t *o = json_object(), *dims = json_array();
    for (int k = 0; k < t->rank; k++) json_array_append_new(dims, json_integer(t->dims[k]));
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", crc);
    json_object_set_new(o, "tag", tag_json(t->name));
    json_object_set_new(o, "dtype", json_string(wt_ms_type_name(t->dtype)));
    json_object_set_new(o, "shape", dims);
    json_object_set_new(o, "bytes", json_integer(nb));
    json_object_set_new(o, "crc32", json_string(hex));
    json_array_append_new(list, o);
  }
  if (as_json) {
    json_object_set_new(root, "file", json_string(path));
    json_object_set_new(root, "values", json_integer(info.n_values));
    json_object_set_new(root, "crc_trailer", json_boolean(info.has_crc));
    json_object_set_new(root, "elements", json_integer(elements));
    json_object_set_new(root, "content_bytes", json_integer(bytes));
    json_object_set_new(root, "tensors", list);
    list = NULL;
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text) {
      fprintf(stderr, "migc ckpt dump: cannot format JSON\n");
      rc = EXIT_INTERNAL;
      goto done;
    }
    printf("%s\n", text);
    free(text);
  } else {
    printf("%d tensors in %lld values, %lld elements, %lld content bytes; CRC trailer: %s\n", wt_count(s),
           (long long)info.n_values, (long long)elements, (long long)bytes, info.has_crc ? "verified" : "none");
  }
done:
  json_decref(list);
  json_decref(root);
  free(buf);
  wt_close(s);
  return rc;
}

/* Element k of a float tensor's raw block as a double. */
static double as_double(mg_dtype t, const unsigned char *p, int64_t k) {
  switch (t) {
    case MG_F32: { float v; memcpy(&v, p + 4 * k, 4); return v; }
    case MG_F64: { double v; memcpy(&v, p + 8 * k, 8); return v; }
    case MG_F16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return mg_f16_to_f32(v); }
    case MG_BF16: { uint16_t v; memcpy(&v, p + 2 * k, 2); return mg_bf16_to_f32(v); }
    default: return 0;
  }
}

/* Element k of an integer or bool block, as text (for a difference report). */
static void int_str(mg_dtype t, const unsigned char *p, int64_t k, char *buf, size_t n) {
  size_t es = mg_dtype_size(t);
  uint64_t u = 0;
  memcpy(&u, p + (size_t)k * es, es); /* little-endian host, as the file */
  if (mg_dtype_is_signed(t) && es < 8 && (u >> (8 * es - 1)) & 1) u |= ~0ull << (8 * es);
  if (mg_dtype_is_signed(t)) snprintf(buf, n, "%lld", (long long)u);
  else snprintf(buf, n, "%llu", (unsigned long long)u);
}

typedef struct {
  int64_t n_diff, worst_at;
  double worst;   /* largest |a - b| among floats beyond tolerance */
  char a[32], b[32];
} value_diff;

/* Compares the values of two tensors of one dtype and shape in blocks. 0 when
 * read (filling *vd), -1 on a read error (reported). */
static int compare_values(const wt_source *sa, const wt_tensor *ta, const wt_source *sb, const wt_tensor *tb,
                          double rtol, double atol, unsigned char *ba, unsigned char *bb, value_diff *vd) {
  memset(vd, 0, sizeof *vd);
  vd->worst = -1;
  size_t es = mg_dtype_size(ta->dtype);
  int64_t n = wt_numel(ta), step = BLOCK_BYTES / (int64_t)es;
  int is_float = mg_dtype_is_float(ta->dtype);
  mg_diags d;
  mg_diags_init(&d);
  for (int64_t k0 = 0; k0 < n; k0 += step) {
    int64_t cnt = n - k0 < step ? n - k0 : step;
    if (wt_read(sa, ta, k0, cnt, ba, &d) || wt_read(sb, tb, k0, cnt, bb, &d)) {
      cli_report(&d);
      mg_diags_free(&d);
      return -1;
    }
    if (!memcmp(ba, bb, (size_t)cnt * es)) continue; /* the common case: identical bytes */
    for (int64_t k = 0; k < cnt; k++) {
      if (is_float) {
        double a = as_double(ta->dtype, ba, k), b = as_double(ta->dtype, bb, k);
        if (a == b || (isnan(a) && isnan(b))) continue;
        double diff = fabs(a - b);
        if (diff <= atol + rtol * fabs(b)) continue;
        if (isnan(diff)) diff = INFINITY; /* NaN against a number: as far apart as it gets */
        if (vd->n_diff++ == 0 || diff > vd->worst) {
          vd->worst = diff;
          vd->worst_at = k0 + k;
          snprintf(vd->a, sizeof vd->a, "%.9g", a);
          snprintf(vd->b, sizeof vd->b, "%.9g", b);
        }
      } else if (memcmp(ba + (size_t)k * es, bb + (size_t)k * es, es)) {
        if (vd->n_diff++ == 0) {
          vd->worst_at = k0 + k;
          int_str(ta->dtype, ba, k, vd->a, sizeof vd->a);
          int_str(ta->dtype, bb, k, vd->b, sizeof vd->b);
        }
      }
    }
  }
  mg_diags_free(&d);
  return 0;
}

/* qsort/bsearch order of tensor pointers by name. */
static int by_name(const void *x, const void *y) {
  return strcmp((*(const wt_tensor *const *)x)->name, (*(const wt_tensor *const *)y)->name);
}

/* Parses a tolerance: a finite, non-negative number. */
static int parse_tol(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v) || v < 0) return -1;
  *out = v;
  return 0;
}

/* migc ckpt diff: differences by tag, one line each, then a summary. */
static int ckpt_diff(int argc, char **argv) {
  const char *pa = NULL, *pb = NULL;
  double rtol = 0, atol = 0;
  for (int i = 1; i < argc; i++) {
    if ((!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) && i + 1 < argc) {
      if (parse_tol(argv[i + 1], argv[i][2] == 'r' ? &rtol : &atol)) {
        fprintf(stderr, "migc ckpt diff: %s wants a non-negative number, got '%s'\n", argv[i], argv[i + 1]);
        return EXIT_BAD_INPUT;
      }
      i++;
    } else if (argv[i][0] == '-' || (pa && pb)) {
      fprintf(stderr, "migc ckpt diff: unexpected argument '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!pa) pa = argv[i];
    else pb = argv[i];
  }
  if (!pb) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  wt_source *sa = open_ckpt(pa), *sb = sa ? open_ckpt(pb) : NULL;
  if (!sb) {
    wt_close(sa);
    return EXIT_BAD_INPUT;
  }
  int na = wt_count(sa), nb = wt_count(sb), rc = EXIT_OK;
  const wt_tensor **index = malloc(sizeof *index * (size_t)nb);
  char *matched = calloc((size_t)nb + 1, 1);
  unsigned char *ba = malloc(BLOCK_BYTES), *bb = malloc(BLOCK_BYTES);
  if (!index || !matched || !ba || !bb) {
    fprintf(stderr, "migc ckpt diff: out of memory\n");
    rc = EXIT_INTERNAL;
    goto done;
  }
  for (int i = 0; i < nb; i++) index[i] = wt_get(sb, i);
  qsort(index, (size_t)nb, sizeof *index, by_name);
  int equal = 0, differ = 0, only_a = 0, only_b = 0;
  for (int i = 0; i < na; i++) {
    const wt_tensor *ta = wt_get(sa, i), **hit = bsearch(&ta, index, (size_t)nb, sizeof *index, by_name);
    if (!hit) {
      printf("only in A: %s\n", ta->name);
      only_a++;
      continue;
    }
    const wt_tensor *tb = *hit;
    matched[tb - wt_get(sb, 0)] = 1; /* its index in B's file order */
    char s1[512], s2[512];
    if (ta->dtype != tb->dtype) {
      printf("dtype differs: %s: %s vs %s\n", ta->name, wt_ms_type_name(ta->dtype), wt_ms_type_name(tb->dtype));
      differ++;
      continue;
    }
    if (ta->rank != tb->rank || memcmp(ta->dims, tb->dims, sizeof(int64_t) * (size_t)ta->rank)) {
      printf("shape differs: %s: %s vs %s\n", ta->name, shape_str(ta, s1, sizeof s1), shape_str(tb, s2, sizeof s2));
      differ++;
      continue;
    }
    value_diff vd;
    if (compare_values(sa, ta, sb, tb, rtol, atol, ba, bb, &vd)) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
    if (!vd.n_diff) {
      equal++;
      continue;
    }
    differ++;
    printf("values differ: %s: %lld of %lld elements", ta->name, (long long)vd.n_diff, (long long)wt_numel(ta));
    if (mg_dtype_is_float(ta->dtype))
      printf(" beyond tolerance; largest |a - b| = %.9g at element %lld (a=%s, b=%s)\n", vd.worst,
             (long long)vd.worst_at, vd.a, vd.b);
    else
      printf("; first at element %lld (a=%s, b=%s)\n", (long long)vd.worst_at, vd.a, vd.b);
  }
  for (int i = 0; i < nb; i++) /* in B's file order */
    if (!matched[i]) {
      printf("only in B: %s\n", wt_get(sb, i)->name);
      only_b++;
    }
  printf("%d tensors compared: %d equal, %d differ; %d only in A, %d only in B\n", equal + differ, equal, differ,
         only_a, only_b);
  rc = differ || only_a || only_b ? EXIT_PARITY : EXIT_OK;
done:
  free(index);
  free(matched);
  free(ba);
  free(bb);
  wt_close(sa);
  wt_close(sb);
  return rc;
}

int cmd_ckpt(int argc, char **argv) {
  if (argc < 2) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  if (!strcmp(argv[1], "dump")) return ckpt_dump(argc - 1, argv + 1);
  if (!strcmp(argv[1], "diff")) return ckpt_diff(argc - 1, argv + 1);
  fprintf(stderr, "migc ckpt: unknown subcommand '%s' (dump or diff)\n", argv[1]);
  help(stderr);
  return EXIT_BAD_INPUT;
}
