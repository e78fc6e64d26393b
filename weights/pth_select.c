/* Choosing the tensors of an unpickled .pth object and listing them in a source
 * (shared by the zip, legacy and bare-pickle readers of pth.c).
 *
 * With a key, a dotted path ("state_dict", "model.ema", "optimizer.state")
 * selects an object, and every tensor under it is listed, named by its path below
 * it. Without, the shallowest dicts whose values are all tensors are the
 * candidates, and exactly one must exist at that depth: a plain state_dict is its
 * own candidate; a checkpoint {"state_dict", "optimizer", ...} has state_dict at
 * depth 1 and the optimizer's per-parameter state at depth 3. Walks are bounded in
 * depth and in visits, since a pickle can build cycles and exponential DAGs. */
#include "source_internal.h"
#include "unpickle.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  PTH_MAX_DEPTH = 64,          /* nesting walked below the selected object */
  PTH_SEARCH_DEPTH = 32,       /* nesting searched for a tensor dict */
  PTH_MAX_CANDIDATES_SHOWN = 8,
  PTH_MAX_NAME = 64 * 1024,
};
/* Objects a walk may visit. Shared sub-objects make a DAG whose walk is
 * exponential in its pickle's size, and every tensor reached costs a table entry,
 * so the budget is proportional to the pickle (a tree of objects costs at least a
 * byte each; 16 leaves room for legitimately shared containers), with a cap. */
#define PTH_MAX_VISITS ((long)1 << 22)

long pth_visit_budget(size_t pickle_len) {
  return pickle_len > (size_t)(PTH_MAX_VISITS / 16) ? PTH_MAX_VISITS : (long)pickle_len * 16 + 4096;
}

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Adds name to the set; 1 if it was new, 0 if present, -1 on allocation failure. */
static int names_add(pth_collect_ctx *cl, const char *name) {
  if ((cl->n_names + 1) * 2 > cl->names_cap) {
    size_t cap = cl->names_cap ? cl->names_cap * 2 : 256;
    const char **t = mg_calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < cl->names_cap; i++)
      if (cl->names[i]) {
        size_t h = fnv(cl->names[i]) & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = cl->names[i];
      }
    mg_free(cl->names);
    cl->names = t;
    cl->names_cap = cap;
  }
  size_t h = fnv(name) & (cl->names_cap - 1);
  while (cl->names[h]) {
    if (!strcmp(cl->names[h], name)) return 0;
    h = (h + 1) & (cl->names_cap - 1);
  }
  cl->names[h] = name;
  cl->n_names++;
  return 1;
}

/* Appends ".seg" (or "seg" at the start) to the path; -1 on failure. */
static int path_push(pth_collect_ctx *cl, const char *seg) {
  size_t n = strlen(seg), need = cl->path_len + (cl->path_len ? 1 : 0) + n + 1;
  if (need > PTH_MAX_NAME) {
    mg_error(cl->d, LIMIT, NULL, NULL, "tensor name longer than %d bytes", PTH_MAX_NAME);
    return -1;
  }
  if (need > cl->path_cap) {
    size_t cap = cl->path_cap ? cl->path_cap : 256;
    while (cap < need) cap *= 2;
    char *p = mg_realloc(cl->path, cap);
    if (!p) {
      mg_error(cl->d, OOM, NULL, NULL, "out of memory");
      return -1;
    }
    cl->path = p;
    cl->path_cap = cap;
  }
  if (cl->path_len) cl->path[cl->path_len++] = '.';
  memcpy(cl->path + cl->path_len, seg, n + 1);
  cl->path_len += n;
  return 0;
}

static void path_pop(pth_collect_ctx *cl, size_t len) {
  cl->path_len = len;
  if (cl->path) cl->path[len] = 0;
}

/* The text that names a dict key or list index in a tensor name; NULL (with a
 * diagnostic) for keys that cannot name anything. */
static const char *key_text(pth_collect_ctx *cl, const pk_obj *k, char *buf, size_t cap) {
  switch (k->kind) {
    case PK_STR:
      if (strlen(k->u.str.s) != k->u.str.n) break;
      return k->u.str.s;
    case PK_INT: snprintf(buf, cap, "%lld", (long long)k->u.i); return buf;
    case PK_BOOL: return k->u.b ? "True" : "False";
    case PK_NONE: return "None";
    default: break;
  }
  mg_error(cl->d, INVALID, NULL, NULL, "a dict key of type %s (or with a NUL byte) cannot name a tensor",
           pk_kind_name(k->kind));
  return NULL;
}

static int count_visit(pth_collect_ctx *cl) {
  if (++cl->visits > cl->max_visits) {
    mg_error(cl->d, LIMIT, NULL, NULL, "the pickle's object graph is too large to walk (over %ld objects)",
             cl->max_visits);
    return -1;
  }
  return 0;
}

/* Lists tensor t under the current path: binds its storage, checks that the view
 * lies inside it, and rejects duplicate names. */
static int add_tensor(pth_collect_ctx *cl, const pk_obj *t) {
  const char *name = cl->path_len ? cl->path : "tensor";
  size_t es = mg_dtype_size(t->u.tensor.dtype);
  if (!es) {
    mg_error(cl->d, UNSUPPORTED_DTYPE, name, NULL, "tensor of dtype %s", mg_dtype_name(t->u.tensor.dtype));
    return -1;
  }
  int idx = cl->bind(cl, t->u.tensor.st, name);
  if (idx < 0) return -1;
  /* The furthest element the view touches must lie inside the storage. */
  int64_t numel = 1, last = t->u.tensor.offset;
  int ok = 1;
  for (int i = 0; i < t->u.tensor.rank && ok; i++) {
    int64_t step;
    ok = mg_mul_i64(numel, t->u.tensor.dims[i], &numel);
    if (ok && t->u.tensor.dims[i] > 0)
      ok = mg_mul_ovf(t->u.tensor.dims[i] - 1, t->u.tensor.strides[i], &step) && mg_add_ovf(last, step, &last);
  }
  int64_t need = 0;
  if (ok && numel > 0) ok = mg_add_ovf(last, 1, &need) && mg_mul_ovf(need, (int64_t)es, &need);
  if (!ok) {
    mg_error(cl->d, INVALID, name, NULL, "tensor size or stride overflows");
    return -1;
  }
  const wt_storage *st = &cl->s->storages[idx];
  if (numel > 0 && (uint64_t)need > st->nbytes) {
    mg_error(cl->d, INVALID, name, NULL,
             "tensor needs %lld bytes of storage '%s', which holds %zu", (long long)need,
             t->u.tensor.st->key, st->nbytes);
    return -1;
  }
  wt_tensor *w = wt_add_tensor(cl->s, name, t->u.tensor.dtype, t->u.tensor.rank, t->u.tensor.dims, idx,
                               t->u.tensor.offset);
  if (!w) {
    mg_error(cl->d, OOM, name, NULL, "out of memory");
    return -1;
  }
  memcpy(w->strides, t->u.tensor.strides, sizeof(int64_t) * (size_t)t->u.tensor.rank);
  int r = names_add(cl, w->name);
  if (r < 0) {
    mg_error(cl->d, OOM, name, NULL, "out of memory");
    return -1;
  }
  if (!r) {
    mg_error(cl->d, INVALID, name, NULL, "two tensors have this name");
    return -1;
  }
  return 0;
}

/* Lists every tensor reachable from o, naming each by its path. Non-tensor leaves
 * (ints, strings, None: optimizer hyper-parameters, epochs) are skipped. */
static int flatten(pth_collect_ctx *cl, const pk_obj *o, int depth) {
  if (count_visit(cl)) return -1;
  if (o->kind == PK_TENSOR) return add_tensor(cl, o);
  if (o->kind != PK_DICT && o->kind != PK_LIST && o->kind != PK_TUPLE) return 0;
  if (depth >= PTH_MAX_DEPTH) {
    mg_error(cl->d, LIMIT, NULL, NULL, "containers nested deeper than %d levels", PTH_MAX_DEPTH);
    return -1;
  }
  size_t n = o->kind == PK_DICT ? o->u.dict.n : o->u.seq.n, mark = cl->path_len;
  for (size_t i = 0; i < n; i++) {
    const pk_obj *val = o->kind == PK_DICT ? o->u.dict.vals[i] : o->u.seq.items[i];
    if (val->kind != PK_TENSOR && val->kind != PK_DICT && val->kind != PK_LIST && val->kind != PK_TUPLE)
      continue;
    char buf[32];
    const char *seg = buf;
    if (o->kind == PK_DICT) seg = key_text(cl, o->u.dict.keys[i], buf, sizeof buf);
    else snprintf(buf, sizeof buf, "%zu", i);
    if (!seg || path_push(cl, seg) || flatten(cl, val, depth + 1)) return -1;
    path_pop(cl, mark);
  }
  return 0;
}

/* Follows a dotted key from root. At a dict the longest run of segments that
 * matches a key wins (so keys containing dots work); at a list or tuple a segment
 * is an index; int keys match decimal segments. */
static const pk_obj *follow_key(pth_collect_ctx *cl, const pk_obj *root, const char *key) {
  const pk_obj *o = root;
  const char *rest = key;
  while (*rest) {
    const pk_obj *next = NULL;
    size_t used = 0, rl = strlen(rest);
    if (o->kind == PK_DICT) {
      for (size_t len = rl; len > 0 && !next; len--) {
        if (len < rl && rest[len] != '.') continue;
        for (size_t i = o->u.dict.n; i-- > 0 && !next;) {
          const pk_obj *k = o->u.dict.keys[i];
          char buf[32];
          if (k->kind == PK_INT) snprintf(buf, sizeof buf, "%lld", (long long)k->u.i);
          const char *kt = k->kind == PK_STR ? k->u.str.s : k->kind == PK_INT ? buf : NULL;
          size_t kn = k->kind == PK_STR ? k->u.str.n : kt ? strlen(kt) : 0;
          if (kt && kn == len && !memcmp(kt, rest, len)) next = o->u.dict.vals[i], used = len;
        }
      }
    } else if (o->kind == PK_LIST || o->kind == PK_TUPLE) {
      char *e;
      unsigned long long ix = strtoull(rest, &e, 10);
      if (e != rest && (*e == 0 || *e == '.') && rest[0] != '-' && ix < o->u.seq.n)
        next = o->u.seq.items[ix], used = (size_t)(e - rest);
    }
    if (!next) {
      char avail[512] = "";
      size_t al = 0;
      for (size_t i = 0; o->kind == PK_DICT && i < o->u.dict.n && al + 80 < sizeof avail; i++) {
        const pk_obj *k = o->u.dict.keys[i];
        if (k->kind == PK_STR)
          al += (size_t)snprintf(avail + al, sizeof avail - al, "%s'%.60s'", al ? ", " : "", k->u.str.s);
        else if (k->kind == PK_INT)
          al += (size_t)snprintf(avail + al, sizeof avail - al, "%s%lld", al ? ", " : "", (long long)k->u.i);
      }
      int at = rest > key ? (int)(rest - key - 1) : 0;
      mg_error(cl->d, USAGE, NULL, NULL, "key '%s' not found: %s%.*s%s is a %s%s%s", key, at ? "'" : "", at, key,
               at ? "'" : "the top level", pk_kind_name(o->kind), al ? " with keys " : "", avail);
      return NULL;
    }
    o = next;
    rest += used;
    if (*rest == '.') rest++;
  }
  return o;
}

static int is_tensor_dict(const pk_obj *o) {
  if (o->kind != PK_DICT || !o->u.dict.n) return 0;
  for (size_t i = 0; i < o->u.dict.n; i++)
    if (o->u.dict.vals[i]->kind != PK_TENSOR) return 0;
  return 1;
}

/* Breadth-first search for the shallowest dicts of tensors. */
typedef struct {
  const pk_obj *o;
  const pk_obj *key; /* key or NULL for list items (index in ix) */
  size_t ix;
  long parent;
} bfs_item;

/* Writes the dotted path of queue item i into buf (for messages). */
static void bfs_path(const bfs_item *q, long i, char *buf, size_t cap) {
  char segs[PTH_SEARCH_DEPTH + 2][64];
  int n = 0;
  for (; i > 0 && n < PTH_SEARCH_DEPTH + 2; i = q[i].parent, n++) {
    const pk_obj *k = q[i].key;
    if (!k) snprintf(segs[n], sizeof segs[n], "%zu", q[i].ix);
    else if (k->kind == PK_STR) snprintf(segs[n], sizeof segs[n], "%.60s", k->u.str.s);
    else if (k->kind == PK_INT) snprintf(segs[n], sizeof segs[n], "%lld", (long long)k->u.i);
    else snprintf(segs[n], sizeof segs[n], "<%s>", pk_kind_name(k->kind));
  }
  size_t l = 0;
  buf[0] = 0;
  if (!n) snprintf(buf, cap, "<top level>");
  while (n-- > 0 && l + 1 < cap) l += (size_t)snprintf(buf + l, cap - l, "%s%s", l ? "." : "", segs[n]);
}

/* Picks the tensor dict automatically and lists it. */
static int auto_select(pth_collect_ctx *cl, const pk_obj *root) {
  bfs_item *q = NULL;
  long nq = 0, capq = 0, head = 0, found = -1, n_found = 0;
  long shown[PTH_MAX_CANDIDATES_SHOWN];
  int rc = -1;
  /* One level at a time, so that the search can stop at the first level with a
   * candidate. */
  for (int depth = 0; depth <= PTH_SEARCH_DEPTH; depth++) {
    if (depth == 0) {
      q = mg_malloc(64 * sizeof *q);
      if (!q) goto oom;
      capq = 64;
      q[nq++] = (bfs_item){root, NULL, 0, -1};
    }
    long level_end = nq;
    for (long i = head; i < level_end; i++) {
      const pk_obj *o = q[i].o;
      if (count_visit(cl)) goto done;
      if (is_tensor_dict(o)) {
        int dup = 0;
        for (long j = 0; j < n_found && j < PTH_MAX_CANDIDATES_SHOWN; j++) dup |= q[shown[j]].o == o;
        if (dup) continue; /* the same dict reached twice (memoised) */
        if (n_found < PTH_MAX_CANDIDATES_SHOWN) shown[n_found] = i;
        if (!n_found) found = i;
        n_found++;
        continue;
      }
      if (o->kind != PK_DICT && o->kind != PK_LIST && o->kind != PK_TUPLE) continue;
      size_t n = o->kind == PK_DICT ? o->u.dict.n : o->u.seq.n;
      for (size_t k = 0; k < n; k++) {
        const pk_obj *c = o->kind == PK_DICT ? o->u.dict.vals[k] : o->u.seq.items[k];
        if (c->kind != PK_DICT && c->kind != PK_LIST && c->kind != PK_TUPLE) continue;
        if (count_visit(cl)) goto done; /* bounds the queue, too */
        if (nq == capq) {
          bfs_item *nqv = mg_realloc(q, (size_t)capq * 2 * sizeof *q);
          if (!nqv) goto oom;
          q = nqv;
          capq *= 2;
        }
        q[nq++] = (bfs_item){c, o->kind == PK_DICT ? o->u.dict.keys[k] : NULL, k, i};
      }
    }
    head = level_end;
    if (n_found || head == nq) break;
  }
  if (n_found == 1) {
    rc = flatten(cl, q[found].o, 0);
  } else if (!n_found) {
    mg_error(cl->d, INVALID, NULL, NULL,
             "no dict of tensors found (the file holds a %s); pass a key to select one", pk_kind_name(root->kind));
  } else {
    char list[1024] = "";
    size_t l = 0;
    for (long j = 0; j < n_found && j < PTH_MAX_CANDIDATES_SHOWN && l + 1 < sizeof list; j++) {
      char p[256];
      bfs_path(q, shown[j], p, sizeof p);
      l += (size_t)snprintf(list + l, sizeof list - l, "%s'%s'", j ? ", " : "", p);
    }
    mg_error(cl->d, USAGE, NULL, NULL, "%ld dicts of tensors could be the weights (%s%s); select one with a key",
             n_found, list, n_found > PTH_MAX_CANDIDATES_SHOWN ? ", ..." : "");
  }
  goto done;
oom:
  mg_error(cl->d, OOM, NULL, NULL, "out of memory");
done:
  mg_free(q);
  return rc;
}

/* Lists the tensors of root (selected by key, or found automatically) into cl->s. */
int pth_collect(pth_collect_ctx *cl, const pk_obj *root, const char *key) {
  int rc;
  if (key && *key) {
    const pk_obj *sel = follow_key(cl, root, key);
    if (!sel) return -1;
    if (sel->kind == PK_TENSOR && path_push(cl, key)) return -1;
    rc = flatten(cl, sel, 0);
    if (!rc && !cl->s->n_tensors) {
      mg_error(cl->d, INVALID, NULL, NULL, "key '%s' selects a %s that holds no tensors", key, pk_kind_name(sel->kind));
      rc = -1;
    }
  } else {
    rc = auto_select(cl, root);
  }
  mg_free(cl->path);
  mg_free(cl->names);
  cl->path = NULL;
  cl->names = NULL;
  return rc;
}
