/* The one rule every file migc writes follows (issue 16):
 *
 *   - an output is never an input: a file this process has read (registered
 *     with mg_out_note_input*: every mapped or read input file is) is never
 *     replaced, whatever --force says (under mg_out_run; mg_out_scratch is for
 *     folders whose every file is the caller's own);
 *   - an existing file needs --force (the run's policy, mg_out_run);
 *   - two outputs of one run never share a name: a file this run already wrote
 *     is not replaced by another of its outputs (names that collide after
 *     sanitising are a naming bug to fix, never a silent loss);
 *   - it is written to a temporary file ".NAME.tmp-PID-N" beside it (registered
 *     for removal on a signal, core/tmpfiles.h, after sweeping what a killed run
 *     left), made durable, and renamed into place; without --force the last step
 *     is link(), which cannot clobber a file that appeared meanwhile;
 *   - nothing is committed after an input was truncated while mapped
 *     (core/mapfile.h): what was read from it is not the file's content.
 *
 * The policy is process-wide, like the signal registry it builds on: main()
 * starts every command under the strict rule, each command sets its own --force
 * with mg_out_run, and commands that write only into folders they created
 * themselves (conformance's scratch) call mg_out_scratch. A library user that
 * never calls either gets the scratch policy: replace allowed, no run bookkeeping. */
#ifndef MG_OUTFILE_H
#define MG_OUTFILE_H
#include "diag.h"
#include <stdio.h>

/* Starts a run under the rule: existing files are replaced only when force is
 * set, and the record of files this run wrote is cleared. */
void mg_out_run(int force);
/* Scratch policy: replacing is allowed, and so are repeated writes of one name
 * and writes over a file read before (a folder the caller made itself, written
 * and read back test by test: what is in it is the caller's own). */
void mg_out_scratch(void);
/* Whether the current policy lets an existing file be replaced. */
int mg_out_forced(void);

/* Remembers the file open on fd (or named path) as an input of this process, so
 * that no output replaces it. Best effort: the table keeps the last
 * MG_OUT_MAX_INPUTS inputs. */
enum { MG_OUT_MAX_INPUTS = 1024, MG_OUT_MAX_WRITTEN = 4096 };
void mg_out_note_input_fd(int fd);
void mg_out_note_input(const char *path);

/* Whether path may be written now under the rule, replacing an existing file
 * only if both `replace` and the run's policy allow it: 0, or -1 with an io
 * diagnostic on d naming path (an input of this run, not a regular file, written
 * already by this run, or existing without --force). Used to refuse before any
 * work is done. */
int mg_out_check(const char *path, int replace, mg_diags *d);

/* An output being written. */
typedef struct {
  int fd;         /* the temporary file, -1 once closed */
  FILE *f;        /* mg_out_fopen's stream over fd, or NULL */
  int durable;    /* fsync the file and its folder at commit (begin sets it; a
                     generated project, cheap to make again, clears it) */
  char path[4096];
  char tmp[4096 + 64];
} mg_out_file;

/* Checks path (mg_out_check, replace 1), sweeps what killed runs left for it and creates
 * its temporary file (O_EXCL, mode 0666 less the umask). 0, or -1 with a
 * diagnostic (o then holds nothing to abort). */
int mg_out_begin(mg_out_file *o, const char *path, mg_diags *d);
/* mg_out_begin, plus a stdio stream o->f over the temporary file. */
int mg_out_fopen(mg_out_file *o, const char *path, mg_diags *d);
/* Flushes and closes o->f (if any), fsyncs the temporary file (if durable) and
 * installs it under o->path by the rule (mg_out_install: the checks are made
 * again, a file may have appeared meanwhile), then fsyncs the folder (if
 * durable; best effort). 0, or -1 with a
 * diagnostic after removing the temporary file. */
int mg_out_commit(mg_out_file *o, mg_diags *d);
/* Removes the temporary file of an output given up on. */
void mg_out_abort(mg_out_file *o);
/* Installs an already written, synced and closed temporary file tmp as path by
 * the rule (replace as for mg_out_check), for writers with a temporary file of
 * their own (the checkpoint writer, the project writer), which sync the folder
 * themselves if they want to. 0, or -1 with a diagnostic; tmp is then
 * left for the caller to remove. */
int mg_out_install(const char *tmp, const char *path, int replace, mg_diags *d);
#endif
