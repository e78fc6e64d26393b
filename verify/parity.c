/* Parity metrics and verdicts (see parity.h). */
#include "parity.h"
#include "arena.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

parity_tol parity_default_forward(void) {
  return (parity_tol){1e-3, 1e-5, 0.99999, PARITY_LAYER_REL_NORM, 0, PARITY_NOISE_MULT};
}
parity_tol parity_default_grad(void) { return (parity_tol){1e-4, 1e-5, 0.9999, 1e-3, 0, PARITY_NOISE_MULT}; }

static int numeric(mg_dtype t) { return mg_dtype_size(t) > 0 && t != MG_STRING && t != MG_C64 && t != MG_C128; }

static int64_t numel(const mg_array *a) {
  int64_t n = 1;
  for (int i = 0; i < a->rank; i++) n *= a->dims[i];
  return n;
}

/* Maps a float32 onto a line of integers where adjacent floats differ by one, so
 * a ULP distance is a subtraction (+0 and -0 coincide). */
static int64_t ordered_f32(double v) {
  float f = (float)v;
  int32_t i;
  memcpy(&i, &f, 4);
  return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* LSD radix sort of n 32-bit keys (ULP distances are clamped to 32 bits), because
 * quantiles over a few million gradients must stay cheap. */
static void radix_sort_u32(uint32_t *a, uint32_t *tmp, int64_t n) {
  for (int shift = 0; shift < 32; shift += 8) {
    int64_t count[257] = {0};
    for (int64_t i = 0; i < n; i++) count[((a[i] >> shift) & 255) + 1]++;
    for (int b = 0; b < 256; b++) count[b + 1] += count[b];
    for (int64_t i = 0; i < n; i++) tmp[count[(a[i] >> shift) & 255]++] = a[i];
    memcpy(a, tmp, (size_t)n * sizeof *a);
  }
}

int parity_compare(const mg_array *got, const mg_array *ref, const parity_tol *tol, parity_metrics *out,
                   const char *what, mg_diags *d) {
  memset(out, 0, sizeof *out);
  if (!numeric(got->dtype) || !numeric(ref->dtype)) {
    mg_error(d, UNSUPPORTED_DTYPE, what, NULL, "cannot compare %s with %s", mg_dtype_name(got->dtype),
             mg_dtype_name(ref->dtype));
    return -1;
  }
  int64_t n = numel(got);
  if (n != numel(ref)) {
    mg_error(d, SHAPE, what, NULL, "%lld elements computed, %lld in the reference", (long long)n,
             (long long)numel(ref));
    return -1;
  }
  size_t gs = mg_dtype_size(got->dtype), rs = mg_dtype_size(ref->dtype);
  uint32_t *ulp = n ? mg_malloc((size_t)n * 2 * sizeof *ulp) : NULL;
  if (n && !ulp) {
    mg_error(d, OOM, what, NULL, "no memory for %lld ULP distances", (long long)n);
    return -1;
  }
  double dot = 0, gg = 0, rr = 0, dd = 0;
  int64_t n_ulp = 0;
  out->n = n;
  for (int64_t i = 0; i < n; i++) {
    double g = mg_load_f64(got->dtype, (const char *)got->data + (size_t)i * gs);
    double r = mg_load_f64(ref->dtype, (const char *)ref->data + (size_t)i * rs);
    if (!isfinite(g) || !isfinite(r)) {
      /* the same infinity, or NaN on both sides, agrees; anything else is a failure */
      if (!((isnan(g) && isnan(r)) || g == r)) out->n_nonfinite++, out->n_over++;
      continue;
    }
    double e = fabs(g - r);
    if (e > out->max_abs) out->max_abs = e, out->worst_index = i;
    double rel = e / fmax(fabs(r), PARITY_REL_FLOOR);
    if (rel > out->max_rel) out->max_rel = rel;
    if (e > tol->atol + tol->rtol * fabs(r) + tol->noise_mult * tol->noise) out->n_over++;
    dot += g * r, gg += g * g, rr += r * r, dd += (g - r) * (g - r);
    int64_t u = ordered_f32(g) - ordered_f32(r);
    if (u < 0) u = -u;
    ulp[n_ulp++] = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
  }
  out->cosine = gg == 0 && rr == 0 ? 1.0 : gg == 0 || rr == 0 ? 0.0 : dot / (sqrt(gg) * sqrt(rr));
  out->rel_norm = rr > 0 ? sqrt(dd) / sqrt(rr) : sqrt(dd);
  out->frac_over = n ? (double)out->n_over / (double)n : 0;
  if (n_ulp) {
    radix_sort_u32(ulp, ulp + n, n_ulp);
    out->ulp_median = ulp[n_ulp / 2];
    out->ulp_p99 = ulp[(int64_t)((double)(n_ulp - 1) * 0.99)];
    out->ulp_max = ulp[n_ulp - 1];
  }
  mg_free(ulp);
  return 0;
}

int parity_passes(const parity_metrics *m, const parity_tol *tol, int grad, char *why, size_t n) {
  if (why && n) why[0] = 0;
  if (m->n_nonfinite) {
    if (why) snprintf(why, n, "%lld elements disagree on NaN/Inf", (long long)m->n_nonfinite);
    return 0;
  }
  if (!grad && tol->atol >= 0 && tol->rtol >= 0 && m->n_over) {
    char noise[96] = "";
    if (tol->noise > 0) snprintf(noise, sizeof noise, " + %g x reference noise %.3g", tol->noise_mult, tol->noise);
    if (why)
      snprintf(why, n, "%lld of %lld elements over atol %g + rtol %g*|ref|%s (max abs err %.3g)",
               (long long)m->n_over, (long long)m->n, tol->atol, tol->rtol, noise, m->max_abs);
    return 0;
  }
  if (tol->min_cosine >= 0 && !(m->cosine >= tol->min_cosine)) {
    if (why) snprintf(why, n, "cosine %.9f < %.9g", m->cosine, tol->min_cosine);
    return 0;
  }
  if (grad && tol->max_rel_norm >= 0 && !(m->rel_norm <= tol->max_rel_norm + tol->noise_mult * tol->noise)) {
    if (why) {
      if (tol->noise > 0)
        snprintf(why, n, "relative norm error %.3g > %g + %g x reference noise %.3g", m->rel_norm, tol->max_rel_norm,
                 tol->noise_mult, tol->noise);
      else
        snprintf(why, n, "relative norm error %.3g > %g", m->rel_norm, tol->max_rel_norm);
    }
    return 0;
  }
  return 1;
}

void parity_group_init(parity_group *g) { memset(g, 0, sizeof *g); }

void parity_group_add(parity_group *g, const mg_array *got, const mg_array *ref, const parity_metrics *m) {
  int64_t n = numel(got) < numel(ref) ? numel(got) : numel(ref);
  size_t gs = mg_dtype_size(got->dtype), rs = mg_dtype_size(ref->dtype);
  for (int64_t i = 0; i < n; i++) {
    double a = mg_load_f64(got->dtype, (const char *)got->data + (size_t)i * gs);
    double b = mg_load_f64(ref->dtype, (const char *)ref->data + (size_t)i * rs);
    if (!isfinite(a) || !isfinite(b)) continue;
    g->dot += a * b, g->gg += a * a, g->rr += b * b, g->dd += (a - b) * (a - b);
  }
  parity_metrics *acc = &g->acc;
  acc->n += m->n;
  acc->max_abs = fmax(acc->max_abs, m->max_abs);
  acc->max_rel = fmax(acc->max_rel, m->max_rel);
  acc->ulp_median = fmax(acc->ulp_median, m->ulp_median);
  acc->ulp_p99 = fmax(acc->ulp_p99, m->ulp_p99);
  acc->ulp_max = fmax(acc->ulp_max, m->ulp_max);
  acc->n_over += m->n_over;
  acc->n_nonfinite += m->n_nonfinite;
  g->members++;
}

void parity_group_finish(const parity_group *g, parity_metrics *out) {
  *out = g->acc;
  out->cosine = g->gg == 0 && g->rr == 0 ? 1.0 : g->gg == 0 || g->rr == 0 ? 0.0 : g->dot / (sqrt(g->gg) * sqrt(g->rr));
  out->rel_norm = g->rr > 0 ? sqrt(g->dd) / sqrt(g->rr) : sqrt(g->dd);
  out->frac_over = out->n ? (double)out->n_over / (double)out->n : 0;
  out->worst_index = -1;
}
