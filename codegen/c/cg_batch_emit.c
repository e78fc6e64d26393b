/* The generated API of a model with a symbolic batch (cg_batch.c decides which
 * models have one): model.h's declarations and model.c's batch loop. The model's
 * own code runs one batch element (run_one); run_batch calls it for each
 * element of the actual batch, each input and output at its element's offset. */
#include "cg_internal.h"

/* Bytes of one batch element of v (v's batch-1 shape), 0 when v has no batch axis. */
static size_t step_of(const mg_value *v, int batched) {
  int64_t n = mg_shape_numel(&v->shape);
  return batched && n > 0 ? (size_t)n * cg_elem_bytes(v->dtype) : 0;
}

void cg_batch_header(cg_ctx *c, cg_buf *h, const char *p, const char *P) {
  if (!c->batch.sym) return;
  cg_buf_printf(h, "\n/* Symbolic dims: one, the batch (\"");
  for (const char *q = c->batch.sym; *q; q++) /* a dim_param: anything but a comment's end */
    cg_buf_printf(h, "%c", (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                                   *q == '_' || *q == '-' || *q == '.' ? *q : '?');
  cg_buf_printf(h,
                "\"), the leading axis of the inputs and outputs that\n"
                " * %s_desc's in_batch / out_batch mark; their shapes in %s_inputs/outputs are\n"
                " * those of batch 1. Batch elements run one after another in the same arena, so\n"
                " * the workspace does not grow with the batch: arena(B) = %s_ARENA_BYTES. */\n"
                "#define %s_N_DIMS %d\n"
                "/* %s_init with the largest batch this instance will run (max_dims[0] >= 1, else\n"
                " * MG_RT_EARG); %s_init, %s_init_with%s take 1. */\n"
                "int %s_init_dims(%s_t *m, const char *weights_path, const int64_t *max_dims);\n"
                "/* Runs batch dims[0] (1 <= dims[0] <= the init maximum, else MG_RT_EARG before\n"
                " * anything is written), with buffers of dims[0] times the batch-1 bytes.\n"
                " * %s_run_v and %s_run_trace run batch 1, the shapes of %s_inputs/outputs. */\n"
                "int %s_run_dims_v(%s_t *m, const int64_t *dims, const void *const *inputs, void *const *outputs);\n",
                p, p, P, P, c->seq_sym ? 2 : 1, p, p, p, c->o->embed_weights ? " and _init_embedded" : "", p, p, p, p, p, p, p);
  if (c->seq_sym)
    cg_buf_printf(h,
                  "/* And a symbolic sequence: dims[1] (max_dims[1]) is its length, from %s_SEQ_MIN to\n"
                  " * %s_SEQ_MAX (else MG_RT_EARG), along the axis %s_desc's in_seq / out_seq give;\n"
                  " * %s_inputs/outputs describe length %s_SEQ_MIN, and %s_run_v runs it. */\n",
                  p, P, p, p, P, p);
}

void cg_batch_source(cg_ctx *c, cg_buf *b, const char *p) {
  if (!c->batch.sym) return;
  mg_graph *g = c->g;
  int ni = g->n_inputs ? g->n_inputs : 1, no = g->n_outputs ? g->n_outputs : 1;
  int sq = c->seq_sym != NULL;
  char P[64];
  snprintf(P, sizeof P, "%s", p);
  for (char *q = P; *q; q++)
    if (*q >= 'a' && *q <= 'z') *q = (char)(*q - 'a' + 'A');
  cg_buf steps = {0};
  cg_buf *st = sq ? &steps : b;
  const char *kw = sq ? "  const" : "static const";
  cg_buf_printf(st, "%s size_t %s_in_step[%d] = {", kw, p, ni);
  for (int i = 0; i < g->n_inputs; i++) cg_buf_printf(st, "%s%zuu", i ? ", " : "", step_of(g->inputs[i], c->batch.in_batch[i]));
  cg_buf_printf(st, "%s};\n%s size_t %s_out_step[%d] = {", g->n_inputs ? "" : "0", kw, p, no);
  for (int j = 0; j < g->n_outputs; j++)
    cg_buf_printf(st, "%s%zuu", j ? ", " : "", step_of(g->outputs[j], c->batch.out_batch[j]));
  cg_buf_printf(st, "%s};\n", g->n_outputs ? "" : "0");
  if (sq) {
    cg_buf_printf(b, "static const signed char %s_in_seq[%d] = {", p, ni);
    for (int i = 0; i < g->n_inputs; i++) cg_buf_printf(b, "%s%d", i ? ", " : "", c->io_seq[i]);
    cg_buf_printf(b, "%s};\nstatic const signed char %s_out_seq[%d] = {", g->n_inputs ? "" : "0", p, no);
    for (int j = 0; j < g->n_outputs; j++) cg_buf_printf(b, "%s%d", j ? ", " : "", c->io_seq[g->n_inputs + j]);
    cg_buf_printf(b, "%s};\n", g->n_outputs ? "" : "0");
  }
  cg_buf_printf(b, "static const char %s_in_batch[%d] = {", p, ni);
  for (int i = 0; i < g->n_inputs; i++) cg_buf_printf(b, "%s%d", i ? ", " : "", c->batch.in_batch[i]);
  cg_buf_printf(b, "%s};\nstatic const char %s_out_batch[%d] = {", g->n_inputs ? "" : "0", p, no);
  for (int j = 0; j < g->n_outputs; j++) cg_buf_printf(b, "%s%d", j ? ", " : "", c->batch.out_batch[j]);
  cg_buf_printf(b, "%s};\nstatic const char *const %s_dim_names[%d] = {", g->n_outputs ? "" : "0", p, sq ? 2 : 1);
  cg_buf_c_literal(b, c->batch.sym);
  if (sq) cg_buf_printf(b, ", "), cg_buf_c_literal(b, c->seq_sym);
  cg_buf_printf(b, "};\n\n");
  if (sq)
    cg_buf_printf(b,
                  "int %s_init_dims(%s_t *m, const char *weights_path, const int64_t *max_dims) {\n"
                  "  int rc;\n  size_t n;\n  void *ws;\n"
                  "  if (!m || !max_dims || max_dims[0] < 1 || max_dims[1] < %s_SEQ_MIN || max_dims[1] > %s_SEQ_MAX)\n"
                  "    return MG_RT_EARG;\n"
                  "  n = workspace_at(max_dims[1]);\n"
                  "  if (!(ws = malloc(n))) return MG_RT_ENOMEM;\n"
                  "  rc = init_at(m, weights_path, ws, n, max_dims[1]);\n"
                  "  if (rc) { free(ws); return rc; }\n"
                  "  m->owned_workspace = ws;\n  m->max_dims[0] = max_dims[0];\n  return MG_RT_OK;\n}\n\n",
                  p, p, P, P);
  else
  cg_buf_printf(b,
                "int %s_init_dims(%s_t *m, const char *weights_path, const int64_t *max_dims) {\n"
                "  int rc;\n"
                "  if (!m || !max_dims || max_dims[0] < 1) return MG_RT_EARG;\n"
                "  rc = %s;\n"
                "  if (!rc) m->max_dims[0] = max_dims[0];\n"
                "  return rc;\n}\n\n",
                p, p,
                c->o->embed_weights ? str(c, "weights_path ? %s_init(m, weights_path) : %s_init_embedded(m)", p, p)
                                    : str(c, "%s_init(m, weights_path)", p));
  /* dims are checked before the first element runs: a batch past the maximum
   * writes nothing */
  cg_buf_printf(b,
                "static int run_batch(%s_t *m, const int64_t *dims, const void *const *in, void *const *out,\n"
                "                     mg_rt_trace_fn trace, void *tctx) {\n"
                "%s"
                "  const void *inb[%d];\n  void *outb[%d];\n  int64_t e;\n  int i, rc;\n"
                "  if (!m || !dims || dims[0] < 1 || dims[0] > m->max_dims[0]%s) return MG_RT_EARG;\n%s"
                "  for (e = 0; e < dims[0]; e++) {\n"
                "    for (i = 0; i < %d; i++)\n"
                "      inb[i] = in[i] ? (const unsigned char *)in[i] + (size_t)e * %s_in_step[i] : in[i];\n"
                "    for (i = 0; i < %d; i++)\n"
                "      outb[i] = out[i] ? (unsigned char *)out[i] + (size_t)e * %s_out_step[i] : out[i];\n"
                "    rc = run_one(m, inb, outb, e ? 0 : trace, tctx);\n"
                "    if (rc) return rc;\n  }\n"
                "  for (i = 0; i < %d; i++)\n"
                "    if (%s_out_batch[i]) m->out_dims[%s_out_dims_at[i]] = dims[0];\n"
                "  return MG_RT_OK;\n}\n\n",
                p, sq ? str(c, "  const int64_t S = dims ? dims[1] : 0;\n%s", steps.s ? steps.s : "") : "", ni, no,
                sq ? str(c, " || S < %s_SEQ_MIN || S > m->max_dims[1]", P) : "",
                sq ? "  m->seq = S;\n" : "", g->n_inputs, p, g->n_outputs, p, g->n_outputs, p, p);
  if (steps.failed) c->body.failed = 1;
  cg_buf_free(&steps);
  cg_buf_printf(b,
                "int %s_run_dims_v(%s_t *m, const int64_t *dims, const void *const *in, void *const *out) {\n"
                "  return run_batch(m, dims, in, out, 0, 0);\n}\n\n"
                "int %s_run_trace(%s_t *m, const void *const *in, void *const *out, mg_rt_trace_fn trace,\n"
                "                 void *tctx) {\n"
                "  static const int64_t one[2] = {1, %s};\n"
                "  return run_batch(m, one, in, out, trace, tctx);\n}\n\n"
                "static int desc_init_dims(void *m, const char *weights_path, const int64_t *max_dims) {\n"
                "  return %s_init_dims((%s_t *)m, weights_path, max_dims);\n}\n"
                "static int desc_run_dims(void *m, const int64_t *dims, const void *const *in, void *const *out) {\n"
                "  return %s_run_dims_v((%s_t *)m, dims, in, out);\n}\n",
                p, p, p, p, sq ? str(c, "%s_SEQ_MIN", P) : "0", p, p, p, p);
}

const char *cg_batch_desc_tail(cg_ctx *c, const char *p) {
  if (!c->batch.sym) return "0, 0, 0, 0, 0, 0, 0, 0";
  if (c->seq_sym)
    return str(c, "2, %s_dim_names, %s_in_batch, %s_out_batch, desc_init_dims, desc_run_dims, %s_in_seq, %s_out_seq", p, p,
               p, p, p);
  return str(c, "1, %s_dim_names, %s_in_batch, %s_out_batch, desc_init_dims, desc_run_dims, 0, 0", p, p, p);
}
