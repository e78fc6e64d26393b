/* Linear algebra kernels: MatMul (numpy semantics), Gemm, Einsum, Det, and the
 * quantised MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv. Products
 * accumulate in double through nn_gemm, a packed, cache-blocked kernel that also
 * serves the convolutions of interp_nn.c; integer MatMul accumulates in int64. */
#include "interp_nn.h"
#include "einsum_geom.h"
#include <math.h>
#include <string.h>

/* ---- the double matrix product ---- */

typedef double v2d __attribute__((vector_size(16)));

enum { GM_MR = 4, GM_NR = 4, GM_KC = 256, GM_MC = 128, GM_NC = 2048 };

/* Unaligned loads and stores of two doubles. */
static inline v2d ld2(const double *p) {
  v2d v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void st2(double *p, v2d v) { memcpy(p, &v, sizeof v); }

/* Packs A[0..mc) x [0..kc) into GM_MR-row panels, each kc groups of GM_MR values
 * (k-major), zero rows past mc. */
static void pack_a(const double *A, int64_t lda, int64_t mc, int64_t kc, double *ap) {
  for (int64_t i0 = 0; i0 < mc; i0 += GM_MR) {
    int64_t mr = mc - i0 < GM_MR ? mc - i0 : GM_MR;
    const double *r0 = A + i0 * lda;
    if (mr == GM_MR) {
      const double *r1 = r0 + lda, *r2 = r1 + lda, *r3 = r2 + lda;
      for (int64_t k = 0; k < kc; k++, ap += GM_MR) {
        ap[0] = r0[k];
        ap[1] = r1[k];
        ap[2] = r2[k];
        ap[3] = r3[k];
      }
      continue;
    }
    for (int64_t k = 0; k < kc; k++, ap += GM_MR)
      for (int64_t r = 0; r < GM_MR; r++) ap[r] = r < mr ? r0[r * lda + k] : 0;
  }
}

/* Packs B[0..kc) x [0..nc) into GM_NR-column panels, each kc rows of GM_NR values,
 * zero columns past nc. */
static void pack_b(const double *B, int64_t ldb, int64_t kc, int64_t nc, double *bp) {
  for (int64_t j0 = 0; j0 < nc; j0 += GM_NR) {
    int64_t nr = nc - j0 < GM_NR ? nc - j0 : GM_NR;
    const double *p = B + j0;
    if (nr == GM_NR) {
      for (int64_t k = 0; k < kc; k++, bp += GM_NR, p += ldb) memcpy(bp, p, sizeof(double) * GM_NR);
      continue;
    }
    for (int64_t k = 0; k < kc; k++, bp += GM_NR, p += ldb)
      for (int64_t j = 0; j < GM_NR; j++) bp[j] = j < nr ? p[j] : 0;
  }
}

/* C[mr x nr] += Apanel * Bpanel over kc: the 4x4 register block. */
static void micro(int64_t kc, const double *a, const double *b, double *c, int64_t ldc, int64_t mr,
                  int64_t nr) {
  v2d c00 = {0, 0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int64_t k = 0; k < kc; k++, a += GM_MR, b += GM_NR) {
    v2d b0 = ld2(b), b1 = ld2(b + 2);
    v2d a0 = {a[0], a[0]}, a1 = {a[1], a[1]}, a2 = {a[2], a[2]}, a3 = {a[3], a[3]};
    c00 += a0 * b0;
    c01 += a0 * b1;
    c10 += a1 * b0;
    c11 += a1 * b1;
    c20 += a2 * b0;
    c21 += a2 * b1;
    c30 += a3 * b0;
    c31 += a3 * b1;
  }
  if (mr == GM_MR && nr == GM_NR) {
    double *r = c;
    st2(r, ld2(r) + c00), st2(r + 2, ld2(r + 2) + c01), r += ldc;
    st2(r, ld2(r) + c10), st2(r + 2, ld2(r + 2) + c11), r += ldc;
    st2(r, ld2(r) + c20), st2(r + 2, ld2(r + 2) + c21), r += ldc;
    st2(r, ld2(r) + c30), st2(r + 2, ld2(r + 2) + c31);
    return;
  }
  double t[GM_MR][GM_NR];
  st2(&t[0][0], c00), st2(&t[0][2], c01), st2(&t[1][0], c10), st2(&t[1][2], c11);
  st2(&t[2][0], c20), st2(&t[2][2], c21), st2(&t[3][0], c30), st2(&t[3][2], c31);
  for (int64_t i = 0; i < mr; i++)
    for (int64_t j = 0; j < nr; j++) c[i * ldc + j] += t[i][j];
}

/* See interp_nn.h. GotoBLAS-style: B panels of GM_KC x GM_NC and A blocks of
 * GM_MC x GM_KC are packed, then 4x4 register blocks accumulate over k. */
int nn_gemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
            int64_t ldb, double *C, int64_t ldc) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  int64_t kcm = K < GM_KC ? K : GM_KC;
  int64_t ncm = (N < GM_NC ? N : GM_NC) + GM_NR, mcm = (M < GM_MC ? M : GM_MC) + GM_MR;
  double *bp = mg_malloc(sizeof(double) * (size_t)(kcm * ncm));
  double *ap = mg_malloc(sizeof(double) * (size_t)(kcm * mcm));
  if (!bp || !ap) {
    mg_free(bp);
    mg_free(ap);
    return -1;
  }
  for (int64_t jc = 0; jc < N; jc += GM_NC) {
    int64_t nc = N - jc < GM_NC ? N - jc : GM_NC;
    for (int64_t pc = 0; pc < K; pc += GM_KC) {
      int64_t kc = K - pc < GM_KC ? K - pc : GM_KC;
      pack_b(B + pc * ldb + jc, ldb, kc, nc, bp);
      for (int64_t ic = 0; ic < M; ic += GM_MC) {
        int64_t mc = M - ic < GM_MC ? M - ic : GM_MC;
        pack_a(A + ic * lda + pc, lda, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += GM_NR)
          for (int64_t ir = 0; ir < mc; ir += GM_MR)
            micro(kc, ap + ir * kc, bp + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc,
                  mc - ir < GM_MR ? mc - ir : GM_MR, nc - jr < GM_NR ? nc - jr : GM_NR);
      }
    }
  }
  mg_free(bp);
  mg_free(ap);
  return 0;
}

/* Records an out-of-memory diagnostic for n; returns -1. */
static int oom(interp_ctx *c, const mg_node *n) {
  mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
  return -1;
}

/* ---- numpy matmul shapes ---- */

/* The batched product of numpy's matmul: A [.., M, K] times B [.., K, N] (a 1-D
 * operand gains and then loses a unit dimension), batch dims broadcast. */
typedef struct {
  int64_t M, N, K, batch;
  int orank;
  int64_t odims[MG_ARRAY_MAX_RANK];
  int64_t *aoff, *boff; /* per batch: element offset of its matrix in A and B */
  int b_shared;         /* B has no batch dims and A is contiguous: one product */
} mm_plan;

/* Frees a plan's offset arrays. */
static void mm_free(mm_plan *p) {
  mg_free(p->aoff);
  mg_free(p->boff);
}

/* Plans A times B; -1 (diagnosed) when the shapes do not multiply. */
static int mm_prepare(interp_ctx *c, const mg_node *n, const mg_array *a, const mg_array *b,
                      mm_plan *p) {
  memset(p, 0, sizeof *p);
  if (a->rank < 1 || b->rank < 1) return it_fail(c, n, "MatMul operands must have rank >= 1");
  p->M = a->rank == 1 ? 1 : a->dims[a->rank - 2];
  p->K = a->dims[a->rank - 1];
  int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  p->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  if (kb != p->K)
    return it_fail(c, n, "inner dimensions differ (%lld and %lld)", (long long)p->K, (long long)kb);
  int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
  int r = ra > rb ? ra : rb;
  int64_t bd[MG_ARRAY_MAX_RANK], sa[MG_ARRAY_MAX_RANK], sb[MG_ARRAY_MAX_RANK];
  int64_t stride_a = 1, stride_b = 1;
  for (int d = r - 1; d >= 0; d--) {
    int da = d - (r - ra), db = d - (r - rb);
    int64_t xa = da >= 0 ? a->dims[da] : 1, xb = db >= 0 ? b->dims[db] : 1;
    if (xa != xb && xa != 1 && xb != 1) return it_fail(c, n, "batch dimensions do not broadcast");
    bd[d] = xa == 1 ? xb : xa;
    sa[d] = xa == 1 ? 0 : stride_a;
    sb[d] = xb == 1 ? 0 : stride_b;
    stride_a *= xa;
    stride_b *= xb;
  }
  p->batch = 1;
  for (int d = 0; d < r; d++) p->odims[p->orank++] = bd[d], p->batch *= bd[d];
  if (a->rank > 1) p->odims[p->orank++] = p->M;
  if (b->rank > 1) p->odims[p->orank++] = p->N;
  p->b_shared = rb == 0 && r == ra;
  p->aoff = mg_malloc(sizeof(int64_t) * (size_t)(p->batch + 1));
  p->boff = mg_malloc(sizeof(int64_t) * (size_t)(p->batch + 1));
  if (!p->aoff || !p->boff) {
    mm_free(p);
    return oom(c, n);
  }
  int64_t idx[MG_ARRAY_MAX_RANK] = {0}, oa = 0, ob = 0;
  for (int64_t i = 0; i < p->batch; i++) {
    p->aoff[i] = oa * p->M * p->K;
    p->boff[i] = ob * p->K * p->N;
    for (int d = r - 1; d >= 0; d--) {
      idx[d]++, oa += sa[d], ob += sb[d];
      if (idx[d] < bd[d]) break;
      oa -= sa[d] * bd[d], ob -= sb[d] * bd[d], idx[d] = 0;
    }
  }
  return 0;
}

/* y[batch x M x N] = A * B on doubles under plan p. */
static int mm_run(interp_ctx *c, const mg_node *n, const mm_plan *p, const double *a,
                  const double *b, double *y) {
  if (p->b_shared) return nn_gemm(p->batch * p->M, p->N, p->K, a, p->K, b, p->N, y, p->N) ? oom(c, n) : 0;
  for (int64_t i = 0; i < p->batch; i++)
    if (nn_gemm(p->M, p->N, p->K, a + p->aoff[i], p->K, b + p->boff[i], p->N, y + i * p->M * p->N, p->N))
      return oom(c, n);
  return 0;
}

/* MatMul: doubles through nn_gemm for floats, exact wrapped int64 for integers. */
static int matmul(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *a = it_in(in, n, 0), *b = it_in(in, n, 1);
  if (!a || !b) return it_fail(c, n, "missing input");
  if (a->dtype != b->dtype) return it_fail(c, n, "operand dtypes differ");
  mm_plan p;
  if (mm_prepare(c, n, a, b, &p)) return -1;
  mg_array *y = it_out(c, n, out, 0, a->dtype, p.orank, p.odims);
  int rc = y ? 0 : -1;
  if (!rc && !it_is_float(a->dtype)) { /* exact int64 products, wrapped to the width */
    int64_t *ai = it_i64(c, n, a), *bi = it_i64(c, n, b), *yi = NULL;
    if (ai && bi) yi = mg_calloc((size_t)(p.batch * p.M * p.N + 1), sizeof(int64_t));
    if (!yi) rc = ai && bi ? oom(c, n) : -1;
    for (int64_t t = 0; !rc && t < p.batch; t++)
      for (int64_t i = 0; i < p.M; i++)
        for (int64_t k = 0; k < p.K; k++) {
          uint64_t av = (uint64_t)ai[p.aoff[t] + i * p.K + k];
          const int64_t *br = bi + p.boff[t] + k * p.N;
          int64_t *yr = yi + (t * p.M + i) * p.N;
          for (int64_t j = 0; j < p.N; j++) yr[j] = (int64_t)((uint64_t)yr[j] + av * (uint64_t)br[j]);
        }
    if (!rc) it_store_i64(y, yi);
    mg_free(ai), mg_free(bi), mg_free(yi);
  } else if (!rc) {
    double *af = it_f64(c, n, a), *bf = it_f64(c, n, b), *yf = NULL;
    if (af && bf) yf = mg_calloc((size_t)(p.batch * p.M * p.N + 1), sizeof(double));
    if (!yf) rc = af && bf ? oom(c, n) : -1;
    if (!rc) rc = mm_run(c, n, &p, af, bf, yf);
    if (!rc) it_store_f64(y, yf);
    mg_free(af), mg_free(bf), mg_free(yf);
  }
  mm_free(&p);
  return rc;
}

/* A new row-major copy of the r x c matrix m, transposed (c x r). */
static double *transposed(const double *m, int64_t r, int64_t cols) {
  double *t = mg_malloc(sizeof(double) * (size_t)(r * cols + 1));
  if (!t) return NULL;
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < cols; j++) t[j * r + i] = m[i * cols + j];
  return t;
}

/* Y = alpha * A' * B' + beta * C, C broadcast to [M, N]. */
static int gemm(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *a = it_in(in, n, 0), *b = it_in(in, n, 1), *cc = it_in(in, n, 2);
  if (!a || !b) return it_fail(c, n, "missing input");
  if (a->rank != 2 || b->rank != 2) return it_fail(c, n, "A and B must be matrices");
  int ta = (int)mg_attr_int(n, "transA", 0), tb = (int)mg_attr_int(n, "transB", 0);
  double alpha = mg_attr_float(n, "alpha", 1), beta = mg_attr_float(n, "beta", 1);
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
  int64_t kb = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K != kb) return it_fail(c, n, "inner dimensions differ (%lld and %lld)", (long long)K, (long long)kb);
  int64_t od[2] = {M, N}, cs[2] = {0, 0};
  if (cc) {
    if (cc->rank > 2) return it_fail(c, n, "C must have rank <= 2");
    for (int d = 0; d < cc->rank; d++) {
      int64_t x = cc->dims[d], want = od[2 - cc->rank + d];
      if (x != 1 && x != want) return it_fail(c, n, "C does not broadcast to %lldx%lld", (long long)M, (long long)N);
    }
    it_bcast_strides(cc, 2, od, cs);
  }
  mg_array *y = it_out(c, n, out, 0, a->dtype, 2, od);
  if (!y) return -1;
  double *af = it_f64(c, n, a), *bf = af ? it_f64(c, n, b) : NULL, *yf = NULL;
  int rc = af && bf ? 0 : -1;
  if (!rc && ta) {
    double *t = transposed(af, K, M);
    mg_free(af);
    af = t;
  }
  if (!rc && tb) {
    double *t = transposed(bf, N, K);
    mg_free(bf);
    bf = t;
  }
  if (!rc && (!af || !bf)) rc = oom(c, n);
  if (!rc && !(yf = mg_calloc((size_t)(M * N + 1), sizeof(double)))) rc = oom(c, n);
  if (!rc && nn_gemm(M, N, K, af, K, bf, N, yf, N)) rc = oom(c, n);
  if (!rc) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double v = alpha * yf[i * N + j];
        if (cc) v += beta * it_get_f64(cc, i * cs[0] + j * cs[1]);
        yf[i * N + j] = v;
      }
    it_store_f64(y, yf);
  }
  mg_free(af), mg_free(bf), mg_free(yf);
  return rc;
}

/* ---- Einsum ---- */

/* Einsum: the equation planned by core/einsum_geom.h (labels a-z A-Z, diagonals,
 * '...' broadcast dims, explicit or implicit output). Sums every product over the
 * non-output labels in double (int64, wrapping, for integer inputs). */
static int einsum(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const char *eq = mg_attr_str(n, "equation", NULL);
  if (!eq) return it_fail(c, n, "missing equation");
  int ni = n->n_in;
  if (ni > MG_EIN_MAX_OPS) return it_fail(c, n, "too many operands");
  const mg_array *ts[MG_EIN_MAX_OPS];
  int rank[MG_EIN_MAX_OPS];
  const int64_t *dp[MG_EIN_MAX_OPS];
  for (int t = 0; t < ni; t++) {
    if (!(ts[t] = it_in(in, n, t))) return it_fail(c, n, "missing input %d", t);
    if (!it_is_float(ts[t]->dtype) && !mg_dtype_is_int(ts[t]->dtype))
      return it_fail(c, n, "unsupported dtype %s", mg_dtype_name(ts[t]->dtype));
    rank[t] = ts[t]->rank, dp[t] = ts[t]->dims;
  }
  mg_einsum_geom p;
  mg_ein_error e;
  switch (mg_einsum_plan(eq, ni, rank, dp, &p, &e)) {
  case MG_EIN_OK: break;
  case MG_EIN_TOO_LONG: return it_fail(c, n, "equation is too long");
  case MG_EIN_OPERANDS:
  case MG_EIN_FEWER_TERMS: return it_fail(c, n, "equation has fewer terms than inputs");
  case MG_EIN_MORE_TERMS: return it_fail(c, n, "equation has more terms than inputs");
  case MG_EIN_TERM_RANK: return it_fail(c, n, "term %d does not match input rank %d", e.term, rank[e.term]);
  case MG_EIN_BAD_OUTPUT: return it_fail(c, n, "bad output term");
  case MG_EIN_OUTPUT_RANK: return it_fail(c, n, "output rank too large");
  case MG_EIN_OUTPUT_UNKNOWN: return it_fail(c, n, "output label not in the inputs");
  case MG_EIN_OUTPUT_REPEATED: return it_fail(c, n, "output label repeated");
  case MG_EIN_LABEL_SIZES:
    return it_fail(c, n, "label '%c' has sizes %lld and %lld", mg_einsum_letter(e.label), (long long)e.a,
                   (long long)e.b);
  }
  const int no = p.no, na = p.na;
  const int64_t *odims = p.out_dims, *adims = p.size;
  mg_dtype dt = ts[0]->dtype;
  mg_array *y = it_out(c, n, out, 0, dt, no, odims);
  if (!y) return -1;
  int flt = it_is_float(dt), rc = 0;
  double *v[MG_EIN_MAX_OPS] = {0}, *yf = NULL;
  int64_t *vi[MG_EIN_MAX_OPS] = {0}, *yi = NULL;
  int64_t onum = it_numel(y), snum = 1;
  for (int i = no; i < na; i++) snum *= adims[i];
  for (int t = 0; t < ni && !rc; t++)
    if (flt ? !(v[t] = it_f64(c, n, ts[t])) : !(vi[t] = it_i64(c, n, ts[t]))) rc = -1;
  if (!rc && !(flt ? (void *)(yf = mg_calloc((size_t)onum + 1, sizeof(double)))
                   : (void *)(yi = mg_calloc((size_t)onum + 1, sizeof(int64_t)))))
    rc = oom(c, n);
  int64_t idx[MG_EIN_LABELS] = {0}, off[MG_EIN_MAX_OPS] = {0};
  for (int64_t o = 0; !rc && o < onum; o++) {
    double acc = 0;
    uint64_t acci = 0;
    for (int64_t s = 0; s < snum; s++) {
      if (flt) {
        double p = 1;
        for (int t = 0; t < ni; t++) p *= v[t][off[t]];
        acc += p;
      } else {
        uint64_t p = 1;
        for (int t = 0; t < ni; t++) p *= (uint64_t)vi[t][off[t]];
        acci += p;
      }
      for (int d = na - 1; d >= no; d--) { /* advance the summed labels */
        idx[d]++;
        for (int t = 0; t < ni; t++) off[t] += p.stride[t][d];
        if (idx[d] < adims[d]) break;
        for (int t = 0; t < ni; t++) off[t] -= p.stride[t][d] * adims[d];
        idx[d] = 0;
      }
    }
    if (flt) yf[o] = acc;
    else yi[o] = (int64_t)acci;
    for (int d = no - 1; d >= 0; d--) {
      idx[d]++;
      for (int t = 0; t < ni; t++) off[t] += p.stride[t][d];
      if (idx[d] < adims[d]) break;
      for (int t = 0; t < ni; t++) off[t] -= p.stride[t][d] * adims[d];
      idx[d] = 0;
    }
  }
  if (!rc) flt ? it_store_f64(y, yf) : it_store_i64(y, yi);
  for (int t = 0; t < ni; t++) mg_free(v[t]), mg_free(vi[t]);
  mg_free(yf), mg_free(yi);
  return rc;
}

/* ---- Det ---- */

/* Determinants of [..., M, M] by LU with partial pivoting in double. */
static int det(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return it_fail(c, n, "input must be [..., M, M]");
  int64_t m = x->dims[x->rank - 1];
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank - 2, x->dims);
  if (!y) return -1;
  double *a = it_f64(c, n, x);
  if (!a) return -1;
  int64_t batch = it_numel(y);
  double *r = mg_malloc(sizeof(double) * (size_t)(batch + 1));
  if (!r) {
    mg_free(a);
    return oom(c, n);
  }
  for (int64_t b = 0; b < batch; b++) {
    double *mt = a + b * m * m, d = 1;
    for (int64_t k = 0; k < m; k++) {
      int64_t piv = k;
      for (int64_t i = k + 1; i < m; i++)
        if (fabs(mt[i * m + k]) > fabs(mt[piv * m + k])) piv = i;
      if (piv != k) {
        for (int64_t j = 0; j < m; j++) {
          double t = mt[k * m + j];
          mt[k * m + j] = mt[piv * m + j];
          mt[piv * m + j] = t;
        }
        d = -d;
      }
      double p = mt[k * m + k];
      d *= p;
      if (p == 0) break;
      for (int64_t i = k + 1; i < m; i++) {
        double f = mt[i * m + k] / p;
        for (int64_t j = k + 1; j < m; j++) mt[i * m + j] -= f * mt[k * m + j];
      }
    }
    r[b] = d;
  }
  it_store_f64(y, r);
  mg_free(r);
  mg_free(a);
  return 0;
}

/* ---- quantised products ---- */

/* x - zero point as doubles. zp is NULL (0), a scalar, or a vector of `per` values
 * applied along axis `axis` of x (per-row, per-column or per-channel). */
static double *minus_zp(interp_ctx *c, const mg_node *n, const mg_array *x, const mg_array *zp,
                        int axis, const char *what) {
  double *v = it_f64(c, n, x);
  if (!v || !zp) return v;
  int64_t k = it_numel(x), z = it_numel(zp);
  if (z == 1) {
    double zv = it_get_f64(zp, 0);
    for (int64_t i = 0; i < k; i++) v[i] -= zv;
    return v;
  }
  if (axis < 0 || axis >= x->rank || z != x->dims[axis]) {
    mg_free(v);
    it_fail(c, n, "%s has %lld values, expected 1 or %lld", what, (long long)z,
            (long long)(axis >= 0 && axis < x->rank ? x->dims[axis] : 1));
    return NULL;
  }
  int64_t inner = 1;
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  for (int64_t i = 0; i < k; i++) v[i] -= it_get_f64(zp, (i / inner) % z);
  return v;
}

/* Rounds half to even and saturates to dt's range (uint8, int8, and wider). */
static double saturate(double v, mg_dtype dt) {
  v = nearbyint(v);
  double lo = 0, hi = 255;
  switch (dt) {
  case MG_I8: lo = -128, hi = 127; break;
  case MG_U16: hi = 65535; break;
  case MG_I16: lo = -32768, hi = 32767; break;
  case MG_I32: lo = -2147483648.0, hi = 2147483647.0; break;
  default: break;
  }
  return v < lo ? lo : v > hi ? hi : v;
}

/* MatMulInteger and QLinearMatMul. */
static int qmatmul(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  int q = n->op == MG_OP_QLinearMatMul;
  const mg_array *a = it_in(in, n, 0), *b = it_in(in, n, q ? 3 : 1);
  const mg_array *azp = it_in(in, n, 2), *bzp = it_in(in, n, q ? 5 : 3);
  const mg_array *as = q ? it_in(in, n, 1) : NULL, *bs = q ? it_in(in, n, 4) : NULL;
  const mg_array *ys = q ? it_in(in, n, 6) : NULL, *yzp = q ? it_in(in, n, 7) : NULL;
  if (!a || !b || (q && (!as || !bs || !ys || !yzp))) return it_fail(c, n, "missing input");
  mm_plan p;
  if (mm_prepare(c, n, a, b, &p)) return -1;
  mg_array *y = it_out(c, n, out, 0, q ? yzp->dtype : MG_I32, p.orank, p.odims);
  double *af = NULL, *bf = NULL, *yf = NULL;
  int rc = y ? 0 : -1;
  if (!rc) af = minus_zp(c, n, a, azp, a->rank - 2, "a_zero_point");
  if (af) bf = minus_zp(c, n, b, bzp, b->rank - 1, "b_zero_point");
  if (!rc && (!af || !bf)) rc = -1;
  if (!rc && !(yf = mg_calloc((size_t)(p.batch * p.M * p.N + 1), sizeof(double)))) rc = oom(c, n);
  if (!rc) rc = mm_run(c, n, &p, af, bf, yf);
  if (!rc && q) {
    int64_t na = it_numel(as), nb = it_numel(bs), ny = it_numel(ys), nz = it_numel(yzp);
    if ((na != 1 && na != p.M) || (nb != 1 && nb != p.N) || ny != 1 || nz != 1)
      rc = it_fail(c, n, "unsupported scale or zero point shape");
    for (int64_t t = 0; !rc && t < p.batch * p.M * p.N; t++) {
      int64_t i = (t / p.N) % p.M, j = t % p.N;
      /* The multiplier is a float32 product, as the reference computes it. */
      float m = (float)it_get_f64(as, na == 1 ? 0 : i) * (float)it_get_f64(bs, nb == 1 ? 0 : j);
      m = m / (float)it_get_f64(ys, 0);
      yf[t] = saturate(nearbyint(yf[t] * (double)m) + it_get_f64(yzp, 0), yzp->dtype);
    }
  }
  if (!rc) it_store_f64(y, yf);
  mg_free(af), mg_free(bf), mg_free(yf);
  mm_free(&p);
  return rc;
}

/* ConvInteger and QLinearConv: the double convolution of the zero-point-shifted
 * operands (exact for 8-bit data), then requantised for QLinearConv. */
static int qconv(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  int q = n->op == MG_OP_QLinearConv;
  const mg_array *x = it_in(in, n, 0), *w = it_in(in, n, q ? 3 : 1);
  const mg_array *xzp = it_in(in, n, 2), *wzp = it_in(in, n, q ? 5 : 3);
  const mg_array *xs = q ? it_in(in, n, 1) : NULL, *ws = q ? it_in(in, n, 4) : NULL;
  const mg_array *ys = q ? it_in(in, n, 6) : NULL, *yzp = q ? it_in(in, n, 7) : NULL;
  const mg_array *bias = q ? it_in(in, n, 8) : NULL;
  if (!x || !w || (q && (!xs || !ws || !ys || !yzp))) return it_fail(c, n, "missing input");
  if (x->rank < 3 || w->rank != x->rank) return it_fail(c, n, "X and W must have the same rank >= 3");
  if (xzp && it_numel(xzp) != 1) return it_fail(c, n, "x_zero_point must be a scalar");
  int64_t M = w->dims[0];
  double *xf = minus_zp(c, n, x, xzp, 1, "x_zero_point"), *wf = NULL, *bf = NULL, *yf = NULL;
  if (xf) wf = minus_zp(c, n, w, wzp, 0, "w_zero_point");
  int rc = xf && wf ? 0 : -1;
  if (!rc && bias) {
    if (it_numel(bias) != M) rc = it_fail(c, n, "B must have %lld values", (long long)M);
    else if (!(bf = it_f64(c, n, bias))) rc = -1;
  }
  int64_t yd[MG_ARRAY_MAX_RANK];
  if (!rc) rc = nn_conv(c, n, xf, x->dims, x->rank, wf, w->dims, bf, &yf, yd);
  mg_array *y = NULL;
  if (!rc && !(y = it_out(c, n, out, 0, q ? yzp->dtype : MG_I32, x->rank, yd))) rc = -1;
  if (!rc && q) {
    int64_t nw = it_numel(ws), k = it_numel(y), inner = k ? k / (yd[0] * M) : 1;
    if (it_numel(xs) != 1 || it_numel(ys) != 1 || it_numel(yzp) != 1 || (nw != 1 && nw != M))
      rc = it_fail(c, n, "unsupported scale or zero point shape");
    for (int64_t i = 0; !rc && i < k; i++) {
      int64_t m = (i / inner) % M;
      float mul = (float)it_get_f64(xs, 0) * (float)it_get_f64(ws, nw == 1 ? 0 : m);
      mul = mul / (float)it_get_f64(ys, 0);
      yf[i] = saturate(yf[i] * (double)mul + it_get_f64(yzp, 0), yzp->dtype);
    }
  }
  if (!rc) it_store_f64(y, yf);
  mg_free(xf), mg_free(wf), mg_free(bf), mg_free(yf);
  return rc;
}

/* The linalg family's entry point (interp_internal.h): dispatches on n->op. */
int interp_linalg(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                  interp_frame *frame) {
  (void)frame;
  switch (n->op) {
  case MG_OP_MatMul: return matmul(c, n, in, out);
  case MG_OP_Gemm: return gemm(c, n, in, out);
  case MG_OP_Einsum: return einsum(c, n, in, out);
  case MG_OP_Det: return det(c, n, in, out);
  case MG_OP_MatMulInteger: case MG_OP_QLinearMatMul: return qmatmul(c, n, in, out);
  case MG_OP_ConvInteger: case MG_OP_QLinearConv: return qconv(c, n, in, out);
  default:
    mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "%s is not a linalg op", n->op_type);
    return -1;
  }
}
