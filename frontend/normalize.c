/* Old-opset forms into the canonical IR form. Each rule here is one opset change
 * from the ONNX changelog; the canonical form is the newest. */
#include "import_internal.h"
#include <stdio.h>
#include <string.h>

int import_take_attr(mg_node *n, const char *name, mg_attr *out) {
  for (int i = 0; i < n->n_attr; i++)
    if (!strcmp(n->attr[i].name, name)) {
      if (out) *out = n->attr[i];
      memmove(&n->attr[i], &n->attr[i + 1], sizeof(mg_attr) * (size_t)(n->n_attr - i - 1));
      n->n_attr--;
      return 1;
    }
  return 0;
}

int import_widen_inputs(import_ctx *c, mg_node *n, int count) {
  if (count <= n->n_in) return 0;
  mg_value **in = mg_arena_alloc(&c->m->arena, sizeof(mg_value *) * (size_t)count);
  if (!in) {
    c->oom = 1;
    return -1;
  }
  memcpy(in, n->in, sizeof(mg_value *) * (size_t)n->n_in);
  n->in = in;
  n->n_in = count;
  return 0;
}

/* Appends an attribute (the node's array has no spare room, so it is copied). */
static mg_attr *push_attr(import_ctx *c, mg_node *n, const char *name, mg_attr_kind kind) {
  mg_attr *a = mg_arena_alloc(&c->m->arena, sizeof(mg_attr) * (size_t)(n->n_attr + 1));
  if (!a) {
    c->oom = 1;
    return NULL;
  }
  memcpy(a, n->attr, sizeof(mg_attr) * (size_t)n->n_attr);
  n->attr = a;
  mg_attr *r = &a[n->n_attr++];
  r->name = name;
  r->kind = kind;
  return r;
}

static int set_int(import_ctx *c, mg_node *n, const char *name, int64_t v) {
  import_take_attr(n, name, NULL);
  mg_attr *a = push_attr(c, n, name, MG_ATTR_INT);
  if (!a) return -1;
  a->i = v;
  return 0;
}

static int set_str(import_ctx *c, mg_node *n, const char *name, const char *v) {
  import_take_attr(n, name, NULL);
  mg_attr *a = push_attr(c, n, name, MG_ATTR_STRING);
  if (!a) return -1;
  a->s = v;
  return 0;
}

/* Linear Upsample and Resize-10 are asymmetric by definition, and that is what
 * migc computes; PyTorch's exporter writes them for interpolate(align_corners=
 * False), which is half-pixel, so such a model differs from its torch source. */
static void warn_asymmetric_linear(import_ctx *c, const mg_node *n) {
  mg_warn(c->d, GRAPH, n->name, n->op_type,
          "linear %s before opset 11 samples with asymmetric coordinates, as ONNX defines it; "
          "torch's exporter writes it for interpolate(align_corners=False), which samples pixel centres, "
          "so the outputs differ from the torch model's: re-export at opset 11 or later",
          n->op_type);
}

/* A helper node inserted by normalisation, with fresh output values. */
static mg_node *helper_node(import_ctx *c, mg_graph *g, mg_op op, const mg_node *base,
                            int n_in, int n_out) {
  char name[512];
  snprintf(name, sizeof name, "%s/%s_%d", base->name, mg_op_name(op), c->anon++);
  mg_node *h = mg_node_new(g, op, name, n_in, n_out);
  if (!h) goto oom;
  h->opset = base->opset;
  h->synthetic = 1;
  for (int i = 0; i < n_out; i++) {
    char vn[600];
    mg_value *v, *existing;
    int k = 0;
    do {
      snprintf(vn, sizeof vn, "%s:%d%s%d", name, i, k ? "_" : "", k);
      v = mg_value_new(g, vn, &existing);
      k++;
    } while (!v && existing);
    if (!v) goto oom;
    v->producer = h;
    v->producer_slot = i;
    h->out[i] = v;
  }
  h->attr = mg_arena_alloc(&c->m->arena, sizeof(mg_attr));
  if (!h->attr || mg_graph_push_node(g, h)) goto oom;
  return h;
oom:
  c->oom = 1;
  return NULL;
}

static int finish_helper(import_ctx *c, mg_node *h) { return canonicalise_attrs(c, h); }

static mg_value *const_i64(import_ctx *c, mg_graph *g, const mg_node *n, const int64_t *v,
                           size_t count, int scalar) {
  int64_t dim = (int64_t)count;
  return import_const(c, g, n->name, MG_I64, scalar ? 0 : 1, &dim, v);
}

/* Attribute `name` (ints) becomes input `slot`, as an int64 vector constant. */
static int ints_attr_to_input(import_ctx *c, mg_graph *g, mg_node *n, const char *name,
                              int slot) {
  mg_attr a;
  if (!import_take_attr(n, name, &a)) return 0;
  if (a.kind != MG_ATTR_INTS) {
    mg_error(c->d, INVALID, n->name, n->op_type, "attribute '%s' must be a list of ints", name);
    return -1;
  }
  if (import_widen_inputs(c, n, slot + 1)) return -1;
  if (n->in[slot]) {
    mg_error(c->d, INVALID, n->name, n->op_type, "'%s' given both as attribute and input", name);
    return -1;
  }
  n->in[slot] = const_i64(c, g, n, a.ints, a.n, 0);
  return n->in[slot] ? 0 : -1;
}

/* Attribute `name` (float) becomes input `slot`, a scalar of dtype dt. */
static int float_attr_to_input(import_ctx *c, mg_graph *g, mg_node *n, const char *name,
                               int slot, mg_dtype dt) {
  mg_attr a;
  if (!import_take_attr(n, name, &a)) return 0;
  if (a.kind != MG_ATTR_FLOAT) {
    mg_error(c->d, INVALID, n->name, n->op_type, "attribute '%s' must be a float", name);
    return -1;
  }
  if (import_widen_inputs(c, n, slot + 1)) return -1;
  unsigned char buf[8];
  if (dt == MG_F64) { double x = a.f; memcpy(buf, &x, 8); }
  else if (dt == MG_F16) { uint16_t h = mg_f32_to_f16(a.f); memcpy(buf, &h, 2); }
  else if (dt == MG_BF16) { uint16_t h = mg_f32_to_bf16(a.f); memcpy(buf, &h, 2); }
  else { dt = MG_F32; memcpy(buf, &a.f, 4); }
  n->in[slot] = import_const(c, g, n->name, dt, 0, NULL, buf);
  return n->in[slot] ? 0 : -1;
}

static int known_rank(const mg_value *v) {
  if (!v) return -1;
  if (v->shape.rank >= 0) return v->shape.rank;
  return v->decl_shape.rank;
}

static mg_dtype known_dtype(const mg_value *v) {
  if (!v) return MG_UNDEFINED;
  return v->dtype ? v->dtype : v->decl_dtype;
}

/* Opset < 7 binary ops broadcast B against A from `axis` when broadcast=1. The
 * canonical (numpy) form aligns trailing dims, so B gets trailing 1s appended. */
static int legacy_broadcast(import_ctx *c, mg_graph *g, mg_node *n) {
  mg_attr bc, ax;
  int has_bc = import_take_attr(n, "broadcast", &bc);
  int has_axis = import_take_attr(n, "axis", &ax);
  if (!has_bc || bc.i == 0 || !has_axis || n->n_in < 2 || !n->in[1]) return 0;
  int ra = known_rank(n->in[0]), rb = known_rank(n->in[1]);
  int64_t axis = ax.i;
  if (ra >= 0 && axis < 0) axis += ra;
  if (ra >= 0 && rb >= 0) {
    int64_t pad = ra - axis - rb;
    if (pad < 0 || axis < 0) {
      mg_error(c->d, SHAPE, n->name, n->op_type, "legacy broadcast axis %lld does not fit",
               (long long)ax.i);
      return -1;
    }
    if (pad == 0) return 0;
    int64_t axes[MG_MAX_RANK];
    for (int64_t i = 0; i < pad; i++) axes[i] = rb + i;
    mg_node *u = helper_node(c, g, MG_OP_Unsqueeze, n, 2, 1);
    if (!u) return -1;
    u->in[0] = n->in[1];
    u->in[1] = const_i64(c, g, n, axes, (size_t)pad, 0);
    if (!u->in[1]) return -1;
    n->in[1] = u->out[0];
    return finish_helper(c, u);
  }
  if (axis < 0) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type,
             "legacy broadcast with a negative axis needs A's rank, which is unknown");
    return -1;
  }
  /* Ranks unknown at import: build B's new shape in the graph; folding makes it
   * static once shapes are known. newshape = concat(shape(B), ones(rank(A)-axis-rank(B))) */
  mg_node *sa = helper_node(c, g, MG_OP_Shape, n, 1, 1);
  mg_node *ra_n = sa ? helper_node(c, g, MG_OP_Size, n, 1, 1) : NULL;
  mg_node *sb = ra_n ? helper_node(c, g, MG_OP_Shape, n, 1, 1) : NULL;
  mg_node *rb_n = sb ? helper_node(c, g, MG_OP_Size, n, 1, 1) : NULL;
  mg_node *s1 = rb_n ? helper_node(c, g, MG_OP_Sub, n, 2, 1) : NULL;
  mg_node *s2 = s1 ? helper_node(c, g, MG_OP_Sub, n, 2, 1) : NULL;
  mg_node *un = s2 ? helper_node(c, g, MG_OP_Unsqueeze, n, 2, 1) : NULL;
  mg_node *ones = un ? helper_node(c, g, MG_OP_ConstantOfShape, n, 1, 1) : NULL;
  mg_node *cat = ones ? helper_node(c, g, MG_OP_Concat, n, 2, 1) : NULL;
  mg_node *rs = cat ? helper_node(c, g, MG_OP_Reshape, n, 2, 1) : NULL;
  if (!rs) return -1;
  int64_t zero = 0, one = 1;
  sa->in[0] = n->in[0];
  ra_n->in[0] = sa->out[0];
  sb->in[0] = n->in[1];
  rb_n->in[0] = sb->out[0];
  s1->in[0] = ra_n->out[0];
  s1->in[1] = const_i64(c, g, n, &axis, 1, 1);
  s2->in[0] = s1->out[0];
  s2->in[1] = rb_n->out[0];
  un->in[0] = s2->out[0];
  un->in[1] = const_i64(c, g, n, &zero, 1, 0);
  ones->in[0] = un->out[0];
  mg_attr *va = push_attr(c, ones, "value", MG_ATTR_TENSOR);
  if (!va || !s1->in[1] || !un->in[1]) return -1;
  va->t = mg_value_detached(c->m, "value");
  if (!va->t) return c->oom = 1, -1;
  va->t->kind = MG_V_CONST;
  va->t->dtype = MG_I64;
  va->t->shape.rank = 1;
  va->t->shape.d[0].v = 1;
  va->t->data = mg_arena_memdup(&c->m->arena, &one, 8);
  va->t->nbytes = 8;
  cat->in[0] = sb->out[0];
  cat->in[1] = ones->out[0];
  if (set_int(c, cat, "axis", 0)) return -1;
  rs->in[0] = n->in[1];
  rs->in[1] = cat->out[0];
  n->in[1] = rs->out[0];
  mg_node *all[] = {sa, ra_n, sb, rb_n, s1, s2, un, ones, cat, rs};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (finish_helper(c, all[i])) return -1;
  return 0;
}

/* Before opset 13, Softmax/LogSoftmax/Hardmax flattened the input to 2-D at `axis`
 * and normalised each row. The canonical form normalises one axis, so unless `axis`
 * is already the last one this becomes Flatten -> op(axis=-1) -> Reshape(Shape(X)). */
static int legacy_softmax(import_ctx *c, mg_graph *g, mg_node *n) {
  mg_attr ax;
  int64_t axis = import_take_attr(n, "axis", &ax) ? ax.i : 1;
  if (n->n_in < 1 || !n->in[0] || n->n_out < 1 || !n->out[0]) return set_int(c, n, "axis", axis);
  int r = known_rank(n->in[0]);
  if (r >= 0 && axis < 0) axis += r;
  if (r >= 0 && axis == r - 1) return set_int(c, n, "axis", -1);
  mg_node *shape = helper_node(c, g, MG_OP_Shape, n, 1, 1);
  mg_node *flat = shape ? helper_node(c, g, MG_OP_Flatten, n, 1, 1) : NULL;
  mg_node *back = flat ? helper_node(c, g, MG_OP_Reshape, n, 2, 1) : NULL;
  if (!back) return -1;
  shape->in[0] = n->in[0];
  flat->in[0] = n->in[0];
  if (set_int(c, flat, "axis", axis)) return -1;
  /* n now normalises the flattened rows; its old output comes from the Reshape. */
  mg_value *out = n->out[0];
  mg_value *row = back->out[0];
  n->in[0] = flat->out[0];
  n->out[0] = row;
  row->producer = n;
  back->out[0] = out;
  out->producer = back;
  back->in[0] = row;
  back->in[1] = shape->out[0];
  if (set_int(c, n, "axis", -1)) return -1;
  if (finish_helper(c, shape) || finish_helper(c, flat) || finish_helper(c, back)) return -1;
  return 0;
}

static int is_reduce(mg_op op) { return mg_op_get(op)->shape_rule == MG_SH_REDUCE; }

static const char *const legacy_binary[] = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or",
                                            "Xor", "Equal", "Greater", "Less"};

/* PRelu before opset 7 took a per-channel slope of shape [C]; numpy broadcasting
 * needs [C, 1, ..., 1] to line it up with X's axis 1. */
static int legacy_prelu(import_ctx *c, mg_graph *g, mg_node *n) {
  if (n->n_in < 2 || !n->in[1]) return 0; /* arity is checked after normalisation */
  int rx = known_rank(n->in[0]), rs = known_rank(n->in[1]);
  if (rs != 1 || rx < 3) return 0;
  int64_t axes[MG_MAX_RANK];
  for (int i = 0; i < rx - 2; i++) axes[i] = 1 + i;
  mg_node *u = helper_node(c, g, MG_OP_Unsqueeze, n, 2, 1);
  if (!u) return -1;
  u->in[0] = n->in[1];
  u->in[1] = const_i64(c, g, n, axes, (size_t)(rx - 2), 0);
  if (!u->in[1]) return -1;
  n->in[1] = u->out[0];
  return finish_helper(c, u);
}

int normalize_node(import_ctx *c, mg_graph *g, mg_node *n, int64_t opset) {
  /* consumed_inputs (opset 1) was a memory-reuse hint with no effect on values. */
  import_take_attr(n, "consumed_inputs", NULL);
  if (n->op == MG_OP_UNKNOWN) {
    if (!strcmp(n->op_type, "Scatter")) {
      n->op = MG_OP_ScatterElements;
      n->op_type = "ScatterElements";
      return 0;
    }
    if (!strcmp(n->op_type, "Upsample")) {
      /* Upsample(X, scales) == Resize(X, roi="", scales) with asymmetric coordinates
       * and floor rounding for nearest. */
      mg_attr mode;
      const char *m = import_take_attr(n, "mode", &mode) ? mode.s : "nearest";
      if (!m || (strcmp(m, "nearest") && strcmp(m, "linear") && strcmp(m, "bilinear"))) {
        mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "Upsample mode '%s'", m ? m : "");
        return -1;
      }
      if (import_take_attr(n, "height_scale", NULL) || import_take_attr(n, "width_scale", NULL)) {
        mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type,
                 "opset-1 Upsample (height_scale/width_scale) is not supported");
        return -1;
      }
      mg_attr sc;
      mg_value *x = n->in[0], *scales = n->n_in > 1 ? n->in[1] : NULL;
      if (import_take_attr(n, "scales", &sc)) {
        int64_t d = (int64_t)sc.n;
        scales = import_const(c, g, n->name, MG_F32, 1, &d, sc.floats);
        if (!scales) return -1;
      }
      if (!scales) {
        mg_error(c->d, INVALID, n->name, n->op_type, "Upsample without scales");
        return -1;
      }
      n->n_in = 0;
      if (import_widen_inputs(c, n, 3)) return -1;
      n->in[0] = x, n->in[1] = NULL, n->in[2] = scales;
      if (strcmp(m, "nearest")) warn_asymmetric_linear(c, n);
      n->op = MG_OP_Resize;
      n->op_type = "Resize";
      return set_str(c, n, "mode", strcmp(m, "nearest") ? "linear" : "nearest") ||
             set_str(c, n, "coordinate_transformation_mode", "asymmetric") ||
             set_str(c, n, "nearest_mode", "floor");
    }
    return 0;
  }
  if (opset < 7 && n->op == MG_OP_PRelu) return legacy_prelu(c, g, n);
  if (opset < 9 && n->op == MG_OP_Scan) {
    /* Scan-8 had a batch axis and sequence_lens; migc supports the opset-9 form. */
    n->op = MG_OP_UNKNOWN;
    n->op_type = "Scan-8";
    return 0;
  }
  if (opset < 7)
    for (size_t i = 0; i < sizeof legacy_binary / sizeof legacy_binary[0]; i++)
      if (!strcmp(n->op_type, legacy_binary[i])) return legacy_broadcast(c, g, n);
  if (is_reduce(n->op) && opset < (n->op == MG_OP_ReduceSum ? 13 : 18))
    return ints_attr_to_input(c, g, n, "axes", 1);
  switch (n->op) {
  case MG_OP_Gemm:
    import_take_attr(n, "broadcast", NULL); /* opset < 7: Gemm always broadcasts C now */
    return 0;
  case MG_OP_BatchNormalization: {
    mg_attr sp;
    import_take_attr(n, "is_test", NULL);
    if (import_take_attr(n, "spatial", &sp) && sp.i == 0) {
      mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type,
               "spatial=0 (per-activation statistics) is not supported");
      return -1;
    }
    /* Opset < 9 inference-mode nodes may list five outputs; all but Y are unused. */
    for (int i = 1; opset < 14 && i < n->n_out; i++)
      if (n->out[i]) {
        n->out[i]->producer = NULL;
        n->out[i] = NULL;
      }
    return 0;
  }
  case MG_OP_Dropout:
    import_take_attr(n, "is_test", NULL);
    return opset < 12 ? float_attr_to_input(c, g, n, "ratio", 1, MG_F32) : 0;
  case MG_OP_Slice:
    if (opset >= 10) return 0;
    return ints_attr_to_input(c, g, n, "starts", 1) || ints_attr_to_input(c, g, n, "ends", 2) ||
           ints_attr_to_input(c, g, n, "axes", 3);
  case MG_OP_Pad:
    if (opset >= 11) return 0;
    if (ints_attr_to_input(c, g, n, "pads", 1) || ints_attr_to_input(c, g, n, "paddings", 1))
      return -1;
    return float_attr_to_input(c, g, n, "value", 2, known_dtype(n->in[0]));
  case MG_OP_Clip:
    if (opset >= 11) return 0;
    return float_attr_to_input(c, g, n, "min", 1, known_dtype(n->in[0])) ||
           float_attr_to_input(c, g, n, "max", 2, known_dtype(n->in[0]));
  case MG_OP_Split:
    return opset < 13 ? ints_attr_to_input(c, g, n, "split", 1) : 0;
  case MG_OP_Squeeze:
  case MG_OP_Unsqueeze:
    return opset < 13 ? ints_attr_to_input(c, g, n, "axes", 1) : 0;
  case MG_OP_Reshape:
    return opset < 5 ? ints_attr_to_input(c, g, n, "shape", 1) : 0;
  case MG_OP_RoiAlign:
    /* torchvision's roi_align symbolic (torch 1.13) is registered for opset 11
     * only: at opset 16 and later it still writes no coordinate_transformation_mode,
     * so the spec's new default, half_pixel, shifts every roi by half a pixel
     * where roi_align(aligned=False) does not (ONNX Runtime computes the same as
     * migc). Computed as the file says, and said. */
    if (opset >= 16 && !mg_node_attr(n, "coordinate_transformation_mode") && c->m->producer_name &&
        !strcmp(c->m->producer_name, "pytorch"))
      mg_warn(c->d, GRAPH, n->name, n->op_type,
              "RoiAlign at opset %lld has no coordinate_transformation_mode, so it samples with half_pixel "
              "(the opset-16 default), as ONNX defines it; torch's exporter writes it so for "
              "roi_align(aligned=False), which samples without the half-pixel shift, so the outputs differ "
              "from the torch model's: set coordinate_transformation_mode=\"output_half_pixel\" or export "
              "at opset 15 or earlier",
              (long long)opset);
    return 0;
  case MG_OP_TopK: {
    mg_attr k;
    if (opset >= 10 || !import_take_attr(n, "k", &k)) return 0;
    if (import_widen_inputs(c, n, 2)) return -1;
    n->in[1] = const_i64(c, g, n, &k.i, 1, 0);
    return n->in[1] ? 0 : -1;
  }
  case MG_OP_Resize:
    if (opset >= 11) return 0;
    /* Resize-10 is (X, scales) with Upsample's coordinate rules. */
    if (import_widen_inputs(c, n, 3)) return -1;
    n->in[2] = n->in[1];
    n->in[1] = NULL;
    if (strcmp(mg_attr_str(n, "mode", "nearest"), "nearest")) warn_asymmetric_linear(c, n); /* Resize-10 */
    return set_str(c, n, "coordinate_transformation_mode", "asymmetric") ||
           set_str(c, n, "nearest_mode", "floor");
  case MG_OP_Softmax:
  case MG_OP_LogSoftmax:
  case MG_OP_Hardmax:
    return opset < 13 ? legacy_softmax(c, g, n) : 0;
  case MG_OP_Cast: {
    const mg_attr *to = mg_node_attr(n, "to");
    if (to && to->kind == MG_ATTR_STRING) { /* opset < 6 named the type */
      static const char *const names[] = {"", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                          "INT32", "INT64", "STRING", "BOOL", "FLOAT16",
                                          "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                          "COMPLEX128", "BFLOAT16"};
      for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(to->s, names[i])) return set_int(c, n, "to", i);
      mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "Cast to '%s'", to->s);
      return -1;
    }
    return 0;
  }
  case MG_OP_RNN:
  case MG_OP_GRU:
  case MG_OP_LSTM:
    import_take_attr(n, "output_sequence", NULL); /* opset < 7; outputs are optional now */
    return 0;
  case MG_OP_Concat:
    if (opset < 4 && !mg_node_attr(n, "axis")) return set_int(c, n, "axis", 1);
    return 0;
  default:
    return 0;
  }
}
