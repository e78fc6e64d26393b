/* BatchNorm unfolded for the MindSpore script (cli/mindspore_unfold.c). */
#ifndef MG_CLI_MINDSPORE_UNFOLD_H
#define MG_CLI_MINDSPORE_UNFOLD_H
#include "bind.h"

/* Rewrites m (the MindSpore target's own copy) so that every Conv whose weight
 * binding is a folded BatchNorm (WT_BN_FOLD_WEIGHT, with its bias WT_BN_FOLD_BIAS)
 * reads the source's torch Conv weight and bias (none when torch's Conv had none)
 * and is followed by a BatchNormalization of the source's gamma, beta, running
 * mean and variance, with the fold's epsilon and torch's default momentum. *out
 * (mg_malloc'd) is b[0..nb) with a binding by name in front for every new
 * initializer; *n_unfolded counts the Convs unfolded. A Conv whose fold cannot be
 * unfolded (a tensor missing or of another dtype) is left as it was. 0, or -1
 * with a diagnostic (out of memory, a source tensor unreadable). */
int ms_unfold_batchnorm(mg_model *m, const wt_source *src, const wt_binding *b, int nb, wt_binding **out,
                        int *n_out, int *n_unfolded, mg_diags *d);
#endif
