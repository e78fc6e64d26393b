/* Temporary files removed on SIGINT, SIGTERM and SIGHUP.
 *
 * Every output is written to a temporary file next to it and renamed into place,
 * so an interrupted run never leaves a half-written file under the final name.
 * The temporaries themselves are registered here while they exist, and the signal
 * handler (installed once by main) unlinks them before the process dies of the
 * signal. A SIGKILL cannot be caught: mg_tmp_sweep removes what such a run left
 * the next time the same output is written. */
#ifndef MG_TMPFILES_H
#define MG_TMPFILES_H

/* Installs the handler for SIGINT, SIGTERM and SIGHUP: it unlinks every registered
 * path, then re-raises the signal with its default action (so the exit status
 * still says which signal ended the run). */
void mg_tmp_install_signal_cleanup(void);
/* Registers `path` (copied) for removal on a signal. Returns 0, or -1 when the
 * table (64 entries) is full or memory is short: the file is then only removed by
 * its owner and by mg_tmp_sweep. */
int mg_tmp_register(const char *path);
/* Forgets `path` (after it was renamed into place or unlinked). */
void mg_tmp_unregister(const char *path);
/* Removes, in the directory of `path`, the temporaries ".NAME.tmp-PID-N" that a
 * process no longer alive left for the same output NAME (a SIGKILL). Returns how
 * many were removed. */
int mg_tmp_sweep(const char *path);
#endif
