/* The atomic project writer every target's project uses (codegen/common/writer.c). */
#ifndef MG_CG_WRITER_H
#define MG_CG_WRITER_H
#include "diag.h"
#include <stdio.h>

/* Creates path and its parents; 0, or -1 with errno set. */
int cg_mkdirs(const char *path);
/* Opens dir/name's temporary twin ".NAME.tmp-PID-0" for writing, registered for
 * removal on a signal (tmpfiles.h) after sweeping what a killed run left; tmp (n
 * bytes) receives its path. A caller that gives up on f removes tmp and calls
 * mg_tmp_unregister(tmp). */
FILE *cg_file_open(const char *dir, const char *name, char *tmp, size_t n);
/* Closes f and installs tmp as dir/name by the output rule (core/outfile.h:
 * never over an input or an earlier output of this run, over an existing file
 * only with --force); on any error removes tmp, records an io diagnostic and
 * returns -1. */
int cg_file_commit(mg_diags *d, FILE *f, const char *tmp, const char *dir, const char *name);
/* dir/name := text, atomically. 0, or -1 with a diagnostic. */
int cg_write_text(mg_diags *d, const char *dir, const char *name, const char *text);
/* dir/name := the rest of the open file in (src names it in messages), streamed,
 * atomically; closes in. 0, or -1 with a diagnostic. */
int cg_copy_stream(mg_diags *d, FILE *in, const char *src, const char *dir, const char *name);
/* dir/name := a copy of the file src, atomically. 0, or -1 with a diagnostic. */
int cg_copy_file(mg_diags *d, const char *src, const char *dir, const char *name);
/* Copies every file of src_dir whose name ends in one of suffixes[0..n) into dir
 * (made when missing), each as cg_copy_file does. 0, or -1 with a diagnostic. */
int cg_copy_matching(mg_diags *d, const char *src_dir, const char *dir, const char *const *suffixes, int n);
#endif
