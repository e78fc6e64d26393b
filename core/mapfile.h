/* Input files mapped into memory, and the SIGBUS their truncation gives.
 *
 * migc maps its big inputs (the ONNX model, external data, .pth, .safetensors,
 * .ckpt) rather than reading them. If another process truncates such a file
 * while it is mapped, touching a page past the new end raises SIGBUS, which
 * would kill migc mid-write. Mappings made through mg_map_file are registered;
 * the handler (installed by main) replaces the pages from the faulting one to the
 * end of that mapping with zero pages, marks the file truncated and lets the
 * read go on. Nothing read after that is the file's content, so every output
 * commit refuses (core/outfile.h) and main ends the command with exit 2 and the
 * diagnostic mg_map_check records: a truncated input is the bad input it is,
 * never a crash and never a silent result. A SIGBUS outside every registered
 * mapping keeps its default action. */
#ifndef MG_MAPFILE_H
#define MG_MAPFILE_H
#include "diag.h"
#include <stddef.h>

enum { MG_MAP_SLOTS = 512 }; /* mappings protected at once; more are mapped unprotected */

/* mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0), registered under path (its
 * first 255 bytes) for the SIGBUS handler, and the file noted as an input of
 * this run (mg_out_note_input_fd). MAP_FAILED (errno set) like mmap. */
void *mg_map_file(int fd, size_t len, const char *path);
/* Unregisters and unmaps a mapping of mg_map_file (or any mapping: one not
 * registered is just unmapped). */
void mg_unmap_file(void *addr, size_t len);
/* Reads one byte of every page of p[0, n). A system call given a truncated
 * mapping's pages fails with EFAULT instead of raising SIGBUS: a writer whose
 * write(2) says EFAULT touches its buffer with this, so that the handler sees the
 * truncation and mg_map_check can name it. */
void mg_map_touch(const void *p, size_t n);
/* Installs the SIGBUS handler (SA_SIGINFO, SA_NODEFER). */
void mg_map_install_sigbus(void);
/* How many registered mappings were found truncated so far in this process. */
int mg_map_truncated(void);
/* Whether mg_map_check has recorded the truncation on some diagnostics (main
 * prints it itself otherwise). */
int mg_map_reported(void);
/* 0 if no mapped input was truncated; else -1 with an io error on d naming the
 * first such file (recorded once per d). */
int mg_map_check(mg_diags *d);
#endif
