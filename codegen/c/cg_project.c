/* The files of a generated CPU project: model.h, model.c, the weights, the
 * runtime sources, the runner and the build files. Each is written to a
 * temporary name and renamed into place, so a failed conversion never leaves a
 * half-written file under a final name. */
#include "cg_internal.h"
#include "arena.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MIGC_SOURCE_DIR
#define MIGC_SOURCE_DIR "."
#endif

/* Payload offset in the weights file; the header is magic, payload bytes, hash,
 * the version of the prepared-weights layout (MG_RT_PACK_VERSION, 0 when no
 * weights are prepared), and the precision the weights are held in (0 float32,
 * else the dtype number of cg_options.weights16): model_init refuses a file
 * whose precision is not the one its code reads (MG_RT_EFORMAT). */
#define WEIGHTS_HEADER 64

const char *cg_source_dir(void) {
  const char *e = getenv("MIGC_SOURCE_DIR");
  return e && *e ? e : MIGC_SOURCE_DIR;
}

/* The axis of input (kind "input") or output i that is the symbolic sequence;
 * -1 when none. Its descriptions are at the shortest length the code takes. */
static int seq_axis(const cg_ctx *c, const char *kind, int i) {
  if (!c->seq_sym) return -1;
  return c->io_seq[(*kind == 'o' ? c->g->n_inputs : 0) + i];
}

/* The dims of an input or output. A scalar, and a value whose rank inference could
 * not derive (rank -1: its producer was not converted, and the runtime refuses to
 * run the model), get a one-element array: C has no empty or negative arrays. */
static void io_shape_decl(cg_ctx *c, cg_buf *b, const char *p, const char *kind, int i, const mg_value *v) {
  const int r = v->shape.rank, axis = seq_axis(c, kind, i);
  cg_buf_printf(b, "static const int64_t %s_%s%d_shape[%d] = {", p, kind, i, r > 0 ? r : 1);
  for (int k = 0; k < r; k++) cg_buf_printf(b, "%s%lld", k ? ", " : "", (long long)(k == axis ? c->seq_lo : v->shape.d[k].v));
  cg_buf_printf(b, "%s};\n", r > 0 ? "" : "0");
}

/* "const T" for an input parameter's element type ("const char *const" for
 * strings; "const void" for a type with no C form), written to buf. */
static const char *const_ptr_type(mg_dtype t, char *buf, size_t n) {
  const char *ct = cg_ctype(t);
  if (!ct) return "const void";
  snprintf(buf, n, strchr(ct, '*') ? "%s const" : "const %s", ct);
  return buf;
}

static void io_table(cg_ctx *c, cg_buf *b, const char *p, const char *kind, mg_value **vs, int n) {
  for (int i = 0; i < n; i++) io_shape_decl(c, b, p, kind, i, vs[i]);
  cg_buf_printf(b, "static const mg_rt_io %s_%ss[%d] = {\n", p, kind, n ? n : 1);
  for (int i = 0; i < n; i++) {
    const mg_value *v = vs[i];
    int64_t numel = mg_shape_numel(&v->shape);
    if (seq_axis(c, kind, i) >= 0 && c->seq_now > 0) numel = numel / c->seq_now * c->seq_lo;
    cg_buf_printf(b, "  {");
    cg_buf_c_literal(b, v->name);
    const char *dt = v->dtype == MG_STRING ? "MG_RT_STRING" : cg_rt_dtype(v->dtype);
    cg_buf_printf(b, ", %s, %d, %s_%s%d_shape, %zu},\n", dt ? dt : "MG_RT_F32", v->shape.rank, p, kind, i,
                  numel < 0 ? (size_t)0 : (size_t)numel * cg_elem_bytes(v->dtype));
  }
  if (!n) cg_buf_printf(b, "  {\"\", MG_RT_F32, 0, 0, 0}\n");
  cg_buf_printf(b, "};\n");
}

typedef struct {
  uint64_t h;
  unsigned char carry[8];
  int n_carry;
} hash_ctx;

static void hash_word(hash_ctx *x, const unsigned char *p) {
  uint64_t w = 0;
  for (int k = 7; k >= 0; k--) w = (w << 8) | p[k];
  x->h = (x->h ^ w) * 0x100000001b3ull;
}

/* mg_rt_hash over a stream: whole words as they come, a partial word carried. */
static void emit_hash(void *ctx, const unsigned char *p, size_t n) {
  hash_ctx *x = ctx;
  while (n && x->n_carry) {
    x->carry[x->n_carry++] = *p++;
    n--;
    if (x->n_carry == 8) {
      hash_word(x, x->carry);
      x->n_carry = 0;
    }
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* hash_word's little-endian word is the host's: one load, not eight */
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    x->h = (x->h ^ w) * 0x100000001b3ull;
  }
#else
  for (; n >= 8; p += 8, n -= 8) hash_word(x, p);
#endif
  while (n--) x->carry[x->n_carry++] = *p++;
}

static void for_payload(cg_ctx *c, void (*emit)(void *ctx, const unsigned char *p, size_t n), void *ctx);

/* The C parameter of graph input (out = 0) or output (out = 1) i of g: cg_ident of
 * its name, then "_i" when an earlier one of the same kind has the same identifier
 * ("a/b" and "a_b" both read a_b), so the prototype never names a parameter twice. */
static void io_ident(const mg_graph *g, int out, int i, char *id, size_t n) {
  mg_value *const *v = out ? g->outputs : g->inputs;
  char other[96];
  cg_ident(v[i]->name, id, n);
  for (int j = 0; j < i; j++) {
    cg_ident(v[j]->name, other, sizeof other);
    if (!strcmp(id, other)) {
      size_t len = strlen(id);
      snprintf(id + len, n - len, "_%d", i);
      return;
    }
  }
}

/* Checksum of the weights payload, as the generated model_init recomputes it. */
static uint64_t weights_hash(cg_ctx *c) {
  hash_ctx x = {.h = 0xcbf29ce484222325ull};
  for_payload(c, emit_hash, &x);
  for (int i = 0; i < x.n_carry; i++) x.h = (x.h ^ x.carry[i]) * 0x100000001b3ull;
  return x.h;
}

uint64_t cg_weights_hash(cg_ctx *c) { return weights_hash(c); }

/* for_payload's sink that appends to a cg_buf. */
static void emit_append(void *ctx, const unsigned char *p, size_t n) {
  cg_buf *b = ctx;
  if (b->failed) return;
  while (b->cap < b->len + n + 1) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    char *s = mg_realloc(b->s, cap);
    if (!s) {
      b->failed = 1;
      return;
    }
    b->s = s, b->cap = cap;
  }
  memcpy(b->s + b->len, p, n);
  b->len += n;
  b->s[b->len] = 0;
}

unsigned char *cg_weights_payload(cg_ctx *c, size_t *n) {
  cg_buf b = {0};
  for_payload(c, emit_append, &b);
  if (b.failed) {
    cg_buf_free(&b);
    return NULL;
  }
  *n = b.len;
  return b.s ? (unsigned char *)b.s : mg_calloc(1, 1);
}

char *cg_model_sources(cg_ctx *c, char **model_h) {
  const char *p = c->o->prefix && *c->o->prefix ? c->o->prefix : "model";
  char P[64];
  snprintf(P, sizeof P, "%s", p);
  for (char *q = P; *q; q++)
    if (*q >= 'a' && *q <= 'z') *q = (char)(*q - 'a' + 'A');
  mg_graph *g = c->g;
  uint64_t hash = weights_hash(c);
  cg_buf h = {0}, b = {0};
  size_t pool_bytes = !c->uses_string_pool ? 0 : c->o->string_pool_bytes ? c->o->string_pool_bytes : (size_t)1 << 20;
  int n_out_dims = cg_out_dims_offset(g, g->n_outputs);
  int any_bounded = 0, sq = c->seq_sym != NULL;
  for (int j = 0; j < g->n_outputs; j++)
    any_bounded |= c->bounded[g->outputs[j]->id] || c->rd_off[g->outputs[j]->id] >= 0;

  /* ---- model.h ---- */
  cg_buf_printf(&h,
                "/* Generated by migc from %s. Do not edit.\n"
                " *\n"
                " * API: %s_init() (or %s_init_with() for caller-owned memory), then %s_run()\n"
                " * as often as needed, from any thread for distinct instances, then %s_free().\n"
                " * Every function returns 0 or an MG_RT_E* code (mg_rt_strerror()). %s_run() never\n"
                " * allocates; it uses one workspace of %s_workspace_size() bytes: the planned\n"
                " * arena of intermediates (%s_ARENA_BYTES) plus the kernels' scratch. */\n",
                c->m->path ? c->m->path : "a model", p, p, p, p, p, p, P);
  cg_buf_printf(&h, "#ifndef %s_H\n#define %s_H\n#include <stddef.h>\n#include <stdint.h>\n#include \"mg_runtime.h\"\n\n", P, P);
  if (sq)
    cg_buf_printf(&h,
                  "/* The sequence lengths the code takes, and the arena of intermediates at length\n"
                  " * S, planned by liveness (init sizes it as the most over the lengths up to its\n"
                  " * maximum). */\n#define %s_SEQ_MIN %lld\n#define %s_SEQ_MAX %lld\n#define %s_ARENA_AT(S) ((size_t)%zuu)\n"
                  "#define %s_ARENA_BYTES %s_ARENA_AT(%s_SEQ_MAX)\n",
                  P, (long long)c->seq_lo, P, (long long)c->seq_hi, P, c->arena_bytes, P, P, P);
  else {
    cg_buf_printf(&h, "/* Arena of intermediates, planned by liveness (lower bound %zu bytes). */\n", c->lower_bound);
    cg_buf_printf(&h, "#define %s_ARENA_BYTES %zuu\n", P, c->arena_bytes);
  }
  cg_buf_printf(&h, "/* Weights payload, in %s.weights%s. */\n#define %s_WEIGHTS_BYTES %zuu\n", p,
                c->o->embed_weights ? " and embedded in weights.c" : "", P, c->weights_bytes);
  cg_buf_printf(&h, "#define %s_N_INPUTS %d\n#define %s_N_OUTPUTS %d\n", P, g->n_inputs, P, g->n_outputs);
  cg_buf_printf(&h,
                "/* String tensors are arrays of const char * (UTF-8, NUL-terminated). Strings made\n"
                " * at run time go to a pool of this many bytes in the workspace (migc convert\n"
                " * --string-pool BYTES), emptied at each run: output strings stay valid until the\n"
                " * next run (and while the input strings do). A run that needs more returns\n"
                " * MG_RT_ENOMEM. 0: the model makes no strings. */\n"
                "#define %s_STRING_POOL_BYTES %zuu\n\n",
                P, pool_bytes);
  cg_buf_printf(&h,
                "typedef struct {\n"
                "  unsigned char *arena;          /* %s_ARENA_BYTES, 64-byte aligned */\n"
                "  float *scratch;                /* kernel scratch, after the arena */\n"
                "  const unsigned char *weights;  /* the weights payload */\n"
                "  void *owned_workspace, *owned_weights; /* freed by %s_free */\n"
                "  mg_rt_string_pool strings;     /* %s_STRING_POOL_BYTES, after the scratch */\n"
                "  int64_t out_dims[%d];           /* every output's dims after the last run */\n"
                "  mg_pool *pool;                 /* %s_set_threads' threads (NULL: one) */\n"
                "%s"
                "} %s_t;\n\n",
                P, p, P, n_out_dims ? n_out_dims : 1, p,
                sq ? "  int64_t max_dims[2];           /* the largest batch and sequence, from init */\n"
                     "  int64_t seq;                   /* the sequence length of this run */\n"
                : c->batch.sym ? "  int64_t max_dims[1];           /* the largest batch, from init */\n" : "", p);
  cg_buf_printf(&h,
                "/* The most threads %s_set_threads takes (migc convert --threads N), and how\n"
                " * many %s_init starts. */\n#define %s_MAX_THREADS %d\n"
                "/* Runs the model on n threads from now on (1 <= n <= %s_MAX_THREADS); the\n"
                " * results are the same bits for every n. Starts or stops threads: not during a\n"
                " * run. 0, MG_RT_EARG (n out of range) or MG_RT_ENOMEM. */\n"
                "int %s_set_threads(%s_t *m, int n);\n",
                p, p, P, cg_threads(c), P, p, p);
  cg_buf_printf(&h, "/* Bytes of workspace %s_init_with() needs (any alignment). */\nsize_t %s_workspace_size(void);\n", p, p);
  cg_buf_printf(&h, "/* Loads weights from weights_path (the %s.weights file written with this source)\n"
                    " * and allocates the workspace. */\nint %s_init(%s_t *m, const char *weights_path);\n", p, p, p);
  cg_buf_printf(&h, "/* The same with a caller-owned workspace of at least %s_workspace_size() bytes\n"
                    " * (it must outlive the instance). */\n"
                    "int %s_init_with(%s_t *m, const char *weights_path, void *workspace, size_t bytes);\n", p, p, p);
  if (c->o->embed_weights)
    cg_buf_printf(&h, "/* Uses the weights compiled into weights.c; allocates the workspace. */\n"
                      "int %s_init_embedded(%s_t *m);\n", p, p);
  cg_buf_printf(&h, "void %s_free(%s_t *m);\n", p, p);
  cg_batch_header(c, &h, p, P);
  cg_buf_printf(&h, "/* Inputs and outputs in graph order, dense C order, as in %s_inputs/outputs. */\n", p);
  cg_buf_printf(&h, "int %s_run_v(%s_t *m, const void *const *inputs, void *const *outputs);\n", p, p);
  cg_buf_printf(&h, "/* The same, calling trace after every node with its output (for layer-by-layer\n"
                    " * comparison); trace may be NULL. */\n"
                    "int %s_run_trace(%s_t *m, const void *const *inputs, void *const *outputs,\n"
                    "                 mg_rt_trace_fn trace, void *ctx);\n", p, p);
  cg_buf_printf(&h,
                "/* Output `output`'s dims after the last successful run (its rank of them): the\n"
                " * static shape in %s_outputs, except for an output of run-time length%s,\n"
                " * whose buffer holds the most and whose data is dense in these dims. */\n"
                "const int64_t *%s_output_dims(const %s_t *m, int output);\n",
                p, any_bounded ? " (this model has one)" : " (this model has none)", p, p);
  if (c->batch.sym)
    cg_buf_printf(&h, "/* %s_run_dims_v with typed buffers: dims[0] is the batch. */\n", p);
  cg_buf_printf(&h, "int %s_run(%s_t *m%s", p, p, c->batch.sym ? ", const int64_t *dims" : "");
  for (int i = 0; i < g->n_inputs; i++) {
    char id[96], ty[64];
    io_ident(g, 0, i, id, sizeof id);
    cg_buf_printf(&h, ", %s *in_%s", const_ptr_type(g->inputs[i]->dtype, ty, sizeof ty), id);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char id[96];
    io_ident(g, 1, i, id, sizeof id);
    cg_buf_printf(&h, ", %s *out_%s", cg_ctype(g->outputs[i]->dtype) ? cg_ctype(g->outputs[i]->dtype) : "void", id);
  }
  cg_buf_printf(&h, ");\n/* Names, dtypes and shapes of the inputs and outputs, and the generic entry\n"
                    " * points, for runners. */\nextern const mg_rt_model %s_desc;\n#endif\n", p);

  /* ---- model.c ---- */
  if (sq)
    cg_buf_printf(&b, "/* Generated by migc. Do not edit. Sizes are polynomials in the sequence length S\n"
                      " * (codegen/c/cg_seq.c). */\n");
  else
    cg_buf_printf(&b,
                  "/* Generated by migc. Do not edit.\n"
                  " * Arena of intermediates: %zu bytes; the most bytes alive at once: %zu. */\n",
                  c->arena_bytes, c->lower_bound);
  cg_buf_printf(&b, "#include \"%s.h\"\n#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n", p);
  if (c->statics.s) cg_buf_printf(&b, "%s\n", c->statics.s);
  cg_buf_printf(&b, "static size_t scratch_floats(%s) {\n  size_t most = 0, need;\n", sq ? "int64_t S" : "void");
  if (sq) cg_buf_printf(&b, "  (void)S;\n");
  for (int i = 0; i < c->n_scratch; i++)
    cg_buf_printf(&b, "  need = (size_t)(%s);\n  if (need > most) most = need;\n", c->scratch[i]);
  cg_buf_printf(&b, "  (void)need;\n  return most;\n}\n\n");
  if (sq) {
    /* the most over the lengths, whatever the polynomials do between them */
    cg_buf_printf(&b,
                  "static size_t arena_most(int64_t smax) {\n  size_t most = 0;\n  int64_t S;\n"
                  "  for (S = %s_SEQ_MIN; S <= smax; S++)\n    if (%s_ARENA_AT(S) > most) most = %s_ARENA_AT(S);\n"
                  "  return most;\n}\n\n"
                  "static size_t scratch_most(int64_t smax) {\n  size_t most = 0;\n  int64_t S;\n"
                  "  for (S = %s_SEQ_MIN; S <= smax; S++)\n    if (scratch_floats(S) > most) most = scratch_floats(S);\n"
                  "  return most;\n}\n\n"
                  "static size_t workspace_at(int64_t smax) {\n"
                  "  return arena_most(smax) + scratch_most(smax) * %s_MAX_THREADS * sizeof(float) +\n"
                  "         %s_STRING_POOL_BYTES + 128;\n}\n\n"
                  "size_t %s_workspace_size(void) { return workspace_at(%s_SEQ_MAX); }\n\n",
                  P, P, P, P, P, P, p, P);
    cg_buf_printf(&b, "static void reset_out_dims(%s_t *m, int64_t S) {\n  const int64_t d[%d] = {", p,
                  n_out_dims ? n_out_dims : 1);
  } else {
    cg_buf_printf(&b,
                  "size_t %s_workspace_size(void) {\n"
                  "  return %s_ARENA_BYTES + scratch_floats() * %s_MAX_THREADS * sizeof(float) +\n"
                  "         %s_STRING_POOL_BYTES + 128;\n}\n\n",
                  p, P, P, P);
    cg_buf_printf(&b, "static const int64_t %s_out_dims_init[%d] = {", p, n_out_dims ? n_out_dims : 1);
  }
  for (int j = 0, k = 0; j < g->n_outputs; j++)
    for (int r = 0; r < g->outputs[j]->shape.rank; r++)
      cg_buf_printf(&b, "%s%lld", k++ ? ", " : "", (long long)g->outputs[j]->shape.d[r].v);
  cg_buf_printf(&b, "%s};\n", n_out_dims ? "" : "0");
  if (sq) cg_buf_printf(&b, "  (void)S;\n  memcpy(m->out_dims, d, sizeof d);\n}\n");
  cg_buf_printf(&b, "static const int %s_out_dims_at[%d] = {", p, g->n_outputs ? g->n_outputs : 1);
  for (int j = 0; j < g->n_outputs; j++) cg_buf_printf(&b, "%s%d", j ? ", " : "", cg_out_dims_offset(g, j));
  cg_buf_printf(&b, "%s};\n\n", g->n_outputs ? "" : "0");
  if (sq)
    cg_buf_printf(&b,
                  "static void place_workspace(%s_t *m, void *ws, int64_t smax) {\n"
                  "  unsigned char *base = (unsigned char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);\n"
                  "  m->arena = base;\n"
                  "  m->scratch = (float *)(base + arena_most(smax));\n"
                  "  m->strings.base = (char *)(base + arena_most(smax) + scratch_most(smax) * %s_MAX_THREADS * sizeof(float));\n"
                  "  m->strings.cap = %s_STRING_POOL_BYTES;\n"
                  "  m->strings.used = 0;\n"
                  "  reset_out_dims(m, %s_SEQ_MIN);\n"
                  "  m->max_dims[0] = 1;\n  m->max_dims[1] = smax;\n  m->seq = %s_SEQ_MIN;\n}\n\n",
                  p, P, P, P, P);
  else
    cg_buf_printf(&b,
                  "static void place_workspace(%s_t *m, void *ws) {\n"
                  "  unsigned char *base = (unsigned char *)(((uintptr_t)ws + 63) & ~(uintptr_t)63);\n"
                  "  m->arena = base;\n"
                  "  m->scratch = (float *)(base + %s_ARENA_BYTES);\n"
                  "  m->strings.base = (char *)(base + %s_ARENA_BYTES + scratch_floats() * %s_MAX_THREADS * sizeof(float));\n"
                  "  m->strings.cap = %s_STRING_POOL_BYTES;\n"
                  "  m->strings.used = 0;\n"
                  "  memcpy(m->out_dims, %s_out_dims_init, sizeof m->out_dims);\n%s}\n\n",
                  p, P, P, P, P, p, c->batch.sym ? "  m->max_dims[0] = 1;\n" : "");
  cg_buf_printf(&b,
                "const int64_t *%s_output_dims(const %s_t *m, int output) {\n"
                "  if (!m || output < 0 || output >= %s_N_OUTPUTS) return 0;\n"
                "  return m->out_dims + %s_out_dims_at[output];\n}\n\n",
                p, p, P, p);
  cg_buf_printf(&b,
                "static uint64_t read_le64(const unsigned char *q) {\n"
                "  uint64_t v = 0;\n  int k;\n  for (k = 7; k >= 0; k--) v = (v << 8) | q[k];\n  return v;\n}\n\n"
                "static int load_weights(%s_t *m, const char *path) {\n"
                "  unsigned char head[%d];\n  unsigned char *data;\n  FILE *f;\n"
                "  if (%s_WEIGHTS_BYTES == 0) { m->weights = 0; return MG_RT_OK; }\n"
                "  if (!path) return MG_RT_EARG;\n"
                "  f = fopen(path, \"rb\");\n  if (!f) return MG_RT_EIO;\n"
                "  if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, \"MIGCWTS1\", 8) ||\n"
                "      read_le64(head + 8) != (uint64_t)%s_WEIGHTS_BYTES || read_le64(head + 16) != 0x%016llxull ||\n"
                "      read_le64(head + 24) != %du || read_le64(head + 32) != %du) {\n"
                "    fclose(f);\n    return MG_RT_EFORMAT;\n  }\n"
                "  m->owned_weights = malloc((size_t)%s_WEIGHTS_BYTES + 64);\n"
                "  if (!m->owned_weights) { fclose(f); return MG_RT_ENOMEM; }\n"
                "  data = (unsigned char *)(((uintptr_t)m->owned_weights + 63) & ~(uintptr_t)63);\n"
                "  if (fread(data, 1, %s_WEIGHTS_BYTES, f) != %s_WEIGHTS_BYTES) {\n"
                "    fclose(f);\n    free(m->owned_weights);\n    m->owned_weights = 0;\n    return MG_RT_EIO;\n  }\n"
                "  fclose(f);\n"
                "  if (mg_rt_hash(data, %s_WEIGHTS_BYTES) != 0x%016llxull) {\n"
                "    free(m->owned_weights);\n    m->owned_weights = 0;\n    return MG_RT_EFORMAT;\n  }\n"
                "  m->weights = data;\n  return MG_RT_OK;\n}\n\n",
                p, WEIGHTS_HEADER, P, P, (unsigned long long)hash, c->n_prep ? MG_RT_PACK_VERSION : 0,
                (unsigned)c->o->weights16, P, P,
                P, P, (unsigned long long)hash);
  /* prepared weights are read by the runtime's kernels in layout
   * MG_RT_PACK_VERSION as of this conversion: a runtime of another version would
   * read them as something else */
  /* the check calls sgemm.c even in a partial project whose prepared layers were
   * all left unconverted (a dynamic-shape export), which then still links */
  if (c->n_prep) cg_need(c, "sgemm.c");
  cg_buf_printf(&b,
                "/* Whether the runtime reads prepared weights in the layout they were made in. */\n"
                "static int layout_ok(void) { return %s; }\n\n",
                c->n_prep ? str(c, "mg_sgemm_pack_version() == %d", MG_RT_PACK_VERSION) : "1");
  if (sq)
    cg_buf_printf(&b,
                  "/* init_with for sequences up to smax (the workspace sized for them). */\n"
                  "static int init_at(%s_t *m, const char *weights_path, void *workspace, size_t bytes, int64_t smax) {\n"
                  "  int rc;\n"
                  "  if (!m || !workspace || smax < %s_SEQ_MIN || smax > %s_SEQ_MAX || bytes < workspace_at(smax))\n"
                  "    return MG_RT_EARG;\n"
                  "  if (!layout_ok()) return MG_RT_ELAYOUT;\n"
                  "  memset(m, 0, sizeof *m);\n"
                  "  place_workspace(m, workspace, smax);\n"
                  "  rc = load_weights(m, weights_path);\n"
                  "  if (!rc && %s_MAX_THREADS > 1) rc = %s_set_threads(m, %s_MAX_THREADS);\n"
                  "  return rc;\n}\n\n"
                  "int %s_init_with(%s_t *m, const char *weights_path, void *workspace, size_t bytes) {\n"
                  "  return init_at(m, weights_path, workspace, bytes, %s_SEQ_MAX);\n}\n\n",
                  p, P, P, P, p, P, p, p, P);
  else
    cg_buf_printf(&b,
                  "int %s_init_with(%s_t *m, const char *weights_path, void *workspace, size_t bytes) {\n"
                  "  int rc;\n"
                  "  if (!m || !workspace || bytes < %s_workspace_size()) return MG_RT_EARG;\n"
                  "  if (!layout_ok()) return MG_RT_ELAYOUT;\n"
                  "  memset(m, 0, sizeof *m);\n"
                  "  place_workspace(m, workspace);\n"
                  "  rc = load_weights(m, weights_path);\n"
                  "  if (!rc && %s_MAX_THREADS > 1) rc = %s_set_threads(m, %s_MAX_THREADS);\n"
                  "  return rc;\n}\n\n",
                  p, p, p, P, p, P);
  if (cg_threads(c) > 1)
    cg_buf_printf(&b,
                  "int %s_set_threads(%s_t *m, int n) {\n"
                  "  if (!m || n < 1 || n > %s_MAX_THREADS) return MG_RT_EARG;\n"
                  "  if (mg_pool_threads(m->pool) == n) return MG_RT_OK;\n"
                  "  mg_pool_stop(m->pool);\n"
                  "  m->pool = 0;\n"
                  "  if (n > 1 && !(m->pool = mg_pool_start(n))) return MG_RT_ENOMEM;\n"
                  "  return MG_RT_OK;\n}\n\n",
                  p, p, P);
  else
    cg_buf_printf(&b,
                  "int %s_set_threads(%s_t *m, int n) {\n"
                  "  return m && n == 1 ? MG_RT_OK : MG_RT_EARG;\n}\n\n",
                  p, p);
  cg_buf_printf(&b,
                "int %s_init(%s_t *m, const char *weights_path) {\n"
                "  int rc;\n  void *ws;\n"
                "  if (!m) return MG_RT_EARG;\n"
                "  ws = malloc(%s_workspace_size());\n"
                "  if (!ws) return MG_RT_ENOMEM;\n"
                "  rc = %s_init_with(m, weights_path, ws, %s_workspace_size());\n"
                "  if (rc) { free(ws); return rc; }\n"
                "  m->owned_workspace = ws;\n  return MG_RT_OK;\n}\n\n",
                p, p, p, p, p);
  if (c->o->embed_weights)
    cg_buf_printf(&b,
                  "extern const uint32_t %s_weights_words[];\n"
                  "int %s_init_embedded(%s_t *m) {\n"
                  "  void *ws;\n"
                  "  if (!m) return MG_RT_EARG;\n"
                  "  if (!layout_ok()) return MG_RT_ELAYOUT;\n"
                  "  ws = malloc(%s_workspace_size());\n"
                  "  if (!ws) return MG_RT_ENOMEM;\n"
                  "  memset(m, 0, sizeof *m);\n"
                  "  place_workspace(m, ws%s);\n"
                  "  m->owned_workspace = ws;\n"
                  "  m->weights = (const unsigned char *)%s_weights_words;\n"
                  "  return %s_MAX_THREADS > 1 ? %s_set_threads(m, %s_MAX_THREADS) : MG_RT_OK;\n}\n\n",
                  p, p, p, p, sq ? str(c, ", %s_SEQ_MAX", P) : "", p, P, p, P);
  cg_buf_printf(&b,
                "void %s_free(%s_t *m) {\n"
                "  if (!m) return;\n  %s\n  free(m->owned_workspace);\n  free(m->owned_weights);\n"
                "  memset(m, 0, sizeof *m);\n}\n\n",
                p, p, cg_threads(c) > 1 ? "mg_pool_stop(m->pool);" : "/* one thread: no pool */");
  /* a symbolic batch: this is one element's code, cg_batch_source loops over them */
  if (c->batch.sym) cg_buf_printf(&b, "static int run_one(%s_t *m", p);
  else cg_buf_printf(&b, "int %s_run_trace(%s_t *m", p, p);
  cg_buf_printf(&b,
                ", const void *const *in, void *const *out, mg_rt_trace_fn trace,\n"
                "                 void *tctx) {\n"
                "  unsigned char *A;\n  const unsigned char *W;\n"
                "  if (!m || !m->arena || (%s_WEIGHTS_BYTES && !m->weights)) return MG_RT_EARG;\n"
                "%s"
                "  A = m->arena;\n  W = m->weights;\n  (void)A;\n  (void)W;\n  (void)in;\n  (void)out;\n"
                "  (void)trace;\n  (void)tctx;\n  m->strings.used = 0;\n%s",
                P, sq ? "  const int64_t S = m->seq;\n/*@seq-locals@*/\n" : "", sq ? "  (void)S;\n  reset_out_dims(m, S);\n" : "");
  /* the actual dims of the values of run-time length (codegen/c/cg_dynamic.c) */
  if (c->n_rd) cg_buf_printf(&b, "  int64_t rd[%d];\n", c->n_rd);
  if (c->body.s) cg_buf_printf(&b, "%s", c->body.s);
  cg_buf_printf(&b, "  return MG_RT_OK;\n}\n\n");
  cg_batch_source(c, &b, p);
  cg_buf_printf(&b,
                "int %s_run_v(%s_t *m, const void *const *in, void *const *out) {\n"
                "  return %s_run_trace(m, in, out, 0, 0);\n}\n\n",
                p, p, p);
  cg_buf_printf(&b, "int %s_run(%s_t *m%s", p, p, c->batch.sym ? ", const int64_t *dims" : "");
  for (int i = 0; i < g->n_inputs; i++) {
    char id[96], ty[64];
    io_ident(g, 0, i, id, sizeof id);
    cg_buf_printf(&b, ", %s *in_%s", const_ptr_type(g->inputs[i]->dtype, ty, sizeof ty), id);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char id[96];
    io_ident(g, 1, i, id, sizeof id);
    cg_buf_printf(&b, ", %s *out_%s", cg_ctype(g->outputs[i]->dtype) ? cg_ctype(g->outputs[i]->dtype) : "void", id);
  }
  cg_buf_printf(&b, ") {\n  const void *in[%d];\n  void *out[%d];\n", g->n_inputs ? g->n_inputs : 1, g->n_outputs ? g->n_outputs : 1);
  if (!g->n_inputs) cg_buf_printf(&b, "  in[0] = 0;\n");
  for (int i = 0; i < g->n_inputs; i++) {
    char id[96];
    io_ident(g, 0, i, id, sizeof id);
    cg_buf_printf(&b, "  in[%d] = in_%s;\n", i, id);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    char id[96];
    io_ident(g, 1, i, id, sizeof id);
    cg_buf_printf(&b, "  out[%d] = out_%s;\n", i, id);
  }
  if (c->batch.sym) cg_buf_printf(&b, "  return %s_run_dims_v(m, dims, in, out);\n}\n\n", p);
  else cg_buf_printf(&b, "  return %s_run_v(m, in, out);\n}\n\n", p);
  io_table(c, &b, p, "input", g->inputs, g->n_inputs);
  io_table(c, &b, p, "output", g->outputs, g->n_outputs);
  cg_buf_printf(&b, "static int desc_init(void *m, const char *weights_path) {\n");
  if (c->o->embed_weights)
    cg_buf_printf(&b, "  return weights_path ? %s_init((%s_t *)m, weights_path) : %s_init_embedded((%s_t *)m);\n}\n",
                  p, p, p, p);
  else
    cg_buf_printf(&b, "  return %s_init((%s_t *)m, weights_path);\n}\n", p, p);
  cg_buf_printf(&b,
                "static int desc_run(void *m, const void *const *in, void *const *out) {\n"
                "  return %s_run_v((%s_t *)m, in, out);\n}\n"
                "static void desc_free(void *m) { %s_free((%s_t *)m); }\n"
                "static const int64_t *desc_output_dims(void *m, int output) {\n"
                "  return %s_output_dims((const %s_t *)m, output);\n}\n"
                "static int desc_trace(void *m, const void *const *in, void *const *out, mg_rt_trace_fn t, void *x) {\n"
                "  return %s_run_trace((%s_t *)m, in, out, t, x);\n}\n",
                p, p, p, p, p, p, p, p);
  cg_buf_printf(&b, "static int desc_set_threads(void *m, int n) { return %s_set_threads((%s_t *)m, n); }\n", p, p);
  cg_buf_printf(&b, "const mg_rt_model %s_desc = {\"%s\", %d, %d, %s_inputs, %s_outputs, sizeof(%s_t), desc_init, desc_run, desc_free,\n  desc_trace, desc_output_dims, desc_set_threads, %s};\n",
                p, p, g->n_inputs, g->n_outputs, p, p, p, cg_batch_desc_tail(c, p));
  if (h.failed || b.failed) {
    cg_buf_free(&h);
    cg_buf_free(&b);
    return NULL;
  }
  *model_h = h.s;
  return b.s;
}

/* ------------------------------------------------------------ files */

static void put_le64(unsigned char *q, uint64_t v) {
  for (int k = 0; k < 8; k++) q[k] = (unsigned char)(v >> (8 * k));
}

/* Calls emit(ctx, bytes, n) over the payload in file order (data and padding). */
static void for_payload(cg_ctx *c, void (*emit)(void *ctx, const unsigned char *p, size_t n), void *ctx) {
  static const unsigned char zeros[64];
  size_t pos = 0;
  mg_graph *g = c->g;
  for (int v = 0; v < g->n_values; v++) {
    if (c->place[v].at != CG_AT_WEIGHT) continue;
    for (; pos < c->place[v].offset; pos += 64)
      emit(ctx, zeros, c->place[v].offset - pos < 64 ? c->place[v].offset - pos : 64);
    pos = c->place[v].offset;
    if (c->place[v].w16) {
      size_t n = (size_t)cg_numel(g->values[v]);
      cg_w16_payload(c->o->weights16, g->values[v]->data, n, emit, ctx);
      pos += n * 2;
      continue;
    }
    emit(ctx, g->values[v]->data, g->values[v]->nbytes);
    pos += g->values[v]->nbytes;
  }
  /* the prepared weights, placed after every value (cg_plan.c) */
  for (int i = 0; c->prep && i < g->n_nodes; i++) {
    const cg_prep *pr = &c->prep[i];
    if (!pr->data) continue;
    for (; pos < pr->offset; pos += 64) emit(ctx, zeros, pr->offset - pos < 64 ? pr->offset - pos : 64);
    pos = pr->offset;
    if (pr->w16) cg_w16_payload(c->o->weights16, pr->data, pr->floats, emit, ctx);
    else emit(ctx, (const unsigned char *)pr->data, pr->nbytes);
    pos += pr->nbytes;
  }
  for (; pos < c->weights_bytes; pos += 64) emit(ctx, zeros, c->weights_bytes - pos < 64 ? c->weights_bytes - pos : 64);
}

static void emit_raw(void *ctx, const unsigned char *p, size_t n) { fwrite(p, 1, n, ctx); }

typedef struct {
  FILE *f;
  unsigned char word[4];
  int fill;
  size_t count;
} words_ctx;

static void emit_words(void *ctx, const unsigned char *p, size_t n) {
  words_ctx *w = ctx;
  for (size_t i = 0; i < n; i++) {
    w->word[w->fill++] = p[i];
    if (w->fill == 4) {
      uint32_t x = (uint32_t)w->word[0] | (uint32_t)w->word[1] << 8 | (uint32_t)w->word[2] << 16 |
                   (uint32_t)w->word[3] << 24;
      fprintf(w->f, "0x%08xu,%s", (unsigned)x, ++w->count % 8 ? "" : "\n");
      w->fill = 0;
    }
  }
}

static int write_weights(cg_ctx *c, const char *dir, const char *p, uint64_t hash) {
  char name[128], tmp[4096];
  if (c->o->embed_weights) {
    /* little-endian words: the payload's bytes on little-endian targets, which are
     * the ones the weights file format also assumes */
    snprintf(name, sizeof name, "%s_weights.c", p);
    FILE *f = cg_file_open(dir, name, tmp, sizeof tmp);
    if (!f) return -1;
    fprintf(f, "/* Generated by migc: the weights of %s, %zu bytes. */\n#include <stdint.h>\n", p, c->weights_bytes);
    fprintf(f, "extern const uint32_t %s_weights_words[];\nconst uint32_t %s_weights_words[%zu] = {\n", p, p,
            c->weights_bytes / 4 + 1);
    words_ctx w = {.f = f};
    for_payload(c, emit_words, &w);
    fprintf(f, "0u};\n");
    return cg_file_commit(c->d, f, tmp, dir, name);
  }
  snprintf(name, sizeof name, "%s.weights", p);
  FILE *f = cg_file_open(dir, name, tmp, sizeof tmp);
  if (!f) {
    mg_error(c->d, IO, dir, NULL, "cannot create a file in %s: %s", dir, strerror(errno));
    return -1;
  }
  unsigned char head[WEIGHTS_HEADER] = "MIGCWTS1";
  put_le64(head + 8, c->weights_bytes);
  put_le64(head + 16, hash);
  put_le64(head + 24, c->n_prep ? MG_RT_PACK_VERSION : 0);
  put_le64(head + 32, (uint64_t)c->o->weights16);
  fwrite(head, 1, sizeof head, f);
  for_payload(c, emit_raw, f);
  return cg_file_commit(c->d, f, tmp, dir, name);
}

/* Writes the text made in t as dir/name unless rc already failed, then frees t: a
 * text whose making ran out of memory is an error, never a file left out. The
 * status, 0 or -1 (recorded). */
static int write_made_text(cg_ctx *c, const char *dir, const char *name, cg_buf *t, int rc) {
  if (!rc && t->failed) {
    mg_error(c->d, OOM, NULL, NULL, "out of memory writing %s", name);
    rc = -1;
  }
  if (!rc) rc = cg_write_text(c->d, dir, name, t->s);
  cg_buf_free(t);
  return rc;
}

/* Runtime headers: every mg_*.h (they include each other). */
static int copy_runtime(cg_ctx *c, const char *dir) {
  char rdir[4096], src[4096];
  snprintf(rdir, sizeof rdir, "%s/runtime", dir);
  if (cg_mkdirs(rdir)) {
    mg_error(c->d, IO, rdir, NULL, "cannot create %s: %s", rdir, strerror(errno));
    return -1;
  }
  snprintf(src, sizeof src, "%s/runtime", cg_source_dir());
  DIR *dd = opendir(src);
  if (!dd) {
    mg_error(c->d, IO, src, NULL, "cannot list %s (set MIGC_SOURCE_DIR to migc's source tree)", src);
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(dd))) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, "mg_", 3) || len < 3 || strcmp(e->d_name + len - 2, ".h")) continue;
    /* a project with a runner gets its own selection, written once by
     * cg_write_project (two outputs of one run never share a name) */
    if (!c->o->no_runner && !strcmp(e->d_name, "mg_rt_select.h")) continue;
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", src, e->d_name);
    rc = cg_copy_file(c->d, path, rdir, e->d_name);
  }
  closedir(dd);
  cg_need(c, "common.c");
  for (int i = 0; i < c->n_needed && !rc; i++) {
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", src, c->needed[i]);
    rc = cg_copy_file(c->d, path, rdir, c->needed[i]);
  }
  return rc;
}

int cg_write_project(cg_ctx *c, const char *dir, const char *model_c, const char *model_h) {
  const char *p = c->o->prefix && *c->o->prefix ? c->o->prefix : "model";
  if (cg_mkdirs(dir)) {
    mg_error(c->d, IO, dir, NULL, "cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  char name[128];
  snprintf(name, sizeof name, "%s.h", p);
  if (cg_write_text(c->d, dir, name, model_h)) return -1;
  snprintf(name, sizeof name, "%s.c", p);
  if (cg_write_text(c->d, dir, name, model_c)) return -1;
  if (write_weights(c, dir, p, weights_hash(c)) || copy_runtime(c, dir)) return -1;
  if (c->o->no_runner) return 0; /* a shared runtime folder keeps the default: every kernel */
  cg_buf files = {0}, t = {0};
  cg_buf_printf(&t, "/* Generated by migc: the kernels this model calls (runtime/mg_rt_select.h). */\n"
                    "#ifndef MG_RT_SELECT_H\n#define MG_RT_SELECT_H\n#define MG_RT_SELECT 1\n");
  for (int i = 0; i < c->n_selected; i++) cg_buf_printf(&t, "#define %s 1\n", c->selected[i]);
  cg_buf_printf(&t, "#endif\n");
  char rdir[4096 + 16];
  snprintf(rdir, sizeof rdir, "%s/runtime", dir);
  if (t.failed || cg_write_text(c->d, rdir, "mg_rt_select.h", t.s)) {
    if (t.failed) mg_error(c->d, OOM, NULL, NULL, "out of memory writing the project");
    cg_buf_free(&t);
    return -1;
  }
  cg_buf_free(&t);
  for (int i = 0; i < c->n_needed; i++) cg_buf_printf(&files, " runtime/%s", c->needed[i]);
  char src[4096];
  snprintf(src, sizeof src, "%s/codegen/c/runner/main.c", cg_source_dir());
  int rc = cg_copy_file(c->d, src, dir, "main.c");
  cg_buf_printf(&t,
                "/* Generated by migc: the models this runner serves. */\n#include \"%s.h\"\n\n"
                "const mg_rt_model *const mg_rt_models[] = {&%s_desc};\n",
                p, p);
  if (c->o->embed_weights) cg_buf_printf(&t, "const char *const mg_rt_weights_files[] = {0};\n");
  else cg_buf_printf(&t, "const char *const mg_rt_weights_files[] = {\"%s.weights\"};\n", p);
  cg_buf_printf(&t, "const int mg_rt_n_models = 1;\n");
  rc = write_made_text(c, dir, "models.c", &t, rc);
  char wsrc[160] = "";
  if (c->o->embed_weights) snprintf(wsrc, sizeof wsrc, " %s_weights.c", p);
  cg_buf_printf(&t,
                "# Generated by migc. `make` (or `make -j`) builds ./runner; override CC, OPT, ARCH\n"
                "# (e.g. ARCH= when cross-compiling), WERROR=-Werror and LDFLAGS as needed.\n"
                "# RUNNER_OPT is main.c's: the harness reads and writes .npy files and times\n"
                "# the model, none of it in the timed runs, and at -O3 it took a fifth of a\n"
                "# small model's build.\n"
                "CC ?= cc\nOPT ?= -O3\nRUNNER_OPT ?= -O1\nARCH ?= -march=native\nWERROR ?=\n"
                "WARN = -std=c99 -Wall -Wextra -pedantic $(WERROR)\n"
                "SRCS = %s.c%s models.c main.c%s\n"
                "OBJS = $(SRCS:.c=.o)\n\n"
                "runner: $(OBJS)\n"
                "\t$(CC) $(OPT) $(ARCH) $(CFLAGS) $(OBJS) -o $@ $(LDFLAGS) -lm%s\n\n"
                "%%.o: %%.c %s.h $(wildcard runtime/*.h)\n"
                "\t$(CC) $(WARN) $(OPT) $(ARCH) $(CFLAGS) -I. -Iruntime -c $< -o $@\n\n"
                "main.o: main.c $(wildcard runtime/*.h)\n"
                "\t$(CC) $(WARN) $(RUNNER_OPT) $(ARCH) $(CFLAGS) -I. -Iruntime -c $< -o $@\n\n"
                "clean:\n\trm -f runner $(OBJS)\n\n.PHONY: clean\n",
                p, wsrc, files.s ? files.s : "", cg_threads(c) > 1 ? " -pthread" : "", p);
  rc = write_made_text(c, dir, "Makefile", &t, rc);
  cg_buf_printf(&t,
                "# Generated by migc: builds the same runner as the Makefile.\n"
                "cmake_minimum_required(VERSION 3.13)\nproject(%s C)\n"
                "set(CMAKE_C_STANDARD 99)\nset(CMAKE_C_STANDARD_REQUIRED ON)\nset(CMAKE_C_EXTENSIONS OFF)\n"
                "if(NOT CMAKE_BUILD_TYPE)\n  set(CMAKE_BUILD_TYPE Release)\nendif()\n"
                "option(MODEL_NATIVE \"Compile for the building machine's CPU (AVX2/FMA paths)\" ON)\n"
                "add_executable(runner %s.c%s models.c main.c%s)\n"
                "target_include_directories(runner PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/runtime)\n"
                "if(MODEL_NATIVE)\n  target_compile_options(runner PRIVATE -march=native)\nendif()\n"
                "target_link_libraries(runner PRIVATE m)\n%s",
                p, p, wsrc, files.s ? files.s : "",
                cg_threads(c) > 1 ? "find_package(Threads REQUIRED)\ntarget_link_libraries(runner PRIVATE Threads::Threads)\n" : "");
  if (!rc && !t.failed) rc = cg_write_text(c->d, dir, "CMakeLists.txt", t.s);
  if (t.failed || files.failed) {
    mg_error(c->d, OOM, NULL, NULL, "out of memory writing the project");
    rc = -1;
  }
  cg_buf_free(&t);
  cg_buf_free(&files);
  return rc;
}
