#include "fold.h"
#include "slice_geom.h"
#include <math.h>
#include <string.h>

/* A tensor as numbers: ints for integer and bool dtypes, doubles for floats. */
typedef struct {
  mg_dtype dt;
  int is_float;
  int64_t n;
  mg_shape shape;
  int64_t *i;
  double *f;
} num;

static int load(mg_arena *a, const mg_value *v, num *x) {
  memset(x, 0, sizeof *x);
  x->dt = v->dtype;
  x->shape = v->shape;
  x->is_float = mg_dtype_is_float(v->dtype);
  size_t es = mg_dtype_size(v->dtype);
  if (!es || v->dtype == MG_C64 || v->dtype == MG_C128) return 0;
  x->n = (int64_t)(v->nbytes / es);
  if (x->n > MG_FOLD_MAX * 16) return 0;
  if (x->is_float) {
    x->f = mg_arena_alloc(a, sizeof(double) * (size_t)(x->n + 1));
    if (!x->f) return -1;
    const unsigned char *p = v->data;
    for (int64_t k = 0; k < x->n; k++) x->f[k] = mg_load_f64(v->dtype, p + (size_t)k * es);
  } else {
    x->i = mg_arena_alloc(a, sizeof(int64_t) * (size_t)(x->n + 1));
    if (!x->i) return -1;
    if (mg_value_ints(v, x->i, x->n) != x->n) return 0;
  }
  return 1;
}

static double getf(const num *x, int64_t k) { return x->is_float ? x->f[k] : (double)x->i[k]; }
static int64_t geti(const num *x, int64_t k) { return x->is_float ? mg_f2i(x->f[k]) : x->i[k]; }

/* Writes numbers into v's data in v's dtype. */
static int store(mg_arena *a, mg_value *v, const int64_t *iv, const double *fv, int64_t n) {
  size_t es = mg_dtype_size(v->dtype);
  unsigned char *out = mg_arena_alloc(a, es * (size_t)(n ? n : 1));
  if (!out) return -1;
  for (int64_t k = 0; k < n; k++) {
    unsigned char *e = out + (size_t)k * es;
    double f = fv ? fv[k] : (double)iv[k];
    int64_t i = iv ? iv[k] : mg_f2i(fv[k]);
    switch (v->dtype) {
    case MG_F32: { float t = (float)f; memcpy(e, &t, 4); break; }
    case MG_F64: memcpy(e, &f, 8); break;
    case MG_F16: { uint16_t h = mg_f32_to_f16((float)f); memcpy(e, &h, 2); break; }
    case MG_BF16: { uint16_t h = mg_f32_to_bf16((float)f); memcpy(e, &h, 2); break; }
    case MG_I64: case MG_U64: memcpy(e, &i, 8); break;
    case MG_I32: case MG_U32: { int32_t t = (int32_t)i; memcpy(e, &t, 4); break; }
    case MG_I16: case MG_U16: { int16_t t = (int16_t)i; memcpy(e, &t, 2); break; }
    case MG_BOOL: *e = (fv ? f != 0 : i != 0); break;
    case MG_I8: case MG_U8: *e = (unsigned char)i; break;
    default: return 0;
    }
  }
  v->data = out;
  v->nbytes = es * (size_t)n;
  return 1;
}

/* Index into x for flat output index k of out_shape, numpy broadcasting. */
static int64_t bcast(const mg_shape *out, const mg_shape *in, int64_t k) {
  int64_t idx = 0, stride = 1;
  for (int d = out->rank - 1, e = in->rank - 1; d >= 0; d--, e--) {
    int64_t coord = k % out->d[d].v;
    k /= out->d[d].v;
    if (e >= 0) {
      if (in->d[e].v != 1) idx += coord * stride;
      stride *= in->d[e].v;
    }
  }
  return idx;
}

static int fold_binary(mg_arena *a, mg_node *n, num *x, num *y) {
  mg_value *o = n->out[0];
  int64_t cnt = mg_shape_numel(&o->shape);
  int flt = x->is_float || y->is_float;
  int cmp = mg_op_get(n->op)->shape_rule == MG_SH_COMPARE;
  /* float32 operands (float32 output, or a comparison of float32 values) */
  int f32 = flt && (cmp ? x->dt == MG_F32 && y->dt == MG_F32 : o->dtype == MG_F32);
  int64_t *ri = mg_arena_alloc(a, sizeof(int64_t) * (size_t)(cnt + 1));
  double *rf = mg_arena_alloc(a, sizeof(double) * (size_t)(cnt + 1));
  if (!ri || !rf) return -1;
  for (int64_t k = 0; k < cnt; k++) {
    int64_t ix = bcast(&o->shape, &x->shape, k), iy = bcast(&o->shape, &y->shape, k);
    if (flt && f32) {
      /* float32 arithmetic, each operation rounded as the exporter's graph rounds
       * it: a detection model's resize target (scale * size, then Ceil) must come
       * out as torch computed it, not as float64 would */
      volatile float p = (float)getf(x, ix), q = (float)getf(y, iy), r;
      switch (n->op) {
      case MG_OP_Add: r = p + q; break;
      case MG_OP_Sub: r = p - q; break;
      case MG_OP_Mul: r = p * q; break;
      case MG_OP_Div: r = p / q; break;
      case MG_OP_Pow: r = powf(p, q); break;
      case MG_OP_Max: r = p > q ? p : q; break;
      case MG_OP_Min: r = p < q ? p : q; break;
      default: r = 0; break; /* comparisons: below, exact in double */
      }
      if (!cmp) {
        rf[k] = r;
        ri[k] = isfinite(r) ? mg_f2i(r) : 0;
        continue;
      }
    }
    if (flt) {
      double p = getf(x, ix), q = getf(y, iy), r;
      switch (n->op) {
      case MG_OP_Add: r = p + q; break;
      case MG_OP_Sub: r = p - q; break;
      case MG_OP_Mul: r = p * q; break;
      case MG_OP_Div: r = p / q; break;
      case MG_OP_Pow: r = pow(p, q); break;
      case MG_OP_Max: r = p > q ? p : q; break;
      case MG_OP_Min: r = p < q ? p : q; break;
      case MG_OP_Equal: r = p == q; break;
      case MG_OP_Less: r = p < q; break;
      case MG_OP_Greater: r = p > q; break;
      case MG_OP_LessOrEqual: r = p <= q; break;
      case MG_OP_GreaterOrEqual: r = p >= q; break;
      default: return 0;
      }
      rf[k] = r;
      ri[k] = mg_f2i(r);
    } else {
      int64_t p = geti(x, ix), q = geti(y, iy), r;
      switch (n->op) {
      case MG_OP_Add: r = (int64_t)((uint64_t)p + (uint64_t)q); break;
      case MG_OP_Sub: r = (int64_t)((uint64_t)p - (uint64_t)q); break;
      case MG_OP_Mul: r = (int64_t)((uint64_t)p * (uint64_t)q); break;
      case MG_OP_Div: /* integer Div truncates toward zero, like C */
        if (q == 0 || (p == INT64_MIN && q == -1)) return 0;
        r = p / q;
        break;
      case MG_OP_Mod: {
        if (q == 0 || (p == INT64_MIN && q == -1)) return 0;
        r = p % q;
        if (!mg_attr_int(n, "fmod", 0) && r != 0 && ((r < 0) != (q < 0))) r += q;
        break;
      }
      case MG_OP_Max: r = p > q ? p : q; break;
      case MG_OP_Min: r = p < q ? p : q; break;
      case MG_OP_Equal: r = p == q; break;
      case MG_OP_Less: r = p < q; break;
      case MG_OP_Greater: r = p > q; break;
      case MG_OP_LessOrEqual: r = p <= q; break;
      case MG_OP_GreaterOrEqual: r = p >= q; break;
      case MG_OP_And: r = p && q; break;
      case MG_OP_Or: r = p || q; break;
      case MG_OP_Xor: r = !p != !q; break;
      default: return 0;
      }
      ri[k] = r;
      rf[k] = (double)r;
    }
  }
  return store(a, o, cmp || !flt ? ri : NULL, cmp || !flt ? NULL : rf, cnt);
}

static int fold_unary(mg_arena *a, mg_node *n, num *x) {
  mg_value *o = n->out[0];
  int64_t *ri = mg_arena_alloc(a, sizeof(int64_t) * (size_t)(x->n + 1));
  double *rf = mg_arena_alloc(a, sizeof(double) * (size_t)(x->n + 1));
  if (!ri || !rf) return -1;
  int out_float = mg_dtype_is_float(o->dtype);
  for (int64_t k = 0; k < x->n; k++) {
    if (x->is_float) {
      double p = x->f[k], r;
      switch (n->op) {
      case MG_OP_Identity: case MG_OP_Cast: r = p; break;
      case MG_OP_Neg: r = -p; break;
      case MG_OP_Abs: r = fabs(p); break;
      case MG_OP_Floor: r = floor(p); break;
      case MG_OP_Ceil: r = ceil(p); break;
      case MG_OP_Sqrt: r = o->dtype == MG_F32 ? (double)sqrtf((float)p) : sqrt(p); break;
      case MG_OP_Reciprocal: r = o->dtype == MG_F32 ? (double)(1.0f / (float)p) : 1.0 / p; break;
      case MG_OP_Round: r = nearbyint(p); break;
      case MG_OP_Sign: r = (p > 0) - (p < 0); break;
      default: return 0;
      }
      rf[k] = r;
      ri[k] = isfinite(r) ? mg_f2i(r) : 0;
      if (n->op == MG_OP_Cast && !out_float && !isfinite(r)) return 0;
    } else {
      int64_t p = x->i[k], r;
      switch (n->op) {
      case MG_OP_Identity: case MG_OP_Cast: r = p; break;
      case MG_OP_Neg: r = (int64_t)(0 - (uint64_t)p); break;
      case MG_OP_Abs: r = p < 0 ? (int64_t)(0 - (uint64_t)p) : p; break;
      case MG_OP_Not: r = !p; break;
      case MG_OP_Sign: r = (p > 0) - (p < 0); break;
      case MG_OP_Floor: case MG_OP_Ceil: case MG_OP_Round: r = p; break;
      default: return 0;
      }
      ri[k] = r;
      rf[k] = (double)r;
    }
  }
  return store(a, o, out_float ? NULL : ri, out_float ? rf : NULL, x->n);
}

/* Ops that only rearrange elements: out[k] = in[src(k)]. */
static int fold_gather_like(mg_arena *a, mg_node *n, num *x, num *idx) {
  mg_value *o = n->out[0];
  int64_t cnt = mg_shape_numel(&o->shape);
  int64_t *src = mg_arena_alloc(a, sizeof(int64_t) * (size_t)(cnt + 1));
  if (!src) return -1;
  const mg_shape *s = &x->shape;
  if (mg_op_is_view(n->op)) {
    for (int64_t k = 0; k < cnt; k++) src[k] = k;
    goto gathered;
  }
  switch (n->op) {
  case MG_OP_Expand:
    for (int64_t k = 0; k < cnt; k++) src[k] = bcast(&o->shape, s, k);
    break;
  case MG_OP_Gather: {
    int64_t axis = mg_attr_int(n, "axis", 0);
    if (axis < 0) axis += s->rank;
    int64_t outer = 1, inner = 1, dim = s->d[axis].v;
    for (int d = 0; d < axis; d++) outer *= s->d[d].v;
    for (int d = (int)axis + 1; d < s->rank; d++) inner *= s->d[d].v;
    int64_t ni = idx->n, k = 0;
    for (int64_t p = 0; p < outer; p++)
      for (int64_t q = 0; q < ni; q++) {
        int64_t j = geti(idx, q);
        if (j < 0) j += dim;
        if (j < 0 || j >= dim) return 0;
        for (int64_t r = 0; r < inner; r++) src[k++] = (p * dim + j) * inner + r;
      }
    break;
  }
  case MG_OP_Transpose: {
    const int64_t *perm;
    size_t np = mg_attr_ints(n, "perm", &perm);
    int64_t strides[MG_MAX_RANK], st = 1;
    for (int d = s->rank - 1; d >= 0; d--) strides[d] = st, st *= s->d[d].v;
    for (int64_t k = 0; k < cnt; k++) {
      int64_t rem = k, off = 0;
      for (int d = o->shape.rank - 1; d >= 0; d--) {
        int64_t coord = rem % o->shape.d[d].v;
        rem /= o->shape.d[d].v;
        int64_t from = np ? perm[d] : s->rank - 1 - d;
        off += coord * strides[from];
      }
      src[k] = off;
    }
    break;
  }
  default:
    return 0;
  }
gathered:;
  int64_t *ri = mg_arena_alloc(a, sizeof(int64_t) * (size_t)(cnt + 1));
  double *rf = mg_arena_alloc(a, sizeof(double) * (size_t)(cnt + 1));
  if (!ri || !rf) return -1;
  for (int64_t k = 0; k < cnt; k++) {
    if (src[k] < 0 || src[k] >= x->n) return 0;
    if (x->is_float) rf[k] = x->f[src[k]];
    else ri[k] = x->i[src[k]];
  }
  return store(a, o, x->is_float ? NULL : ri, x->is_float ? rf : NULL, cnt);
}

int fold_supports(mg_op op) {
  if (mg_op_is_view(op)) return 1;
  switch (op) {
  case MG_OP_Add: case MG_OP_Sub: case MG_OP_Mul: case MG_OP_Div: case MG_OP_Mod:
  case MG_OP_Pow: case MG_OP_Max: case MG_OP_Min: case MG_OP_Equal: case MG_OP_Less:
  case MG_OP_Greater: case MG_OP_LessOrEqual: case MG_OP_GreaterOrEqual: case MG_OP_And:
  case MG_OP_Or: case MG_OP_Xor: case MG_OP_Cast: case MG_OP_Neg:
  case MG_OP_Abs: case MG_OP_Floor: case MG_OP_Ceil: case MG_OP_Sqrt: case MG_OP_Reciprocal:
  case MG_OP_Round: case MG_OP_Sign: case MG_OP_Not: case MG_OP_Expand: case MG_OP_Gather:
  case MG_OP_Transpose: case MG_OP_Concat: case MG_OP_Slice: case MG_OP_Where:
  case MG_OP_Range: case MG_OP_ConstantOfShape: case MG_OP_ReduceProd: case MG_OP_ReduceSum:
  case MG_OP_ReduceMax: case MG_OP_ReduceMin: case MG_OP_Size: case MG_OP_Shape:
  case MG_OP_CastLike:
    return 1;
  default:
    return 0;
  }
}

int fold_node(mg_node *n) {
  if (!fold_supports(n->op) || n->n_out < 1 || !n->out[0]) return 0;
  mg_value *o = n->out[0];
  int64_t cnt = mg_shape_numel(&o->shape);
  if (cnt < 0 || cnt > MG_FOLD_MAX || !mg_dtype_size(o->dtype) || o->dtype == MG_STRING) return 0;
  mg_arena scratch;
  mg_arena_init(&scratch, 16 * 1024);
  mg_arena *out = &n->graph->model->arena;
  num x[8];
  int rc = 0;
  int nin = n->n_in < 8 ? n->n_in : 8;
  for (int k = 0; k < nin; k++) {
    memset(&x[k], 0, sizeof x[k]);
    if (!n->in[k]) continue;
    if (n->op == MG_OP_Shape || n->op == MG_OP_Size) continue; /* reads only the shape */
    int r = load(&scratch, n->in[k], &x[k]);
    if (r <= 0) {
      rc = r;
      goto done;
    }
  }
  if (mg_op_is_view(n->op)) {
    rc = fold_gather_like(out, n, &x[0], NULL);
    goto done;
  }
  switch (n->op) {
  case MG_OP_Shape: case MG_OP_Size: {
    const mg_shape *s = &n->in[0]->shape;
    int64_t v[MG_MAX_RANK];
    if (!mg_shape_is_static(s)) goto done;
    if (n->op == MG_OP_Size) {
      v[0] = mg_shape_numel(s);
      rc = store(out, o, v, NULL, 1);
      goto done;
    }
    int64_t start = mg_attr_int(n, "start", 0), end = mg_attr_int(n, "end", s->rank);
    if (start < 0) start += s->rank;
    if (end < 0) end += s->rank;
    start = start < 0 ? 0 : start > s->rank ? s->rank : start;
    end = end < 0 ? 0 : end > s->rank ? s->rank : end;
    int64_t k = 0;
    for (int64_t d = start; d < end; d++) v[k++] = s->d[d].v;
    rc = store(out, o, v, NULL, k);
    goto done;
  }
  case MG_OP_Cast: case MG_OP_CastLike: case MG_OP_Neg: case MG_OP_Abs:
  case MG_OP_Floor: case MG_OP_Ceil: case MG_OP_Sqrt: case MG_OP_Reciprocal: case MG_OP_Round:
  case MG_OP_Sign: case MG_OP_Not:
    if (n->op == MG_OP_CastLike) {
      mg_node tmp = *n;
      tmp.op = MG_OP_Cast;
      rc = fold_unary(out, &tmp, &x[0]);
    } else {
      rc = fold_unary(out, n, &x[0]);
    }
    goto done;
  case MG_OP_Expand: case MG_OP_Transpose:
    rc = fold_gather_like(out, n, &x[0], NULL);
    goto done;
  case MG_OP_Gather:
    rc = fold_gather_like(out, n, &x[0], &x[1]);
    goto done;
  case MG_OP_Max: case MG_OP_Min: case MG_OP_Sum:
    if (n->n_in != 2) goto done;
    rc = fold_binary(out, n, &x[0], &x[1]);
    goto done;
  case MG_OP_Where: {
    int64_t *ri = mg_arena_alloc(&scratch, sizeof(int64_t) * (size_t)(cnt + 1));
    double *rf = mg_arena_alloc(&scratch, sizeof(double) * (size_t)(cnt + 1));
    if (!ri || !rf) { rc = -1; goto done; }
    for (int64_t k = 0; k < cnt; k++) {
      int64_t c = geti(&x[0], bcast(&o->shape, &x[0].shape, k));
      num *src = c ? &x[1] : &x[2];
      int64_t j = bcast(&o->shape, &src->shape, k);
      rf[k] = getf(src, j);
      ri[k] = geti(src, j);
    }
    rc = store(out, o, x[1].is_float ? NULL : ri, x[1].is_float ? rf : NULL, cnt);
    goto done;
  }
  case MG_OP_Concat: {
    int64_t axis = mg_attr_int(n, "axis", 0);
    if (axis < 0) axis += o->shape.rank;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= o->shape.d[d].v;
    for (int d = (int)axis + 1; d < o->shape.rank; d++) inner *= o->shape.d[d].v;
    int64_t *ri = mg_arena_alloc(&scratch, sizeof(int64_t) * (size_t)(cnt + 1));
    double *rf = mg_arena_alloc(&scratch, sizeof(double) * (size_t)(cnt + 1));
    if (!ri || !rf) { rc = -1; goto done; }
    int64_t k = 0;
    for (int64_t p = 0; p < outer; p++)
      for (int i = 0; i < nin; i++) {
        if (!n->in[i]) continue;
        int64_t len = x[i].shape.rank > axis ? x[i].shape.d[axis].v * inner : 0;
        for (int64_t q = 0; q < len; q++, k++) {
          rf[k] = getf(&x[i], p * len + q);
          ri[k] = geti(&x[i], p * len + q);
        }
      }
    if (k != cnt) goto done;
    rc = store(out, o, mg_dtype_is_float(o->dtype) ? NULL : ri,
               mg_dtype_is_float(o->dtype) ? rf : NULL, cnt);
    goto done;
  }
  case MG_OP_Slice: {
    /* Per axis: first index and step; other axes run whole. */
    const mg_shape *xs = &x[0].shape;
    int64_t first[MG_MAX_RANK], step[MG_MAX_RANK];
    for (int d = 0; d < xs->rank; d++) first[d] = 0, step[d] = 1;
    int64_t ns = x[1].n;
    for (int64_t k = 0; k < ns; k++) {
      int64_t a = nin > 3 && n->in[3] ? geti(&x[3], k) : k;
      if (a < 0) a += xs->rank;
      if (a < 0 || a >= xs->rank) goto done;
      int64_t b, len, st = nin > 4 && n->in[4] ? geti(&x[4], k) : 1;
      if (k >= x[2].n || mg_slice_axis(xs->d[a].v, geti(&x[1], k), geti(&x[2], k), st, &b, &len)) goto done;
      first[a] = b;
      step[a] = st;
    }
    int64_t strides[MG_MAX_RANK], acc = 1;
    for (int d = xs->rank - 1; d >= 0; d--) strides[d] = acc, acc *= xs->d[d].v;
    int64_t *ri = mg_arena_alloc(&scratch, sizeof(int64_t) * (size_t)(cnt + 1));
    double *rf = mg_arena_alloc(&scratch, sizeof(double) * (size_t)(cnt + 1));
    if (!ri || !rf) { rc = -1; goto done; }
    for (int64_t k = 0; k < cnt; k++) {
      int64_t rem = k, off = 0;
      for (int d = o->shape.rank - 1; d >= 0; d--) {
        int64_t coord = rem % o->shape.d[d].v;
        rem /= o->shape.d[d].v;
        int64_t pos, part;
        if (!mg_mul_ovf(coord, step[d], &pos) || !mg_add_ovf(pos, first[d], &pos) ||
            !mg_mul_ovf(pos, strides[d], &part) || !mg_add_ovf(off, part, &off))
          goto done;
      }
      if (off < 0 || off >= x[0].n) goto done;
      rf[k] = getf(&x[0], off);
      ri[k] = geti(&x[0], off);
    }
    rc = store(out, o, x[0].is_float ? NULL : ri, x[0].is_float ? rf : NULL, cnt);
    goto done;
  }
  case MG_OP_Range: {
    double *rf = mg_arena_alloc(&scratch, sizeof(double) * (size_t)(cnt + 1));
    int64_t *ri = mg_arena_alloc(&scratch, sizeof(int64_t) * (size_t)(cnt + 1));
    if (!ri || !rf) { rc = -1; goto done; }
    for (int64_t k = 0; k < cnt; k++) {
      rf[k] = getf(&x[0], 0) + (double)k * getf(&x[2], 0);
      ri[k] = (int64_t)((uint64_t)geti(&x[0], 0) + (uint64_t)k * (uint64_t)geti(&x[2], 0));
    }
    rc = store(out, o, x[0].is_float ? NULL : ri, x[0].is_float ? rf : NULL, cnt);
    goto done;
  }
  case MG_OP_ConstantOfShape: {
    const mg_attr *va = mg_node_attr(n, "value");
    num v;
    double zf = 0;
    int64_t zi = 0;
    if (va && va->t) {
      int r = load(&scratch, va->t, &v);
      if (r <= 0 || v.n != 1) { rc = r < 0 ? r : 0; goto done; }
      zf = getf(&v, 0);
      zi = geti(&v, 0);
    }
    double *rf = mg_arena_alloc(&scratch, sizeof(double) * (size_t)(cnt + 1));
    int64_t *ri = mg_arena_alloc(&scratch, sizeof(int64_t) * (size_t)(cnt + 1));
    if (!ri || !rf) { rc = -1; goto done; }
    for (int64_t k = 0; k < cnt; k++) rf[k] = zf, ri[k] = zi;
    rc = store(out, o, mg_dtype_is_float(o->dtype) ? NULL : ri,
               mg_dtype_is_float(o->dtype) ? rf : NULL, cnt);
    goto done;
  }
  case MG_OP_ReduceProd: case MG_OP_ReduceSum: case MG_OP_ReduceMax: case MG_OP_ReduceMin: {
    /* Only whole-tensor reductions (the shape-arithmetic case). */
    if (cnt != 1 || x[0].n < 1) goto done;
    if (x[0].is_float) { /* in the input's precision, in element order */
      double r = x[0].f[0];
      for (int64_t k = 1; k < x[0].n; k++) {
        double p = x[0].f[k];
        if (n->op == MG_OP_ReduceMax) r = p > r || p != p ? p : r;
        else if (n->op == MG_OP_ReduceMin) r = p < r || p != p ? p : r;
        else if (x[0].dt == MG_F32) r = n->op == MG_OP_ReduceProd ? (double)((float)r * (float)p)
                                                                  : (double)((float)r + (float)p);
        else r = n->op == MG_OP_ReduceProd ? r * p : r + p;
      }
      rc = store(out, o, NULL, &r, 1);
      goto done;
    }
    int64_t r = x[0].i[0];
    for (int64_t k = 1; k < x[0].n; k++) {
      int64_t p = x[0].i[k];
      if (n->op == MG_OP_ReduceProd) r = (int64_t)((uint64_t)r * (uint64_t)p);
      else if (n->op == MG_OP_ReduceSum) r = (int64_t)((uint64_t)r + (uint64_t)p);
      else if (n->op == MG_OP_ReduceMax) r = p > r ? p : r;
      else r = p < r ? p : r;
    }
    rc = store(out, o, &r, NULL, 1);
    goto done;
  }
  default:
    if (mg_op_get(n->op)->shape_rule == MG_SH_BINARY || mg_op_get(n->op)->shape_rule == MG_SH_COMPARE)
      rc = n->n_in == 2 ? fold_binary(out, n, &x[0], &x[1]) : 0;
    goto done;
  }
done:
  mg_arena_destroy(&scratch);
  return rc;
}
