/* A weights source written as a MindSpore checkpoint: the naming contract applied
 * (rename.h's plan), every tensor streamed in bounded chunks, and a weight map
 * (JSON) of what was done to every tensor and, with a graph, how every graph
 * initializer was bound. `migc weights` and `migc convert` both write through it. */
#ifndef MG_WEIGHTS_EXPORT_H
#define MG_WEIGHTS_EXPORT_H
#include "bind.h"

typedef struct {
  mg_dtype to_float;          /* MG_UNDEFINED keeps each tensor's dtype */
  int crc;                    /* append MindSpore's CRC trailer */
  int force;                  /* replace an existing checkpoint */
  const char *source_label;   /* for the map: the source path as given */
  const char *graph_label;    /* for the map: the graph path, or NULL */
  int quiet_unbound;          /* the caller has warned about unbound initializers */
  double max_output_bytes;    /* checkpoint payload limit; 0: wt_default_output_limit */
  int keep_norm_fp32;         /* with to_float: the tensors of BatchNorm and LayerNorm modules keep
                                 their dtype (MindSpore AMP O2's black list, facts.md section 6) */
} wt_export_opts;

/* The dtype e's tensor is written in under o: o->to_float for a floating tensor,
 * except one of a BatchNorm or LayerNorm module when o->keep_norm_fp32; else its own. */
mg_dtype wt_export_dtype(const wt_export_opts *o, const wt_plan_entry *e);

/* The payload a checkpoint may have when the user set no limit: 64 times the
 * source file's size, at least 256 MiB and at most 64 GiB. A .pth of a few hundred
 * bytes holding a stride-0 view of 2^40 elements stops there, not at the disk's end. */
double wt_default_output_limit(const char *source_path);

typedef struct {
  int written, renamed, dropped;           /* checkpoint tensors */
  int bound, unbound, constants, by_structure; /* graph initializers (with a graph) */
  double bytes;                            /* checkpoint payload */
} wt_export_stats;

/* Writes checkpoint `out` (temporary file, then rename), after checking that its
 * payload stays within o->max_output_bytes and fits the free space of out's
 * filesystem (a LIMIT or IO error otherwise, nothing written); a tensor that is an
 * expanded view (a stride-0 dim of its storage) is a warning naming what it
 * expands to, and, when map_out is not
 * NULL, the weight map there (atomically). m and the bindings b[0..nb) may be NULL
 * and 0; with them, module types come from the graph (wt_graph_types) and each
 * graph initializer bound to no source tensor is a warning naming it. Returns 0;
 * 1 when the source has no tensor to write (nothing is written: MindSpore cannot
 * load an empty checkpoint); -1 with a diagnostic. */
/* path := o serialised with jansson's flags and a newline, by the output rule
 * (core/outfile.h: temporary file, fsync, rename; never over an input, an
 * existing file only with --force). 0, or -1 with a diagnostic (also for o NULL,
 * the mark of a JSON that could not be built). */
struct json_t;
int wt_write_json(const char *path, struct json_t *o, size_t flags, mg_diags *d);

int wt_export_ckpt(const wt_source *s, const wt_rules *rules, const mg_model *m, const wt_binding *b, int nb,
                   const char *out, const char *map_out, const wt_export_opts *o, wt_export_stats *st,
                   mg_diags *d);
#endif
