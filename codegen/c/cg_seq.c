/* A symbolic sequence in the C backend: one binary for every length S in a
 * validated range [lo, hi].
 *
 * A sequence cannot be looped over like the batch (cg_batch.c): its length
 * reaches every loop bound, stride, GEMM size, arena offset and softmax row the
 * emitters write. So the emitters are not taught it; the whole project text
 * (model.c and model.h) is generated at every S from lo to hi, each time from a
 * copy of the model prepared with the sequence fixed at S (the batch, if
 * symbolic, stays so and is looped as before). The texts must be identical but
 * for their decimal integer literals; a literal that differs is fitted as a
 * polynomial in S of degree at most 2 on lo, lo+1, lo+2 (Newton's differences,
 * exact in integers) and checked against every other S of the range, so the
 * merged text, evaluated at any S in [lo, hi], is exactly the text emitted for
 * that S: nothing is extrapolated. Where the text stops agreeing at some S (a
 * kernel chosen by the length, an arena plan that reorders), hi becomes S - 1
 * and the node at fault is named in a warning; when fewer than five lengths
 * agree, the sequence is not made symbolic and the usual dynamic-shape
 * diagnostics stand.
 *
 * The merged code reads S from the instance (model_run's dims[1]); file-scope
 * constants whose values vary are moved into the run function as automatic
 * constants; the arena and scratch are sized at init as the most over lo..max,
 * whatever the polynomials do between. */
#include "cg_internal.h"
#include "passes.h"
#include <stdlib.h>

enum { CG_SEQ_DEFAULT_MAX = 64, CG_SEQ_MIN_AGREE = 5, CG_SEQ_FIT = 3 };

/* 0: m's inputs have no sequence (an unknown dim other than a leading one, all
 * such named by one symbol); 1: *sym set. */
int cg_seq_find(const mg_graph *g, const char **sym) {
  *sym = NULL;
  for (int i = 0; i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    for (int k = 1; k < v->shape.rank; k++) {
      const mg_dim *dm = &v->shape.d[k];
      if (dm->v >= 0 || !dm->sym) continue;
      if (*sym && strcmp(*sym, dm->sym)) return 0;
      *sym = dm->sym;
    }
  }
  /* a leading dim named like the sequence is not a batch: not this design */
  for (int i = 0; *sym && i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    if (v->shape.rank > 0 && v->shape.d[0].v < 0 && v->shape.d[0].sym && !strcmp(v->shape.d[0].sym, *sym)) return 0;
  }
  return *sym != NULL;
}

/* A copy of m prepared with every dim named sym set to s; NULL when it cannot be. */
static mg_model *prepared_at(const mg_model *m, const char *sym, int64_t s) {
  mg_model *c = mg_model_clone(m);
  if (!c) return NULL;
  mg_graph *g = c->graph;
  mg_shape_override *ov = mg_calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *ov);
  int n = 0;
  for (int i = 0; ov && i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    int hit = 0;
    for (int k = 1; k < v->shape.rank; k++) hit |= v->shape.d[k].v < 0 && v->shape.d[k].sym && !strcmp(v->shape.d[k].sym, sym);
    if (!hit) continue;
    ov[n].name = v->name;
    ov[n].shape = v->shape;
    for (int k = 1; k < v->shape.rank; k++)
      if (v->shape.d[k].v < 0 && v->shape.d[k].sym && !strcmp(v->shape.d[k].sym, sym))
        ov[n].shape.d[k].v = s, ov[n].shape.d[k].sym = NULL;
    n++;
  }
  mg_diags quiet;
  mg_diags_init(&quiet);
  int rc = ov ? mg_prepare(c, ov, n, &quiet) : -1;
  mg_diags_free(&quiet);
  mg_free(ov);
  if (rc) {
    mg_model_free(c);
    return NULL;
  }
  return c;
}

/* ------------------------------------------------------------ texts */

/* A text cut into glue (compared as it is) and decimal integer literals. */
typedef struct {
  const char *s;
  int n;            /* literals */
  size_t *at, *len; /* each literal's place and length (suffix included) */
  int64_t *val;
  char *sfx;        /* 0 none, 'u', 'U' (ull), 'L' (ll) */
  int cap;
} cut;

static int is_ident(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (ch >= '0' && ch <= '9'); }

static int push_literal(cut *t, size_t at, size_t len, int64_t v, char sfx) {
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 1024;
    size_t *a = mg_realloc(t->at, sizeof *a * (size_t)cap);
    if (a) t->at = a;
    size_t *l = a ? mg_realloc(t->len, sizeof *l * (size_t)cap) : NULL;
    if (l) t->len = l;
    int64_t *x = l ? mg_realloc(t->val, sizeof *x * (size_t)cap) : NULL;
    if (x) t->val = x;
    char *f = x ? mg_realloc(t->sfx, (size_t)cap) : NULL;
    if (!f) return -1;
    t->sfx = f;
    t->cap = cap;
  }
  t->at[t->n] = at, t->len[t->n] = len, t->val[t->n] = v, t->sfx[t->n] = sfx;
  t->n++;
  return 0;
}

/* Finds s's decimal literals, skipping comments, strings, identifiers and other
 * numbers (hex, floats). 0, or -1 on OOM. */
static int cut_text(cut *t, const char *s) {
  memset(t, 0, sizeof *t);
  t->s = s;
  for (size_t i = 0; s[i];) {
    char ch = s[i];
    if (ch == '/' && s[i + 1] == '*') {
      const char *e = strstr(s + i + 2, "*/");
      i = e ? (size_t)(e - s) + 2 : strlen(s);
    } else if (ch == '"' || ch == '\'') {
      for (i++; s[i] && s[i] != ch; i++)
        if (s[i] == '\\' && s[i + 1]) i++;
      if (s[i]) i++;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
      while (is_ident(s[i])) i++;
    } else if (ch >= '0' && ch <= '9') {
      size_t j = i;
      while (s[j] >= '0' && s[j] <= '9') j++;
      size_t digits = j;
      char sfx = 0;
      if (!strncmp(s + j, "ull", 3)) sfx = 'U', j += 3;
      else if (!strncmp(s + j, "ll", 2)) sfx = 'L', j += 2;
      else if (s[j] == 'u') sfx = 'u', j++;
      int plain = !is_ident(s[j]) && s[j] != '.' && (i == 0 || (s[i - 1] != '.' && s[i - 1] != '+' && s[i - 1] != '-')) &&
                  digits - i <= 18;
      if (!plain) {
        while (is_ident(s[j]) || s[j] == '.') j++;
      } else if (push_literal(t, i, j - i, strtoll(s + i, NULL, 10), sfx)) {
        return -1;
      }
      i = j;
    } else {
      i++;
    }
  }
  return 0;
}

static void cut_free(cut *t) {
  mg_free(t->at);
  mg_free(t->len);
  mg_free(t->val);
  mg_free(t->sfx);
  memset(t, 0, sizeof *t);
}

/* Where a and b first differ other than in their literals' values: -1 when they
 * agree, else an offset into a. */
static long long first_difference(const cut *a, const cut *b) {
  if (a->n != b->n) {
    size_t k = 0;
    while (a->s[k] && a->s[k] == b->s[k]) k++;
    return (long long)k;
  }
  size_t pa = 0, pb = 0;
  for (int i = 0; i <= a->n; i++) {
    size_t ea = i < a->n ? a->at[i] : strlen(a->s), eb = i < b->n ? b->at[i] : strlen(b->s);
    if (ea - pa != eb - pb || memcmp(a->s + pa, b->s + pb, ea - pa)) return (long long)pa;
    if (i < a->n && a->sfx[i] != b->sfx[i]) return (long long)ea;
    if (i < a->n) pa = ea + a->len[i], pb = eb + b->len[i];
  }
  return -1;
}

/* The node whose code holds offset at of model.c's text (its "/ * id Op "name"" comment
 * is the last before it); NULL outside the nodes. */
static const char *node_at(cg_ctx *c, const char *text, size_t at) {
  const char *best = NULL;
  for (const char *p = strstr(text, "\n  /* "); p && (size_t)(p - text) < at; p = strstr(p + 1, "\n  /* ")) {
    int id = -1;
    if (sscanf(p + 6, "%d", &id) == 1 && id >= 0 && id < c->g->n_nodes && c->g->nodes[id]->name) best = c->g->nodes[id]->name;
  }
  return best;
}

/* ------------------------------------------------------------ the merge */

/* One literal's Newton form on lo, lo+1, lo+2: v0 + d1 t + d2 t(t-1)/2, t = S - lo. */
typedef struct {
  int64_t v0, d1, d2;
} poly;

static int64_t poly_at(poly p, int64_t t) { return p.v0 + p.d1 * t + p.d2 * (t * (t - 1) / 2); }

/* Writes p as C over S, cast to the type a literal of its values and suffix has
 * in C (int or long; unsigned or unsigned long; long long; unsigned long long). */
static void poly_c(cg_buf *b, poly p, int64_t lo, char sfx, int64_t most) {
  const char *ty = sfx == 'U' ? "unsigned long long" : sfx == 'L' ? "long long" : sfx == 'u' ? (most > 4294967295LL ? "unsigned long" : "unsigned")
                                                                                    : (most > 2147483647LL ? "long" : "int");
  if (!p.d1 && !p.d2) {
    cg_buf_printf(b, "%lld%s", (long long)p.v0, sfx == 'U' ? "ull" : sfx == 'L' ? "ll" : sfx == 'u' ? "u" : "");
    return;
  }
  if (p.d2 % 2 == 0) { /* a S^2 + b S + c */
    int64_t a = p.d2 / 2, bb = p.d1 - a - 2 * a * lo, cc = p.v0 - (p.d1 - a) * lo + a * lo * lo;
    cg_buf_printf(b, "((%s)(", ty);
    const char *sep = "";
    if (a) cg_buf_printf(b, a == 1 ? "S * S" : "%lld * S * S", (long long)a), sep = " + ";
    if (bb) cg_buf_printf(b, bb == 1 ? "%sS" : "%s%lld * S", sep, (long long)bb), sep = " + ";
    if (cc || !*sep) cg_buf_printf(b, "%s%lld", sep, (long long)cc);
    cg_buf_printf(b, "))");
  } else {
    cg_buf_printf(b, "((%s)(%lld + %lld * (S - %lld) + %lld * ((S - %lld) * (S - %lld) / 2)))", ty, (long long)p.v0,
                  (long long)p.d1, (long long)lo, (long long)p.d2, (long long)lo, (long long)lo + 1);
  }
}

/* The fitted text of ref: each literal that varies written as its polynomial. A
 * file-scope "static const" line (model.c's constants) holding one, or naming a
 * line moved before it, is moved to the marker "/ *@seq-locals@* /" as an
 * automatic constant. NULL on OOM. */
static char *merged_text(const cut *ref, const poly *fit, const char *vary, const int64_t *most, int64_t lo) {
  cg_buf out = {0}, moved = {0}, line = {0}, names = {0};
  cg_buf_printf(&names, " ");
  const char *s = ref->s;
  size_t pos = 0;
  int li = 0;
  while (s[pos]) {
    const char *nl = strchr(s + pos, '\n');
    size_t end = nl ? (size_t)(nl - s) + 1 : strlen(s);
    int any = 0;
    line.len = 0;
    if (line.s) line.s[0] = 0;
    size_t p = pos;
    for (; li < ref->n && ref->at[li] < end; li++) {
      cg_buf_printf(&line, "%.*s", (int)(ref->at[li] - p), s + p);
      if (vary[li]) poly_c(&line, fit[li], lo, ref->sfx[li], most[li]), any = 1;
      else cg_buf_printf(&line, "%.*s", (int)ref->len[li], s + ref->at[li]);
      p = ref->at[li] + ref->len[li];
    }
    cg_buf_printf(&line, "%.*s", (int)(end - p), s + p);
    const char *ln = line.s ? line.s : "";
    if (!strncmp(ln, "static const ", 13)) {
      /* its name: the identifier before '[' or ' =' */
      char name[64] = "";
      const char *q = strstr(ln, " cg_k");
      if (q) sscanf(q + 1, "%63[A-Za-z0-9_]", name);
      for (const char *r = strstr(ln, "cg_k"); r && !any; r = strstr(r + 1, "cg_k")) {
        char ref_name[66] = " ";
        sscanf(r, "%63[A-Za-z0-9_]", ref_name + 1);
        strcat(ref_name, " ");
        if (names.s && strstr(names.s, ref_name)) any = 1;
      }
      if (any && *name) {
        cg_buf_printf(&names, "%s ", name);
        cg_buf_printf(&moved, "  %s", ln + 7); /* drop "static " */
        pos = end;
        continue;
      }
    }
    cg_buf_printf(&out, "%s", ln);
    pos = end;
  }
  cg_buf_free(&line);
  int names_failed = names.failed;
  cg_buf_free(&names);
  char *r = NULL;
  const char *mark = out.s ? strstr(out.s, "/*@seq-locals@*/\n") : NULL;
  if (mark && !out.failed && !moved.failed && !names_failed) {
    cg_buf fin = {0};
    cg_buf_printf(&fin, "%.*s%s%s", (int)(mark - out.s), out.s, moved.s ? moved.s : "", mark + 17);
    r = fin.failed ? NULL : fin.s;
    if (!r) cg_buf_free(&fin);
  }
  cg_buf_free(&out);
  cg_buf_free(&moved);
  return r;
}

/* ------------------------------------------------------------ the driver */

#define HASH_MARK "0x5e9a5e9a5e9a5e9aull"

/* x's project text: model.h, a separator, model.c, the weights checksum (which
 * covers constants no kernel reads, such as Reshape targets) marked. */
static void sample_text(cg_buf *b, cg_ctx *c, const char *model_h, const char *model_c) {
  char hash[32];
  snprintf(hash, sizeof hash, "0x%016llxull", (unsigned long long)cg_weights_hash(c));
  const char *parts[2] = {model_h, model_c};
  for (int k = 0; k < 2; k++) {
    if (k) cg_buf_printf(b, "\n/*@model.c@*/\n");
    for (const char *p = parts[k], *q; *p; p = q + strlen(hash)) {
      q = strstr(p, hash);
      if (!q) {
        cg_buf_printf(b, "%s", p);
        break;
      }
      cg_buf_printf(b, "%.*s" HASH_MARK, (int)(q - p), p);
    }
  }
}

/* Whether text reads the weights at offset off ("W + off" with no digit after). */
static int reads_weight(const char *text, size_t off) {
  char key[40];
  snprintf(key, sizeof key, "(W + %zu)", off);
  return strstr(text, key) != NULL;
}

/* Where x's weights payload differs from the reference's (ref, nref bytes) in a
 * constant that the code reads: its name, else NULL (they agree, or only in
 * constants no kernel reads: every one is still written from the reference). */
static const char *weights_differ(cg_ctx *rc, const unsigned char *ref, size_t nref, cg_ctx *x, const char *text,
                                  int *failed) {
  size_t n = 0;
  unsigned char *p = cg_weights_payload(x, &n);
  const char *why = NULL;
  if (!p) {
    *failed = 1;
    return "out of memory";
  }
  if (n != nref) why = "its weights payload";
  for (int v = 0; !why && v < rc->g->n_values; v++) {
    const cg_place *pl = &rc->place[v];
    const mg_value *val = rc->g->values[v];
    if (pl->at != CG_AT_WEIGHT || pl->offset + val->nbytes > n) continue;
    if (memcmp(ref + pl->offset, p + pl->offset, val->nbytes) && reads_weight(text, pl->offset))
      why = val->name ? val->name : "a constant";
  }
  mg_free(p);
  return why;
}

/* One length's project text. */
typedef struct {
  mg_model *m;
  cg_ctx c;
  cg_report r;
  cg_options o; /* the caller's, kernel choices pinned */
  char *model_c, *model_h;
  int ready; /* c must be freed */
} sample;

static void sample_free(sample *s) {
  if (s->ready) cg_ctx_free(&s->c);
  mg_model_free(s->m);
  mg_free(s->model_c);
  mg_free(s->model_h);
  memset(s, 0, sizeof *s);
}

/* The arena plan at the longest length, which every shorter one uses: each
 * buffer's slot holds it at any length up to that one, so the offsets are
 * constants (checked by cg_plan_verify at each length, never assumed). */
typedef struct {
  int n;
  int *value;
  size_t *offset;
  size_t arena, lower_bound;
} max_layout;

static int layout_take(max_layout *l, const cg_ctx *c) {
  l->n = c->n_buffers;
  l->arena = c->arena_bytes;
  l->lower_bound = c->lower_bound;
  l->value = mg_malloc(sizeof *l->value * (size_t)(l->n + 1));
  l->offset = mg_malloc(sizeof *l->offset * (size_t)(l->n + 1));
  if (!l->value || !l->offset) return -1;
  for (int i = 0; i < l->n; i++) l->value[i] = c->buffers[i].value, l->offset[i] = c->buffers[i].offset;
  return 0;
}

/* Gives c's buffers l's offsets; 0, or -1 when c's buffers are not l's (a plan
 * that differs in structure) or the plan breaks at c's sizes. */
static int layout_apply(const max_layout *l, cg_ctx *c) {
  if (c->n_buffers != l->n) return -1;
  for (int i = 0; i < l->n; i++) {
    if (c->buffers[i].value != l->value[i]) return -1;
    c->buffers[i].offset = l->offset[i];
  }
  for (int v = 0; v < c->g->n_values; v++) {
    cg_place *p = &c->place[v];
    if (p->at != CG_AT_ARENA) continue;
    int hit = 0;
    for (int i = 0; i < l->n && !hit; i++)
      if (l->value[i] == p->root) p->offset = l->offset[i], hit = 1;
    if (!hit) return -1;
  }
  c->arena_bytes = l->arena;
  mg_diags quiet;
  mg_diags_init(&quiet);
  int rc = cg_plan_verify(c, &quiet);
  mg_diags_free(&quiet);
  return rc;
}

static void layout_free(max_layout *l) {
  mg_free(l->value);
  mg_free(l->offset);
  memset(l, 0, sizeof *l);
}

/* Emits m at length s with io_seq (by graph input then output: the sequence's
 * axis, -1 none); 0, or -1 when it cannot be (OOM, the model not preparable). */
static int emit_at(sample *x, const mg_model *m, const cg_options *o, const char *sym, int64_t s, int64_t lo,
                   int64_t hi, const signed char *io_seq, const max_layout *lay, mg_diags *d) {
  memset(x, 0, sizeof *x);
  if (!(x->m = prepared_at(m, sym, s))) return -1;
  x->o = *o;
  x->o.seq_symbolic = 1;
  int rc = cg_prepare_ctx(&x->c, x->m, &x->o, &x->r, d);
  x->ready = 1;
  if (rc || (lay && layout_apply(lay, &x->c))) return -1;
  x->c.seq_sym = sym, x->c.seq_now = s, x->c.seq_lo = lo, x->c.seq_hi = hi, x->c.io_seq = io_seq;
  x->r.n_unsupported = cg_emit_body(&x->c);
  for (int i = 0; i < x->c.g->n_nodes; i++) x->r.n_nodes += !x->c.absorbed[i];
  x->model_c = cg_model_sources(&x->c, &x->model_h);
  return x->model_c && x->model_h && !x->c.body.failed && !x->c.statics.failed ? 0 : -1;
}

/* The sequence's axis in each graph input and output (-1: none), from m prepared
 * at two lengths; NULL when an output carries it otherwise than as one axis of
 * length S. */
static signed char *seq_axes(const mg_model *m, const char *sym, int64_t lo) {
  mg_model *a = prepared_at(m, sym, lo), *b = prepared_at(m, sym, lo + 1);
  signed char *ax = NULL;
  if (!a || !b || a->graph->n_outputs != b->graph->n_outputs) goto out;
  mg_graph *ga = a->graph, *gb = b->graph;
  int n = ga->n_inputs + ga->n_outputs;
  if (!(ax = mg_malloc((size_t)(n ? n : 1)))) goto out;
  for (int i = 0; i < n; i++) {
    const mg_value *u = i < ga->n_inputs ? ga->inputs[i] : ga->outputs[i - ga->n_inputs];
    const mg_value *w = i < ga->n_inputs ? gb->inputs[i] : gb->outputs[i - ga->n_inputs];
    ax[i] = -1;
    if (u->shape.rank != w->shape.rank) goto bad;
    for (int k = 0; k < u->shape.rank; k++) {
      if (u->shape.d[k].v == w->shape.d[k].v) continue;
      if (ax[i] >= 0 || k == 0 || u->shape.d[k].v != lo || w->shape.d[k].v != lo + 1) goto bad;
      ax[i] = (signed char)k;
    }
  }
  goto out;
bad:
  mg_free(ax);
  ax = NULL;
out:
  mg_model_free(a);
  mg_model_free(b);
  return ax;
}

int cg_seq_emit(mg_model *m, const cg_options *o, const char *dir, cg_report *r, mg_diags *d) {
  const char *sym;
  if (!cg_seq_find(m->graph, &sym)) return 1;
  int64_t lo = 1, hi = o->seq_max > 0 ? o->seq_max : CG_SEQ_DEFAULT_MAX;
  const char *bsym = NULL;
  for (int i = 0; i < m->graph->n_inputs; i++)
    if (m->graph->inputs[i]->shape.rank > 0 && m->graph->inputs[i]->shape.d[0].v < 0) bsym = m->graph->inputs[i]->shape.d[0].sym;
  if (!bsym) {
    mg_warn(d, SHAPE, NULL, NULL, "cpu: symbolic sequence '%s' without a symbolic batch: not made symbolic", sym);
    return 1;
  }
  mg_diags quiet;
  mg_diags_init(&quiet);
  int result = 1;
  for (; lo <= 3 && result == 1; lo++) {
    signed char *io_seq = seq_axes(m, sym, lo);
    if (!io_seq) {
      if (lo == 3)
        mg_warn(d, SHAPE, NULL, NULL,
                "cpu: symbolic sequence '%s': an input or output holds it otherwise than as one axis of length %s, "
                "or the model cannot be prepared at a fixed length; not made symbolic", sym, sym);
      continue;
    }
    sample ref, fit[CG_SEQ_FIT - 1], cur;
    max_layout lay = {0};
    memset(fit, 0, sizeof fit);
    memset(&ref, 0, sizeof ref);
    /* the plan of the longest length first */
    if (emit_at(&cur, m, o, sym, hi, lo, hi, io_seq, NULL, &quiet) || layout_take(&lay, &cur.c)) {
      sample_free(&cur);
      layout_free(&lay);
      mg_free(io_seq);
      continue;
    }
    sample_free(&cur);
    cut cref = {0}, cx = {0};
    poly *pl = NULL;
    char *vary = NULL;
    int64_t *most = NULL;
    int64_t agree = lo - 1; /* the last length whose text agrees */
    const char *why = NULL, *at_node = NULL;
    char whybuf[256];
    if (emit_at(&ref, m, o, sym, lo, lo, hi, io_seq, &lay, &quiet)) goto next;
    /* the header and model.c are cut as one text, a NUL-free separator between */
    cg_buf both = {0};
    size_t nref = 0;
    unsigned char *wref = NULL;
    sample_text(&both, &ref.c, ref.model_h, ref.model_c);
    if (both.failed || cut_text(&cref, both.s) || !(wref = cg_weights_payload(&ref.c, &nref))) goto next_both;
    pl = mg_calloc((size_t)cref.n + 1, sizeof *pl);
    vary = mg_calloc((size_t)cref.n + 1, 1);
    most = mg_calloc((size_t)cref.n + 1, sizeof *most);
    if (!pl || !vary || !most) goto next_both;
    for (int i = 0; i < cref.n; i++) pl[i].v0 = cref.val[i], most[i] = cref.val[i];
    agree = lo;
    for (int64_t s = lo + 1; s <= hi; s++) {
      sample *x = s < lo + CG_SEQ_FIT ? &fit[s - lo - 1] : &cur;
      if (emit_at(x, m, o, sym, s, lo, hi, io_seq, &lay, &quiet)) {
        why = "the model cannot be prepared at that length, or its arena plan differs in structure";
        sample_free(x);
        break;
      }
      cg_buf bx = {0};
      sample_text(&bx, &x->c, x->model_h, x->model_c);
      long long diff = bx.failed || cut_text(&cx, bx.s) ? 0 : first_difference(&cref, &cx);
      int oom = 0;
      const char *wname = diff < 0 ? weights_differ(&ref.c, wref, nref, &x->c, both.s, &oom) : NULL;
      if (wname) {
        snprintf(whybuf, sizeof whybuf, "constant '%.160s', which a kernel reads, depends on the length", wname);
        why = oom ? "out of memory" : whybuf;
        diff = 0;
      }
      if (diff >= 0) {
        why = "its code differs in structure (a kernel or plan chosen by the length)";
        const char *mc = strstr(both.s, "/*@model.c@*/");
        at_node = mc && both.s + diff > mc ? node_at(&ref.c, both.s, (size_t)diff) : NULL;
      }
      for (int i = 0; diff < 0 && i < cref.n; i++) {
        int64_t v = cx.val[i], t = s - lo;
        if (v > most[i]) most[i] = v;
        if (t == 1) pl[i].d1 = v - pl[i].v0;
        else if (t == 2) pl[i].d2 = v - 2 * (pl[i].v0 + pl[i].d1) + pl[i].v0;
        else if (poly_at(pl[i], t) != v) {
          why = "a size in its code is no polynomial of degree 2 or less in the length";
          const char *mc = strstr(both.s, "/*@model.c@*/");
          at_node = mc && both.s + cref.at[i] > mc ? node_at(&ref.c, both.s, cref.at[i]) : NULL;
          diff = 0;
        }
        vary[i] |= v != cref.val[i];
      }
      cut_free(&cx);
      cg_buf_free(&bx);
      if (x == &cur) sample_free(&cur);
      if (diff >= 0) break;
      agree = s;
    }
    if (agree - lo + 1 < CG_SEQ_MIN_AGREE) goto next_both;
    if (agree < hi) {
      mg_warn(d, SHAPE, at_node, NULL,
              "cpu: symbolic sequence '%s': at %s=%lld %s%s%s; the generated code takes %s %lld to %lld", sym, sym,
              (long long)agree + 1, why ? why : "the code differs", at_node ? " at node " : "", at_node ? at_node : "",
              sym, (long long)lo, (long long)agree);
      hi = agree;
    }
    /* the project: the reference sample's files, its texts merged; diagnostics
     * are those of the reference length, emitted once more with the real sink */
    sample_free(&ref);
    if (emit_at(&ref, m, o, sym, lo, lo, hi, io_seq, &lay, d)) {
      result = -1;
      goto next_both;
    }
    cg_buf_free(&both);
    cut_free(&cref);
    sample_text(&both, &ref.c, ref.model_h, ref.model_c);
    if (both.failed || cut_text(&cref, both.s)) {
      result = -1;
      goto next_both;
    }
    char *text = merged_text(&cref, pl, vary, most, lo);
    char *sep = text ? strstr(text, "\n/*@model.c@*/\n") : NULL;
    if (!sep) {
      mg_free(text);
      mg_error(d, OOM, NULL, NULL, "out of memory generating C");
      result = -1;
      goto next_both;
    }
    *sep = 0;
    *r = ref.r;
    r->arena_bytes = lay.arena;
    r->lower_bound = lay.lower_bound;
    char hash[32];
    snprintf(hash, sizeof hash, "0x%016llxull", (unsigned long long)cg_weights_hash(&ref.c));
    for (char *q = text; (q = strstr(q, HASH_MARK)); q += strlen(hash)) memcpy(q, hash, strlen(hash));
    for (char *q = sep + 15; (q = strstr(q, HASH_MARK)); q += strlen(hash)) memcpy(q, hash, strlen(hash));
    result = dir ? cg_write_project(&ref.c, dir, sep + 15, text) : 0;
    mg_free(text);
  next_both:
    cg_buf_free(&both);
    mg_free(wref);
  next:
    cut_free(&cref);
    mg_free(pl);
    mg_free(vary);
    mg_free(most);
    sample_free(&ref);
    for (int k = 0; k < CG_SEQ_FIT - 1; k++) sample_free(&fit[k]);
    mg_free(io_seq);
    layout_free(&lay);
    if (result == 1 && lo == 3)
      mg_warn(d, SHAPE, NULL, NULL, "cpu: symbolic sequence '%s': %s; not made symbolic", sym,
              why ? why : "the model's code does not agree at five lengths");
  }
  mg_diags_free(&quiet);
  return result;
}


