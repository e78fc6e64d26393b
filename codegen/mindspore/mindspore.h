/* The MindSpore target (issue 12): a network script that loads the checkpoint.
 *
 *   map_lower        every <decompose> of rules/mindspore.xml rewritten (mapping/)
 *   map_node_plan    each node's call with its arguments evaluated
 *   cells            the Cell tree, one leaf per parameterised node, at the path
 *                    its checkpoint tags give (the torch module tree)
 *   write project    OUTDIR/mindspore/net.py (class Net(nn.Cell)) and run.py
 *
 * Precondition: m is a model of its own (mg_model_clone), prepared; the emitter
 * rewrites it. */
#ifndef MG_CG_MINDSPORE_H
#define MG_CG_MINDSPORE_H
#include "mapping.h"

/* How a graph initializer reads its checkpoint parameter. */
typedef enum {
  MS_VIEW_SAME,      /* the parameter as it is */
  MS_VIEW_TRANSPOSE, /* the transpose of the 2-D parameter (torch's layout stays in the checkpoint) */
  MS_VIEW_RESHAPE,   /* the parameter's elements in order, in the initializer's shape */
  MS_VIEW_GATHER,    /* element k of the initializer is the parameter's flat (C order) element index[k] */
  MS_VIEW_RNN_GATES  /* an ONNX LSTM W, R or B: the torch parameter (B: and tag2's) with its gate
                        blocks reordered; only an nn.LSTM, which holds torch's, can take it */
} ms_view_kind;

typedef struct {
  ms_view_kind kind;
  int layer_layout;        /* the checkpoint holds the parameter in its MindSpore layer's layout
                              (a Conv1d weight (out, in, 1, k); the naming contract): a layer
                              takes it as it is, anything else through the view */
  int rank;                /* the parameter's shape in the checkpoint */
  int64_t dims[MG_MAX_RANK];
  const mg_value *index;   /* MS_VIEW_GATHER: an int64 constant of the initializer's shape */
  const char *tag2;        /* MS_VIEW_RNN_GATES of a B: bias_hh's tag (the tag is bias_ih's) */
  int gru;                 /* MS_VIEW_RNN_GATES: a GRU's (not an LSTM's) */
} ms_param_view;

/* The checkpoint tag of graph initializer init: its MindSpore parameter name, or
 * NULL when it is a constant of the export rather than a parameter. *view says how
 * init is made of that parameter (set only when a tag is returned). *why is set
 * (and NULL returned) when the initializer stands for parameters the script cannot
 * hold as they are. */
typedef const char *ms_param_tag_fn(void *ctx, const mg_value *init, ms_param_view *view, const char **why);

/* An integer tensor of the checkpoint (a torch buffer, such as swin's
 * relative_position_index) that net.py holds as a Parameter that does not train
 * even where the graph does not read it (the export folded its use into a
 * constant), so that every checkpoint tensor is a parameter of the net. */
typedef struct {
  const char *tag;
  mg_dtype dtype;
  int rank;
  const int64_t *dims;
} ms_buffer;

typedef struct {
  int n_nodes;        /* statements in construct */
  int n_cells;        /* leaf cells (parameterised layers) */
  int n_params;       /* parameters, each a tag of the checkpoint */
  int n_unsupported;  /* nodes the script cannot compute: each an unsupported diagnostic */
  int n_folded;       /* nodes computed at conversion time (constants only): no statement */
  int n_bn_unfolded;  /* BatchNorms the export had folded into a Conv, made layers again
                         (set by the caller that unfolds them) */
  int n_custom;       /* nodes computed by an ops.Custom CPU kernel (emit_custom.h): each a
                         warning "mindspore: custom-op (cpu kernel): ..." */
  int n_held_buffers; /* buffers held though the graph does not read them */
} ms_report;

/* Writes dir/net.py and dir/run.py for m (dir NULL: writes nothing, a check), holding
 * buffers[0..n_buffers) too where no layer's path holds them. A node with no MindSpore call, or whose
 * arguments or parameters cannot be expressed, is an ops.Custom call to the CPU
 * target's kernel for it when it reads no parameter and the CPU target takes it
 * (dir/custom/, emit_custom.h); otherwise an unsupported diagnostic naming it, and
 * its statement raises NotImplementedError with the same reason, so the script
 * never computes something else in its place. ckpt_float is the dtype
 * of the checkpoint's float parameters (MG_F16 or MG_BF16 from convert --precision;
 * anything else: float32): run.py loads such a checkpoint into the net's float32
 * parameters and runs at AMP O2 by default. Returns 0 when the files
 * were written (check r->n_unsupported), -1 on OOM or I/O failure. */
int emit_mindspore(mg_model *m, const rule_set *rs, ms_param_tag_fn *tag, void *tag_ctx, const ms_buffer *buffers,
                   int n_buffers, const char *dir, mg_dtype ckpt_float, ms_report *r, mg_diags *d);
#endif
