/* migc: model migration compiler. */
#include "cli.h"
#include "arena.h"
#include "mapfile.h"
#include "outfile.h"
#include "tmpfiles.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"inspect", cmd_inspect, "graph summary: opsets, op histogram, inputs/outputs, params"},
    {"weights", cmd_weights, "torch .pth/.safetensors/ONNX weights to a MindSpore .ckpt with MindSpore names"},
    {"coverage", cmd_coverage, "every op a target cannot take yet, per model and across models (md, json, html)"},
    {"ckpt", cmd_ckpt, "MindSpore checkpoints: dump tensors with checksums, or diff two by tag"},
    {"convert", cmd_convert, "C project for CPUs, MindSpore net.py, checkpoint and coverage report"},
    {"run", cmd_run, "run a model with the reference interpreter on .npy inputs"},
    {"conformance", cmd_conformance, "run ONNX backend test folders; N passed, N failed, N skipped"},
    {"verify", cmd_verify, "parity gate: outputs and gradients against PyTorch, first diverging node, JUnit"},
    {"batch", cmd_batch, "a model zoo: convert, build and verify each model, parallel, resumable, shardable"},
    {"report", cmd_report, "merge batch folders (shards) into one report: json, md, html, JUnit"},
    {"precision", cmd_precision, "what fp16/bf16 costs a model, layer by layer, and the layers a budget keeps fp32"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: migc COMMAND [ARGS]\n"
          "\n"
          "migc migrates PyTorch models (ONNX export + weights) to MindSpore, Ascend and CPU C.\n"
          "\n"
          "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\n"
          "Run 'migc COMMAND --help' for a command's options.\n"
          "Exit status: 0 ok, 1 parity or conformance failure, 2 bad input or usage, 3 internal error.\n");
}

void cli_report(const mg_diags *d) {
  char line[2048];
  for (size_t i = 0; i < d->count; i++) {
    mg_diag_format(&d->items[i], line, sizeof line);
    fprintf(stderr, "%s\n", line);
  }
  /* records lost to memory (or past the cap) are still counted: an error among
   * them is said as one */
  size_t kept = 0;
  for (size_t i = 0; i < d->count; i++) kept += d->items[i].severity == MG_SEV_ERROR;
  if (d->dropped && d->errors > kept)
    fprintf(stderr, "migc: error[out-of-memory]: %zu more diagnostics (%zu errors) could not be kept\n", d->dropped,
            d->errors - kept);
  else if (d->dropped) fprintf(stderr, "(%zu more diagnostics not shown)\n", d->dropped);
}

const char *cli_input_named(const char *out, const char *const *inputs, int n) {
  struct stat o, in;
  if (!out || stat(out, &o)) return NULL;
  for (int i = 0; i < n; i++)
    if (inputs[i] && !stat(inputs[i], &in) && in.st_dev == o.st_dev && in.st_ino == o.st_ino) return inputs[i];
  return NULL;
}

void cli_output_rule(int force, const char *const *inputs, int n) {
  mg_out_run(force);
  for (int i = 0; i < n; i++) mg_out_note_input(inputs[i]);
}

int cli_parse_bytes(const char *s, double *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  double scale = 1;
  if (errno || end == s || !v || *s == '-' || *s == '+') return -1;
  switch (*end) {
  case 'T': scale *= 1024; /* fall through */
  case 'G': scale *= 1024; /* fall through */
  case 'M': scale *= 1024; /* fall through */
  case 'K': scale *= 1024; end++; break;
  default: break;
  }
  if (*end) return -1;
  *out = (double)v * scale;
  return 0;
}

int cli_is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}

int cli_is_file(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISREG(st.st_mode);
}

int cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  return 0;
}

int main(int argc, char **argv) {
  mg_tmp_install_signal_cleanup(); /* an interrupted run leaves no temporary file */
  if (argc < 2) {
    usage(stderr);
    return EXIT_BAD_INPUT;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("migc 0.1.0\n");
    return EXIT_OK;
  }
  mg_map_install_sigbus(); /* an input truncated while mapped is bad input, not a crash */
  mg_out_run(0);           /* the output rule, strict until a command reads its --force */
  /* MIGC_FAULT_AT=N fails the Nth allocation (mg_fault_fail_at; tests/e2e/fault_cli.sh
   * sweeps N): every such failure must end in a diagnostic and exit 2 or 3, or
   * change nothing. N=0 fails none and prints how many allocations the run made. */
  const char *fault = getenv("MIGC_FAULT_AT");
  if (fault) mg_fault_fail_at(atol(fault) > 0 ? atol(fault) : 0, 0);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      int rc = commands[i].run(argc - 1, argv + 1);
      if (fault && atol(fault) <= 0) fprintf(stderr, "migc: allocations: %ld\n", mg_fault_count());
      if (mg_map_truncated()) { /* whatever the command concluded, it read zeros */
        mg_diags d;
        mg_diags_init(&d);
        if (!mg_map_reported() && mg_map_check(&d)) cli_report(&d);
        mg_diags_free(&d);
        rc = EXIT_BAD_INPUT;
      }
      return rc;
    }
  fprintf(stderr, "migc: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return EXIT_BAD_INPUT;
}

void cli_safe_name(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++)
    out[k++] = (*in == '/' || *in == '\\' || *in == ':' || (unsigned char)*in < 32) ? '_' : *in;
  out[k] = 0;
  if (!strcmp(out, ".") || !strcmp(out, "..") || !k) snprintf(out, n, "output");
}

void cli_output_file(const char *const *names, int n, int i, char *out, size_t size) {
  char mine[512], other[512];
  if (i < 0 || i >= n) { /* not one of them: a name no output has */
    snprintf(out, size, "output-%d.npy", i);
    return;
  }
  cli_safe_name(names[i], mine, sizeof mine);
  for (int j = 0; j < i; j++) {
    cli_safe_name(names[j], other, sizeof other);
    if (!strcmp(mine, other)) {
      snprintf(out, size, "%s-%d.npy", mine, i);
      return;
    }
  }
  snprintf(out, size, "%s.npy", mine);
}

int cli_output_files_collide(const char *const *names, int n) {
  char a[512], b[512];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) {
      cli_safe_name(names[i], a, sizeof a);
      cli_safe_name(names[j], b, sizeof b);
      if (!strcmp(a, b)) return 1;
    }
  return 0;
}
