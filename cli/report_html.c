/* report.md and report.html from report.json (report_data.c): a model x target
 * matrix of converted rates and parity verdicts, the ops that block the most models
 * per target with the models they block, time and size per model, and (HTML) a
 * plot of the converted rate per target. The page is self-contained: inline CSS,
 * inline SVG, a few lines of script to sort the tables; nothing is fetched. */
#include "batch.h"
#include "cli.h"
#include "text.h"
#include <stdlib.h>
#include <string.h>

/* Text for HTML element content and attribute values. */
static void esc_html(cg_buf *b, const char *s) {
  for (; s && *s; s++) {
    if (*s == '<') cg_buf_printf(b, "&lt;");
    else if (*s == '>') cg_buf_printf(b, "&gt;");
    else if (*s == '&') cg_buf_printf(b, "&amp;");
    else if (*s == '"') cg_buf_printf(b, "&quot;");
    else cg_buf_printf(b, "%c", *s);
  }
}

/* Text for a markdown table cell: no '|' or newline can break the row. */
static void esc_md(cg_buf *b, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|') cg_buf_printf(b, "\\|");
    else if (*s == '\n' || *s == '\r') cg_buf_printf(b, " ");
    else cg_buf_printf(b, "%c", *s);
  }
}

/* One matrix cell's text: "100.0% parity pass", "66.7% not converted", "100.0% build
 * failed", "convert failed" (no rate), or "failed" (a worker that did not finish). */
static void cell_text(json_t *r, char *out, size_t n) {
  json_t *rate = json_object_get(r, "converted_rate");
  const char *par = batch_str(r, "parity", "none"), *st = batch_str(r, "status", "fail");
  const char *verdict = !strcmp(par, "pass") ? "parity pass" : !strcmp(par, "fail") ? "parity FAIL"
                      : !strcmp(par, "error") ? "verify error" : !strcmp(batch_str(r, "build", ""), "failed") ? "build failed"
                      : json_array_size(json_object_get(r, "blocking_ops")) ? "not converted"
                      : !strcmp(st, "pass") ? "converted" : "failed";
  if (rate) snprintf(out, n, "%.1f%% %s", 100 * json_number_value(rate), verdict);
  else snprintf(out, n, "%s", !strncmp(batch_str(r, "reason", ""), "convert:", 8) ? "convert failed" : verdict);
}

/* A model's measurement `key`; 0 when it has none (a model that never ran). */
static double meas(json_t *m, const char *key) {
  return json_number_value(json_object_get(json_object_get(m, "measurements"), key));
}

char *report_markdown(json_t *rep) {
  cg_buf b = {0};
  json_t *sum = json_object_get(rep, "summary"), *targets = json_object_get(rep, "targets"), *m, *t;
  size_t i, k;
  cg_buf_printf(&b, "# migc batch report\n\n%lld models: %lld passed, %lld failed.\n\n",
                json_integer_value(json_object_get(sum, "models")), json_integer_value(json_object_get(sum, "passed")),
                json_integer_value(json_object_get(sum, "failed")));
  cg_buf_printf(&b, "| target | models | converted | node rate (mean) | parity pass | parity fail | no reference |\n"
                    "|---|---|---|---|---|---|---|\n");
  json_array_foreach(targets, i, t) {
    json_t *s = json_object_get(json_object_get(sum, "by_target"), json_string_value(t));
    cg_buf_printf(&b, "| %s | %lld | %lld (%.1f%%) | %.1f%% | %lld | %lld | %lld |\n", json_string_value(t),
                  json_integer_value(json_object_get(s, "models")), json_integer_value(json_object_get(s, "converted")),
                  100 * json_number_value(json_object_get(s, "converted_rate")),
                  100 * json_number_value(json_object_get(s, "mean_node_rate")),
                  json_integer_value(json_object_get(s, "parity_pass")),
                  json_integer_value(json_object_get(s, "parity_fail")),
                  json_integer_value(json_object_get(s, "no_reference")));
  }
  cg_buf_printf(&b, "\n## Models\n\n| model | status |");
  json_array_foreach(targets, i, t) cg_buf_printf(&b, " %s |", json_string_value(t));
  cg_buf_printf(&b, " time (s) | reason |\n|---|---|");
  json_array_foreach(targets, i, t) cg_buf_printf(&b, "---|");
  cg_buf_printf(&b, "---|---|\n");
  json_array_foreach(json_object_get(rep, "models"), i, m) {
    cg_buf_printf(&b, "| ");
    esc_md(&b, batch_str(m, "name", "?"));
    cg_buf_printf(&b, " | %s |", !strcmp(batch_str(m, "status", ""), "pass") ? "pass" : "**FAIL**");
    json_array_foreach(targets, k, t) {
      json_t *r = json_object_get(json_object_get(m, "targets"), json_string_value(t));
      char c[96] = "-";
      if (r) cell_text(r, c, sizeof c);
      cg_buf_printf(&b, " %s |", c);
    }
    cg_buf_printf(&b, " %.1f | ", meas(m, "total_s"));
    esc_md(&b, batch_str(m, "reason", ""));
    cg_buf_printf(&b, " |\n");
  }
  cg_buf_printf(&b, "\n## Ops that block the most models\n\n");
  int any = 0;
  json_array_foreach(targets, i, t) {
    json_t *bl = json_object_get(json_object_get(rep, "blocking_ops"), json_string_value(t)), *o, *n;
    size_t j;
    json_array_foreach(bl, k, o) {
      if (!any++) cg_buf_printf(&b, "| target | op | models blocked | models |\n|---|---|---|---|\n");
      cg_buf_printf(&b, "| %s | ", json_string_value(t));
      esc_md(&b, batch_str(o, "op", "?"));
      cg_buf_printf(&b, " | %lld | ", json_integer_value(json_object_get(o, "models_blocked")));
      json_array_foreach(json_object_get(o, "models"), j, n) {
        cg_buf_printf(&b, "%s", j ? ", " : "");
        esc_md(&b, json_string_value(n));
      }
      cg_buf_printf(&b, " |\n");
    }
  }
  if (!any) cg_buf_printf(&b, "None: every model converts on every target it names.\n");
  if (b.failed) {
    cg_buf_free(&b);
    return NULL;
  }
  return b.s;
}

/* The plot: per target, a bar of the share of models fully converted and one of the
 * mean share of nodes converted, as inline SVG. */
static void plot(cg_buf *b, json_t *rep) {
  json_t *targets = json_object_get(rep, "targets"), *t;
  size_t i, n = json_array_size(targets);
  int h = 40 + 50 * (int)n;
  cg_buf_printf(b, "<svg id=\"rate-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"%d\" "
                   "role=\"img\" aria-label=\"converted rate per target\">\n", h);
  cg_buf_printf(b, "<text x=\"110\" y=\"16\" font-size=\"12\">models converted (dark), nodes converted (light)</text>\n");
  json_array_foreach(targets, i, t) {
    json_t *s = json_object_get(json_object_get(json_object_get(rep, "summary"), "by_target"), json_string_value(t));
    double mr = json_number_value(json_object_get(s, "converted_rate"));
    double nr = json_number_value(json_object_get(s, "mean_node_rate"));
    int y = 30 + 50 * (int)i;
    cg_buf_printf(b, "<text x=\"0\" y=\"%d\" font-size=\"13\">%s</text>\n", y + 18, json_string_value(t));
    cg_buf_printf(b, "<rect x=\"110\" y=\"%d\" width=\"400\" height=\"36\" fill=\"#eee\"/>\n", y);
    cg_buf_printf(b, "<rect class=\"bar-models\" data-target=\"%s\" x=\"110\" y=\"%d\" width=\"%.1f\" height=\"18\" "
                     "fill=\"#2a7\"/>\n", json_string_value(t), y, 400 * mr);
    cg_buf_printf(b, "<rect class=\"bar-nodes\" x=\"110\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"#9d9\"/>\n",
                  y + 18, 400 * nr);
    cg_buf_printf(b, "<text x=\"520\" y=\"%d\" font-size=\"12\">%.1f%% / %.1f%%</text>\n", y + 22, 100 * mr, 100 * nr);
  }
  cg_buf_printf(b, "</svg>\n");
}

/* The model x target table (table#matrix), one row per model with data-model set. */
static void matrix(cg_buf *b, json_t *rep) {
  json_t *targets = json_object_get(rep, "targets"), *m, *t;
  size_t i, k;
  cg_buf_printf(b, "<h2>Models &times; targets</h2>\n<table id=\"matrix\" class=\"sortable\"><thead><tr><th>model</th>"
                   "<th>status</th>");
  json_array_foreach(targets, i, t) cg_buf_printf(b, "<th>%s</th>", json_string_value(t));
  cg_buf_printf(b, "<th>reason</th></tr></thead><tbody>\n");
  json_array_foreach(json_object_get(rep, "models"), i, m) {
    int pass = !strcmp(batch_str(m, "status", ""), "pass");
    cg_buf_printf(b, "<tr data-model=\"");
    esc_html(b, batch_str(m, "name", "?"));
    cg_buf_printf(b, "\"><td>");
    esc_html(b, batch_str(m, "name", "?"));
    cg_buf_printf(b, "</td><td class=\"%s\">%s</td>", pass ? "pass" : "fail", pass ? "pass" : "FAIL");
    json_array_foreach(targets, k, t) {
      json_t *r = json_object_get(json_object_get(m, "targets"), json_string_value(t));
      char c[96] = "-";
      if (r) cell_text(r, c, sizeof c);
      cg_buf_printf(b, "<td class=\"%s\">%s</td>", !r ? "" : !strcmp(batch_str(r, "status", ""), "pass") ? "pass" : "fail", c);
    }
    cg_buf_printf(b, "<td>");
    esc_html(b, batch_str(m, "reason", ""));
    cg_buf_printf(b, "</td></tr>\n");
  }
  cg_buf_printf(b, "</tbody></table>\n");
}

/* Per target, the blocking ops with the models each blocks. */
static void blockers(cg_buf *b, json_t *rep) {
  json_t *targets = json_object_get(rep, "targets"), *t, *o, *n;
  size_t i, k, j;
  cg_buf_printf(b, "<h2>Ops that block the most models</h2>\n");
  json_array_foreach(targets, i, t) {
    json_t *bl = json_object_get(json_object_get(rep, "blocking_ops"), json_string_value(t));
    cg_buf_printf(b, "<h3>%s</h3>\n", json_string_value(t));
    if (!json_array_size(bl)) {
      cg_buf_printf(b, "<p>None.</p>\n");
      continue;
    }
    cg_buf_printf(b, "<table class=\"sortable blocking\" data-target=\"%s\"><thead><tr><th>op</th><th>models blocked</th>"
                     "<th>models</th></tr></thead><tbody>\n", json_string_value(t));
    json_array_foreach(bl, k, o) {
      cg_buf_printf(b, "<tr><td>");
      esc_html(b, batch_str(o, "op", "?"));
      cg_buf_printf(b, "</td><td>%lld</td><td>", json_integer_value(json_object_get(o, "models_blocked")));
      json_array_foreach(json_object_get(o, "models"), j, n) {
        cg_buf_printf(b, "%s", j ? ", " : "");
        esc_html(b, json_string_value(n));
      }
      cg_buf_printf(b, "</td></tr>\n");
    }
    cg_buf_printf(b, "</tbody></table>\n");
  }
}

/* Time, peak memory and sizes per model. */
static void times(cg_buf *b, json_t *rep) {
  json_t *m;
  size_t i;
  cg_buf_printf(b, "<h2>Time and size per model</h2>\n<table id=\"times\" class=\"sortable\"><thead><tr><th>model</th>"
                   "<th>total (s)</th><th>convert (s)</th><th>peak RSS (MB)</th><th>ONNX (MB)</th>"
                   "<th>weights (MB)</th><th>checkpoint (MB)</th><th>runner (KB)</th></tr></thead><tbody>\n");
  json_array_foreach(json_object_get(rep, "models"), i, m) {
    json_t *in = json_object_get(m, "inputs");
    cg_buf_printf(b, "<tr><td>");
    esc_html(b, batch_str(m, "name", "?"));
    cg_buf_printf(b, "</td><td>%.2f</td><td>%.2f</td><td>%.1f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.0f</td></tr>\n",
                  meas(m, "total_s"), meas(m, "convert_s"), meas(m, "peak_rss_kb") / 1024,
                  json_number_value(json_object_get(json_object_get(in, "onnx"), "bytes")) / 1e6,
                  json_number_value(json_object_get(json_object_get(in, "weights"), "bytes")) / 1e6,
                  meas(m, "ckpt_bytes") / 1e6, meas(m, "runner_bytes") / 1024);
  }
  cg_buf_printf(b, "</tbody></table>\n");
}

char *report_html(json_t *rep) {
  cg_buf b = {0};
  json_t *sum = json_object_get(rep, "summary");
  cg_buf_printf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>migc batch report</title>\n"
                    "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
                    "margin:8px 0 24px}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
                    "th{background:#f3f3f3;cursor:pointer}td.pass{color:#176}td.fail{color:#b22;font-weight:600}"
                    "</style></head><body>\n<h1>migc batch report</h1>\n");
  cg_buf_printf(&b, "<p id=\"summary\">%lld models: %lld passed, %lld failed.</p>\n",
                json_integer_value(json_object_get(sum, "models")), json_integer_value(json_object_get(sum, "passed")),
                json_integer_value(json_object_get(sum, "failed")));
  cg_buf_printf(&b, "<h2>Converted rate per target</h2>\n");
  plot(&b, rep);
  matrix(&b, rep);
  blockers(&b, rep);
  times(&b, rep);
  cg_buf_printf(&b, "%s</body></html>\n", CLI_SORTABLE_JS);
  if (b.failed) {
    cg_buf_free(&b);
    return NULL;
  }
  return b.s;
}
