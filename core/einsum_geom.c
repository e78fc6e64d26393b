#include "einsum_geom.h"
#include <stddef.h>
#include <string.h>

/* A letter's label: A-Z 0..25, a-z 26..51; -1 for anything else. */
static int letter_label(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  return -1;
}

char mg_einsum_letter(int label) {
  return label < 26 ? (char)('A' + label) : label < MG_EIN_LETTERS ? (char)('a' + label - 26) : '.';
}

/* Parses one term of len chars into labels; an ellipsis becomes labels 52 + ell -
 * k + j for its k dims (right-aligned among the ell broadcast dims; k = rank -
 * letters, or ell when rank < 0, as for the output). Returns the label count, or -1. */
static int parse_term(const char *s, size_t len, int rank, int ell, int *labels) {
  int cnt = 0, letters = 0, seen_ell = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') continue;
    if (letter_label(s[i]) < 0) return -1;
    letters++;
  }
  for (size_t i = 0; i < len;) {
    if (s[i] == '.') {
      int k = rank < 0 ? ell : rank - letters;
      if (len - i < 3 || s[i + 1] != '.' || s[i + 2] != '.' || seen_ell) return -1;
      if (k < 0 || k > ell || cnt + k > MG_MAX_RANK) return -1;
      seen_ell = 1;
      for (int j = 0; j < k; j++) labels[cnt++] = MG_EIN_LETTERS + ell - k + j;
      i += 3;
      continue;
    }
    if (cnt >= MG_MAX_RANK) return -1;
    labels[cnt++] = letter_label(s[i++]);
  }
  return cnt;
}

/* The end of the term starting at `start` of the lhs (its comma or lhs_len). */
static size_t term_end(const char *eq, size_t start, size_t lhs_len) {
  size_t e = start;
  while (e < lhs_len && eq[e] != ',') e++;
  return e;
}

mg_ein_status mg_einsum_labels(const char *eq0, int n, const int *rank, mg_einsum_geom *p, mg_ein_error *err) {
  char eq[512];
  size_t L = 0, start = 0, end = 0;
  memset(p, 0, offsetof(mg_einsum_geom, na));
  memset(err, 0, sizeof *err);
  if (n < 1 || n > MG_EIN_MAX_OPS) return MG_EIN_OPERANDS;
  for (const char *c = eq0; *c; c++) {
    if (*c == ' ') continue;
    if (L + 1 >= sizeof eq) return MG_EIN_TOO_LONG;
    eq[L++] = *c;
  }
  eq[L] = 0;
  const char *arrow = strstr(eq, "->");
  const size_t lhs_len = arrow ? (size_t)(arrow - eq) : L;
  p->n_ops = n;
  /* first pass: the terms and the ellipsis width */
  for (int k = 0; k < n; k++) {
    int letters = 0, dots = 0;
    end = term_end(eq, start, lhs_len);
    err->term = k;
    if (k < n - 1 && end >= lhs_len) return MG_EIN_FEWER_TERMS;
    for (size_t i = start; i < end; i++) eq[i] == '.' ? dots++ : letters++;
    if (dots && rank[k] - letters > p->ell) p->ell = rank[k] - letters;
    start = end + 1;
  }
  if (end != lhs_len) return MG_EIN_MORE_TERMS;
  start = 0;
  for (int k = 0; k < n; k++) {
    end = term_end(eq, start, lhs_len);
    p->rank[k] = parse_term(eq + start, end - start, rank[k], p->ell, p->lab[k]);
    err->term = k;
    if (p->rank[k] != rank[k]) return MG_EIN_TERM_RANK;
    for (int d = 0; d < rank[k]; d++) p->count[p->lab[k][d]]++;
    start = end + 1;
  }
  int isout[MG_EIN_LABELS] = {0};
  if (arrow) {
    p->no = parse_term(arrow + 2, strlen(arrow + 2), -1, p->ell, p->olab);
    if (p->no < 0) return p->no = 0, MG_EIN_BAD_OUTPUT;
  } else {
    for (int j = 0; j < p->ell; j++) p->olab[p->no++] = MG_EIN_LETTERS + j;
    for (int l = 0; l < MG_EIN_LETTERS; l++)
      if (p->count[l] == 1) {
        if (p->no >= MG_MAX_RANK) return MG_EIN_OUTPUT_RANK;
        p->olab[p->no++] = l;
      }
  }
  for (int i = 0; i < p->no; i++) {
    err->label = p->olab[i];
    if (p->olab[i] < MG_EIN_LETTERS && !p->count[p->olab[i]]) return MG_EIN_OUTPUT_UNKNOWN;
    if (isout[p->olab[i]]++) return MG_EIN_OUTPUT_REPEATED;
  }
  return MG_EIN_OK;
}

mg_ein_status mg_einsum_plan(const char *eq, int n, const int *rank, const int64_t *const *dims,
                             mg_einsum_geom *p, mg_ein_error *err) {
  mg_ein_status st = mg_einsum_labels(eq, n, rank, p, err);
  if (st != MG_EIN_OK) return st;
  int64_t ldim[MG_EIN_LABELS];
  int isout[MG_EIN_LABELS] = {0};
  for (int l = 0; l < MG_EIN_LABELS; l++) ldim[l] = -1;
  for (int k = 0; k < n; k++)
    for (int d = 0; d < rank[k]; d++) {
      const int l = p->lab[k][d];
      if (ldim[l] < 0 || ldim[l] == 1) ldim[l] = dims[k][d];
      else if (dims[k][d] != ldim[l] && !(l >= MG_EIN_LETTERS && dims[k][d] == 1)) {
        *err = (mg_ein_error){k, l, ldim[l], dims[k][d]};
        return MG_EIN_LABEL_SIZES;
      }
    }
  for (int i = 0; i < p->no; i++) {
    if (ldim[p->olab[i]] < 0) ldim[p->olab[i]] = 1; /* an ellipsis dim no operand has */
    isout[p->olab[i]] = 1;
  }
  p->na = 0;
  for (int i = 0; i < p->no; i++) p->loop[p->na++] = p->olab[i];
  for (int l = 0; l < MG_EIN_LABELS; l++)
    if (ldim[l] >= 0 && !isout[l]) p->loop[p->na++] = l;
  for (int i = 0; i < p->na; i++) p->size[i] = ldim[p->loop[i]];
  for (int i = 0; i < p->no; i++) p->out_dims[i] = p->size[i];
  for (int k = 0; k < n; k++) {
    int64_t own[MG_MAX_RANK], acc = 1;
    for (int d = rank[k] - 1; d >= 0; d--) own[d] = acc, acc *= dims[k][d];
    for (int i = 0; i < p->na; i++) {
      p->stride[k][i] = 0;
      for (int d = 0; d < rank[k]; d++)
        if (p->lab[k][d] == p->loop[i] && dims[k][d] != 1) p->stride[k][i] += own[d];
    }
  }
  return MG_EIN_OK;
}
