/* The misc family's float kernels: the losses, Range, Einsum and Det (see
 * mg_rt_misc.h). Values are read through tensor.c's element access and computed in
 * double, in the reference interpreter's order, so results match it exactly; the
 * float32 case reads its arrays directly. */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

/* Element i of a float array of dtype t as double (float32 read directly). */
static double ld(mg_rt_dtype t, const void *base, int64_t i) {
  if (t == MG_RT_F32) return ((const float *)base)[i];
  return mg_tensor_load_f64(t, base, i);
}

/* v as a float that rounds to any narrower format exactly as v would: truncated
 * toward zero with the lowest bit set when inexact (a sticky bit), so double ->
 * float -> half rounds once. */
static float to_f32_sticky(double v) {
  float f = (float)v;
  uint32_t u;
  if ((double)f == v || v != v || v - v != 0) return f;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) != 0 && (((double)f > v) == (f > 0))) u -= 1;
  u |= 1;
  memcpy(&f, &u, 4);
  return f;
}

void mg_misc_store_f64(mg_rt_dtype t, void *base, int64_t i, double v) {
  uint16_t h;
  switch (t) {
  case MG_RT_F32: ((float *)base)[i] = (float)v; return;
  case MG_RT_F16: h = mg_rt_f32_to_f16(to_f32_sticky(v)); memcpy((char *)base + 2 * i, &h, 2); return;
  case MG_RT_BF16: h = mg_rt_f32_to_bf16(to_f32_sticky(v)); memcpy((char *)base + 2 * i, &h, 2); return;
  default: mg_tensor_store_f64(t, base, i, v); return;
  }
}

static void st(mg_rt_dtype t, void *base, int64_t i, double v) { mg_misc_store_f64(t, base, i, v); }

/* ---------------------------------------------------------------- losses */

/* The NLL terms over [N, C, D] log-probabilities lp (lp_t the dtype of lp, or
 * MG_RT_F64 for the double scratch column of the softmax path). Shared by both
 * losses through nll_term. */
static int64_t target_at(const mg_loss_params *p, const void *target, int64_t i) {
  return p->target_i64 ? ((const int64_t *)target)[i] : ((const int32_t *)target)[i];
}

/* Finishes a loss: stores the reduced value (sum, or sum / wsum for mean). */
static void loss_reduce(const mg_loss_params *p, double sum, double wsum, void *loss) {
  if (p->reduction == MG_LOSS_SUM) st(p->t, loss, 0, sum);
  else if (p->reduction == MG_LOSS_MEAN) st(p->t, loss, 0, sum / wsum);
}

void mg_nll_loss(const mg_loss_params *p, const void *logp, const void *target,
                 const void *weight, void *loss) {
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < p->N; b++)
    for (int64_t s = 0; s < p->D; s++) {
      const int64_t i = b * p->D + s, tg = target_at(p, target, i);
      double l, wt;
      if (p->has_ignore && tg == p->ignore_index) {
        l = 0;
      } else if (tg < 0 || tg >= p->C) {
        l = NAN, sum = NAN;
      } else {
        wt = weight ? ld(p->t, weight, tg) : 1;
        l = -ld(p->t, logp, (b * p->C + tg) * p->D + s) * wt;
        sum += l;
        wsum += wt;
      }
      if (p->reduction == MG_LOSS_NONE) st(p->t, loss, i, l);
    }
  loss_reduce(p, sum, wsum, loss);
}

void mg_softmax_cross_entropy(const mg_loss_params *p, const void *scores, const void *target,
                              const void *weight, void *loss, void *log_prob) {
  const int64_t C = p->C, D = p->D;
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < p->N; b++)
    for (int64_t s = 0; s < D; s++) {
      const int64_t base = b * C * D + s, i = b * D + s, tg = target_at(p, target, i);
      double mx = -INFINITY, e = 0, lse, l, wt;
      for (int64_t j = 0; j < C; j++) mx = fmax(mx, ld(p->t, scores, base + j * D));
      for (int64_t j = 0; j < C; j++) e += exp(ld(p->t, scores, base + j * D) - mx);
      lse = mx + log(e);
      if (log_prob)
        for (int64_t j = 0; j < C; j++) st(p->t, log_prob, base + j * D, ld(p->t, scores, base + j * D) - lse);
      if (p->has_ignore && tg == p->ignore_index) {
        l = 0;
      } else if (tg < 0 || tg >= C) {
        l = NAN, sum = NAN;
      } else {
        wt = weight ? ld(p->t, weight, tg) : 1;
        l = -(ld(p->t, scores, base + tg * D) - lse) * wt;
        sum += l;
        wsum += wt;
      }
      if (p->reduction == MG_LOSS_NONE) st(p->t, loss, i, l);
    }
  loss_reduce(p, sum, wsum, loss);
}

/* ---------------------------------------------------------------- Range */

void mg_range(mg_rt_dtype t, const void *start, const void *delta, int64_t n, void *dst) {
  if (mg_tensor_is_float(t)) {
    const double a = ld(t, start, 0), d = ld(t, delta, 0);
    for (int64_t i = 0; i < n; i++) st(t, dst, i, a + (double)i * d);
    return;
  }
  {
    const uint64_t a = (uint64_t)mg_tensor_load_i64(t, start, 0);
    const uint64_t d = (uint64_t)mg_tensor_load_i64(t, delta, 0);
    if (t == MG_RT_I64) {
      for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int64_t)(a + (uint64_t)i * d);
    } else if (t == MG_RT_I32) {
      for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)(uint32_t)(a + (uint64_t)i * d);
    } else {
      for (int64_t i = 0; i < n; i++) mg_tensor_store_i64(t, dst, i, (int64_t)(a + (uint64_t)i * d));
    }
  }
}

/* ---------------------------------------------------------------- Einsum */

enum { EIN_MAX_OPS = 8, EIN_MAX_LABELS = 64 };

/* Advances the odometer idx over labels [from, to) (the last fastest), moving the
 * operand offsets with it; returns 0 when it wrapped around completely. */
static int ein_step(int n_ops, int n_all, int from, int to, const int64_t *dims,
                    const int64_t *strides, int64_t *idx, int64_t *off) {
  for (int d = to - 1; d >= from; d--) {
    idx[d]++;
    for (int k = 0; k < n_ops; k++) off[k] += strides[k * n_all + d];
    if (idx[d] < dims[d]) return 1;
    for (int k = 0; k < n_ops; k++) off[k] -= strides[k * n_all + d] * dims[d];
    idx[d] = 0;
  }
  return 0;
}

void mg_einsum(mg_rt_dtype t, int n_ops, const void *const *ops, int n_out, int n_all,
               const int64_t *dims, const int64_t *strides, void *dst) {
  int64_t idx[EIN_MAX_LABELS] = {0}, off[EIN_MAX_OPS] = {0}, onum = 1, o;
  const int flt = mg_tensor_is_float(t);
  /* the innermost summed label runs as a plain loop; the odometer walks the rest */
  const int has_sum = n_all > n_out;
  const int64_t in_n = has_sum ? dims[n_all - 1] : 1;
  if (n_ops > EIN_MAX_OPS || n_all > EIN_MAX_LABELS) return; /* excluded by the generator */
  for (int d = 0; d < n_out; d++) onum *= dims[d];
  for (int d = 0; d < n_all; d++)
    if (dims[d] == 0) { /* an empty sum gives 0; an empty output nothing */
      for (o = 0; o < onum; o++) flt ? st(t, dst, o, 0.0) : mg_tensor_store_i64(t, dst, o, 0);
      return;
    }
  for (o = 0; o < onum; o++) {
    double acc = 0;
    uint64_t acci = 0;
    int more = 1;
    while (more) {
      int64_t is[EIN_MAX_OPS];
      for (int k = 0; k < n_ops; k++) is[k] = has_sum ? strides[k * n_all + n_all - 1] : 0;
      if (t == MG_RT_F32 && n_ops == 2) {
        const float *a = (const float *)ops[0] + off[0], *b = (const float *)ops[1] + off[1];
        for (int64_t j = 0; j < in_n; j++) acc += (double)a[j * is[0]] * (double)b[j * is[1]];
      } else if (flt) {
        for (int64_t j = 0; j < in_n; j++) {
          double pr = 1;
          for (int k = 0; k < n_ops; k++) pr *= ld(t, ops[k], off[k] + j * is[k]);
          acc += pr;
        }
      } else {
        for (int64_t j = 0; j < in_n; j++) {
          uint64_t pr = 1;
          for (int k = 0; k < n_ops; k++) pr *= (uint64_t)mg_tensor_load_i64(t, ops[k], off[k] + j * is[k]);
          acci += pr;
        }
      }
      more = has_sum && ein_step(n_ops, n_all, n_out, n_all - 1, dims, strides, idx, off);
    }
    if (flt) st(t, dst, o, acc);
    else mg_tensor_store_i64(t, dst, o, (int64_t)acci);
    ein_step(n_ops, n_all, 0, n_out, dims, strides, idx, off);
  }
}

/* ---------------------------------------------------------------- Det */

size_t mg_det_scratch(int64_t m) { return (size_t)(2 * m * m + 4); }

void mg_det(mg_rt_dtype t, int64_t batch, int64_t m, const void *x, void *y, float *scratch) {
  /* the doubles start at the first 8-byte boundary inside scratch */
  double *a = (double *)(void *)((char *)scratch + ((8 - (uintptr_t)scratch % 8) % 8));
  for (int64_t b = 0; b < batch; b++) {
    double d = 1;
    for (int64_t i = 0; i < m * m; i++) a[i] = ld(t, x, b * m * m + i);
    for (int64_t k = 0; k < m; k++) {
      int64_t piv = k;
      double pv;
      for (int64_t i = k + 1; i < m; i++)
        if (fabs(a[i * m + k]) > fabs(a[piv * m + k])) piv = i;
      if (piv != k) {
        for (int64_t j = 0; j < m; j++) {
          const double tmp = a[k * m + j];
          a[k * m + j] = a[piv * m + j];
          a[piv * m + j] = tmp;
        }
        d = -d;
      }
      pv = a[k * m + k];
      d *= pv;
      if (pv == 0) break;
      for (int64_t i = k + 1; i < m; i++) {
        const double f = a[i * m + k] / pv;
        for (int64_t j = k + 1; j < m; j++) a[i * m + j] -= f * a[k * m + j];
      }
    }
    st(t, y, b, d);
  }
}
