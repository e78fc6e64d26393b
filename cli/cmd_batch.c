/* migc batch MANIFEST|DIR -o OUTDIR [-j N] [--shard I/N] [--resume] [--targets LIST]
 *            [--timeout S] [--junit F]
 * migc batch --check MANIFEST
 *
 * Converts and checks every model of a manifest, each in a worker process of its
 * own (batch_model.c), N at once; a worker that crashes or outlives --timeout is
 * killed with its whole process group and the model marked failed. The batch
 * schedules nothing beyond this machine: --shard takes a stable subset, so that a
 * Slurm array, a Kubernetes Indexed Job or a CI matrix can run the shards, and
 * `migc report` merges their folders (docs/batch.md). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "batch.h"
#include "cli.h"
#include "writer.h"
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include "outfile.h"
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc batch MANIFEST|DIR -o OUTDIR [-j N] [--shard I/N] [--resume] [--targets LIST]\n"
          "                  [--timeout S] [--junit F]\n"
          "       migc batch --check MANIFEST\n"
          "\n"
          "Converts every model of MANIFEST (JSON; docs/batch.md, docs/batch-manifest.schema.json)\n"
          "for its targets, builds the CPU C (and the Ascend program under the aclnn emulator),\n"
          "and verifies each against its reference when one is given. DIR instead of a manifest:\n"
          "every *.onnx under DIR, with the .pth or .safetensors of the same stem beside it.\n"
          "Each model runs in its own process: a crash, a hang, a bad file or a failed compile\n"
          "fails that model, with the reason, and the batch goes on. Writes\n"
          "OUTDIR/<name>/result.json per model (atomically, with the hashes of its inputs),\n"
          "then OUTDIR/report.{json,md,html} and OUTDIR/junit.xml, as `migc report OUTDIR` does.\n"
          "\n"
          "  -o OUTDIR       where the results go (required)\n"
          "  -j N            models at once (default 1); each compile gets -j cores/N\n"
          "  --shard I/N     only the models whose name hashes to I modulo N (SHA-256 of the\n"
          "                  name, first 8 bytes big-endian): shards 0..N-1 cover the manifest once\n"
          "  --resume        skip models whose result.json exists with the same input hashes\n"
          "  --targets LIST  targets of the models that name none, over the manifest's defaults\n"
          "                  (default: those, else cpu): cpu, ascend, mindspore\n"
          "  --timeout S     seconds a model may take (default 3600; a manifest entry's own\n"
          "                  \"timeout\" wins)\n"
          "  --junit F       the JUnit report also to F\n"
          "  --check         validate MANIFEST (and that its files exist), run nothing\n"
          "\n"
          "Progress: a live line on a terminal, plain log lines otherwise (stderr).\n"
          "Exit status: 0 every model converted and passed its checks, 1 some failed,\n"
          "2 bad manifest or usage.\n");
}

/* Monotonic seconds, for timeouts, the ETA and the log lines. */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct {
  const char *manifest, *outdir, *targets, *junit;
  int jobs, shard_i, shard_n, resume, check;
  double timeout;
} batch_opts;

/* A running worker. */
typedef struct {
  pid_t pid;
  int model;
  double start, deadline;
  int timed_out;
} slot;

/* The batch's state while it runs. */
typedef struct {
  batch_opts o;
  batch_env env;
  batch_manifest man;
  int *todo, n_todo, next; /* models to run, by index */
  int total, done, failed, skipped;
  slot *slots;
  int n_running;
  int tty;
  double t0, last_draw;
} batch_run;

/* "I/N" with 0 <= I < N <= 100000 into *i, *n; 0, or -1. */
static int parse_shard(const char *s, int *i, int *n) {
  char *end;
  long a = strtol(s, &end, 10);
  if (end == s || *end != '/') return -1;
  const char *p = end + 1;
  long b = strtol(p, &end, 10);
  if (end == p || *end || b < 1 || b > 100000 || a < 0 || a >= b) return -1;
  *i = (int)a, *n = (int)b;
  return 0;
}

/* Reads argv into o. EXIT_OK, or the exit code after a message on stderr. */
static int parse_args(int argc, char **argv, batch_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    char *end;
    if (!strcmp(a, "-o") && more) o->outdir = argv[++i];
    else if (!strcmp(a, "-j") && more) {
      long v = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 1 || v > 256) {
        fprintf(stderr, "migc batch: -j wants a number from 1 to 256, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      o->jobs = (int)v;
    } else if (!strcmp(a, "--shard") && more) {
      if (parse_shard(argv[++i], &o->shard_i, &o->shard_n)) {
        fprintf(stderr, "migc batch: --shard wants I/N with 0 <= I < N, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
    } else if (!strcmp(a, "--resume")) o->resume = 1;
    else if (!strcmp(a, "--check")) o->check = 1;
    else if (!strcmp(a, "--targets") && more) {
      o->targets = argv[++i];
      if (!batch_parse_targets(o->targets)) {
        fprintf(stderr, "migc batch: --targets wants a list of cpu, ascend, mindspore, got '%s'\n", o->targets);
        return EXIT_BAD_INPUT;
      }
    } else if (!strcmp(a, "--timeout") && more) {
      o->timeout = strtod(argv[++i], &end);
      if (*end || end == argv[i] || !(o->timeout > 0)) {
        fprintf(stderr, "migc batch: --timeout wants seconds > 0, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
    } else if (!strcmp(a, "--junit") && more) o->junit = argv[++i];
    else if (a[0] == '-') {
      fprintf(stderr, "migc batch: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!o->manifest) o->manifest = a;
    else {
      fprintf(stderr, "migc batch: one manifest at a time (merge results with `migc report`)\n");
      return EXIT_BAD_INPUT;
    }
  }
  if (!o->manifest || (!o->outdir && !o->check)) {
    fprintf(stderr, "migc batch: %s\n", o->manifest ? "-o OUTDIR is required" : "no manifest or folder given");
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  return EXIT_OK;
}

/* The live line (a terminal) or nothing (plain lines are printed as models end). */
static void draw(batch_run *b, int force) {
  double t = now();
  if (!b->tty || (!force && t - b->last_draw < 0.5)) return;
  b->last_draw = t;
  int ran = b->done - b->skipped;
  double el = t - b->t0;
  char eta[32] = "?";
  if (ran > 0) {
    double left = el / ran * (b->total - b->done);
    snprintf(eta, sizeof eta, "%dm%02ds", (int)left / 60, (int)left % 60);
  }
  char cur[160] = "";
  size_t k = 0;
  for (int i = 0; i < b->o.jobs && k < sizeof cur; i++)
    if (b->slots[i].pid > 0) {
      int w = snprintf(cur + k, sizeof cur - k, "%s%s", k ? ", " : "", b->man.models[b->slots[i].model].name);
      k = w < 0 ? sizeof cur : k + (size_t)w; /* past the end: the line is full */
    }
  fprintf(stderr, "\r\033[K[%d/%d] %d failed | %s | ETA %s", b->done, b->total, b->failed, cur[0] ? cur : "-", eta);
  fflush(stderr);
}

/* A model ended (or was skipped): the counts, and a log line. */
static void finished(batch_run *b, int model, const char *what, double secs) {
  b->done++;
  int passed = batch_result_passed(&b->env, &b->man.models[model]);
  b->failed += passed != 1;
  if (b->tty) fprintf(stderr, "\r\033[K");
  fprintf(stderr, "batch: [%d/%d] %s: %s%s (%.1f s)\n", b->done, b->total, b->man.models[model].name,
          passed == 1 ? "pass" : "FAIL", what, secs);
  draw(b, 1);
}

/* Starts the next model in slot s: the worker is a fork of this process, in a process
 * group of its own (so that a timeout kills its steps too), dying with the batch. */
static int launch(batch_run *b, slot *s) {
  int mi = b->todo[b->next++];
  fflush(stdout), fflush(stderr);
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1); /* the batch died before the line above */
    signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
    _exit(batch_model_run(&b->env, &b->man.models[mi]));
  }
  setpgid(pid, pid); /* both sides: whichever runs first */
  const batch_model *m = &b->man.models[mi];
  s->pid = pid;
  s->model = mi;
  s->start = now();
  s->deadline = s->start + (m->timeout > 0 ? m->timeout : b->o.timeout);
  s->timed_out = 0;
  b->n_running++;
  if (!b->tty) fprintf(stderr, "batch: start %s\n", m->name);
  return 0;
}

/* A worker ended with wait status st: a worker that did not write result.json
 * (killed, crashed) gets one written here. */
static void reap(batch_run *b, slot *s, int st) {
  const batch_model *m = &b->man.models[s->model];
  double secs = now() - s->start;
  char why[256] = "";
  if (s->timed_out) snprintf(why, sizeof why, "timeout: still running after %g s (killed)", s->deadline - s->start);
  else if (WIFSIGNALED(st))
    snprintf(why, sizeof why, "worker crashed (signal %d, %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (!WIFEXITED(st) || WEXITSTATUS(st)) snprintf(why, sizeof why, "worker failed (exit %d)", WEXITSTATUS(st));
  if (why[0] && batch_write_failed(&b->env, m, why, secs))
    fprintf(stderr, "migc batch: cannot write %s/%s/result.json\n", b->o.outdir, m->name);
  s->pid = 0;
  b->n_running--;
  finished(b, s->model, s->timed_out ? " (timeout)" : "", secs);
}

/* Runs every model of b->todo, o.jobs at once. */
static void run_all(batch_run *b) {
  while (b->next < b->n_todo || b->n_running) {
    for (int i = 0; i < b->o.jobs && b->next < b->n_todo; i++)
      if (!b->slots[i].pid && launch(b, &b->slots[i])) {
        fprintf(stderr, "migc batch: cannot start a worker: %s\n", strerror(errno));
        batch_write_failed(&b->env, &b->man.models[b->todo[b->next - 1]], "worker could not be started", 0);
      }
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int i = 0; i < b->o.jobs; i++)
        if (b->slots[i].pid == pid) reap(b, &b->slots[i], st);
      continue;
    }
    double t = now();
    for (int i = 0; i < b->o.jobs; i++)
      if (b->slots[i].pid > 0 && !b->slots[i].timed_out && t > b->slots[i].deadline) {
        b->slots[i].timed_out = 1;
        kill(-b->slots[i].pid, SIGKILL);
      }
    draw(b, 0);
    nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
  }
}

/* OUTDIR/batch.json: what this run was asked to do, so that `migc report` can tell a
 * model that never finished from one that was never asked for. */
static int write_batch_json(batch_run *b, mg_diags *d) {
  json_t *sel = json_array();
  for (int i = 0; i < b->man.n; i++)
    if (b->o.shard_n <= 1 || batch_shard_of(b->man.models[i].name, b->o.shard_n) == b->o.shard_i)
      json_array_append_new(sel, json_string(b->man.models[i].name));
  json_t *j = json_pack("{s:s,s:s,s:{s:i,s:i},s:o}", "migc", BATCH_VERSION, "manifest", b->man.path, "shard", "index",
                        b->o.shard_i, "count", b->o.shard_n, "models", sel);
  int rc = batch_write_json(b->o.outdir, "batch.json", j, d);
  json_decref(j);
  return rc;
}

/* The cores this process may use: its affinity mask, which is what a Slurm task or
 * a container's cpuset leaves it, else the online CPUs. */
static int cores(void) {
  cpu_set_t set;
  if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The batch once the options are read: the manifest, --check, the selection, the
 * workers, the report. The exit status. */
static int batch_main(batch_run *b) {
  mg_diags d;
  mg_diags_init(&d);
  int defaults = b->o.targets ? batch_parse_targets(b->o.targets) : 0;
  if (batch_manifest_load(b->o.manifest, defaults, b->o.check, &b->man, &d)) {
    cli_report(&d);
    mg_diags_free(&d);
    return EXIT_BAD_INPUT;
  }
  if (b->o.check) {
    printf("%s: %d models, valid\n", b->o.manifest, b->man.n);
    mg_diags_free(&d);
    return EXIT_OK;
  }
  static char self[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  self[k > 0 ? k : 0] = 0;
  b->env = (batch_env){self, b->o.outdir, cores() / b->o.jobs > 1 ? cores() / b->o.jobs : 1};
  if (cg_mkdirs(b->o.outdir) || write_batch_json(b, &d)) {
    if (!d.count) mg_error(&d, IO, b->o.outdir, NULL, "cannot create the folder: %s", strerror(errno));
    cli_report(&d);
    mg_diags_free(&d);
    return EXIT_BAD_INPUT;
  }
  b->todo = calloc((size_t)b->man.n + 1, sizeof *b->todo);
  b->slots = calloc((size_t)b->o.jobs, sizeof *b->slots);
  if (!b->todo || !b->slots) return EXIT_INTERNAL;
  b->t0 = now();
  b->tty = isatty(2);
  for (int i = 0; i < b->man.n; i++) {
    if (b->o.shard_n > 1 && batch_shard_of(b->man.models[i].name, b->o.shard_n) != b->o.shard_i) continue;
    b->total++;
    if (b->o.resume && batch_result_current(&b->env, &b->man.models[i])) {
      b->skipped++;
      finished(b, i, " (resumed: result.json is current)", 0);
    } else b->todo[b->n_todo++] = i;
  }
  fprintf(stderr, "batch: %d models%s, %d to run, -j %d (compiles -j %d)\n", b->total,
          b->o.shard_n > 1 ? " in this shard" : "", b->n_todo, b->o.jobs, b->env.make_jobs);
  if (!b->total) { /* a shard the manifest gives no model: nothing to report */
    mg_diags_free(&d);
    return EXIT_OK;
  }
  run_all(b);
  if (b->tty) fprintf(stderr, "\r\033[K");
  const char *dirs[] = {b->o.outdir};
  json_t *rep = report_build(dirs, 1, &d);
  int rc = rep && !report_write_all(rep, b->o.outdir, b->o.junit, &d) ? report_exit_status(rep) : EXIT_INTERNAL;
  fprintf(stderr, "batch: %d models, %d passed, %d failed (%d resumed) in %.1f s; report %s/report.html\n", b->total,
          b->total - b->failed, b->failed, b->skipped, now() - b->t0, b->o.outdir);
  cli_report(&d);
  json_decref(rep);
  mg_diags_free(&d);
  return rc;
}

int cmd_batch(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  batch_run b = {.o = {.jobs = 1, .timeout = 3600, .shard_n = 1}};
  int rc = parse_args(argc, argv, &b.o);
  /* OUTDIR is the batch's own: its result.json files, batch.json and report are
   * rewritten by --resume and by a later run (each model's folder is emptied
   * before the model runs); the convert and verify children keep the strict rule. */
  mg_out_scratch();
  if (rc == EXIT_OK) rc = batch_main(&b);
  batch_manifest_free(&b.man);
  free(b.todo);
  free(b.slots);
  return rc;
}
