/* The MindSpore target's deployment files: export.py, README.md, the MindSpore
 * Lite and ATC command lines, and the ModelArts package (ms_package.h). They are
 * made from the graph's inputs and outputs only: names, dtypes, shapes. */
#include "ms_package.h"
#include "outfile.h"
#include "text.h"
#include "writer.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  const mg_graph *g;
  const ms_package_opts *o;
  const char *source; /* the model file, for comments */
  int n_symbolic;     /* unknown dims over the graph inputs */
  int lists_ok;       /* every input can be named in converter_lite's and atc's shape lists */
  mg_diags *d;
} pk_ctx;

/* The numpy (and MindSpore, but for bool) name of a dtype the package carries as
 * JSON numbers or booleans; NULL for the others (strings, complex, bfloat16, which
 * numpy lacks). */
static const char *np_name(mg_dtype t) {
  switch (t) {
  case MG_F16: case MG_F32: case MG_F64: case MG_I8: case MG_I16: case MG_I32: case MG_I64:
  case MG_U8: case MG_U16: case MG_U32: case MG_U64: case MG_BOOL:
    return mg_dtype_name(t);
  default: return NULL;
  }
}

/* The JSON Schema type of one element of dtype t (np_name(t) is not NULL). */
static const char *json_leaf(mg_dtype t) {
  return t == MG_BOOL ? "boolean" : mg_dtype_is_int(t) ? "integer" : "number";
}

/* Whether converter_lite's input_shape ("a:[1,3];b:[2]") and atc's --input_shape
 * ("a:1,3;b:2") can name input v: ';' separates the inputs there and a line of the
 * .cfg ends at a newline, and neither format has an escape; a rank that is not
 * known has no list to write. */
static int fits_shape_lists(const mg_value *v) {
  if (v->shape.rank < 0) return 0;
  for (const unsigned char *p = (const unsigned char *)v->name; *p; p++)
    if (*p < 0x20 || *p == 0x7f || *p == ';') return 0;
  return 1;
}

/* One input's shape list entry: "name:[1,3,32,32]" (lite) or "name:1,3,32,32",
 * -1 for a symbolic dim (facts.md 1.5, 1.6). */
static void shape_entry(cg_buf *b, const mg_value *v, int lite) {
  cg_buf_printf(b, "%s:%s", v->name, lite ? "[" : "");
  for (int k = 0; k < v->shape.rank; k++)
    cg_buf_printf(b, "%s%lld", k ? "," : "", (long long)(v->shape.d[k].v >= 0 ? v->shape.d[k].v : -1));
  cg_buf_printf(b, "%s", lite ? "]" : "");
}

/* Every input's entry, ';' between (facts.md 1.5's input_shape, 1.6's --input_shape). */
static void shape_list(cg_buf *b, const mg_graph *g, int lite) {
  for (int i = 0; i < g->n_inputs; i++) {
    if (i) cg_buf_printf(b, ";");
    shape_entry(b, g->inputs[i], lite);
  }
}

/* The symbolic dims, for a comment: "batch (input 'x', axis 0), ..." (printable). */
static void symbolic_text(cg_buf *b, const mg_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    for (int k = 0; k < v->shape.rank; k++) {
      if (v->shape.d[k].v >= 0) continue;
      cg_buf_printf(b, "%s", n++ ? ", " : "");
      cg_buf_printable(b, v->shape.d[k].sym ? v->shape.d[k].sym : "?");
      cg_buf_printf(b, " (input '");
      cg_buf_printable(b, v->name);
      cg_buf_printf(b, "', axis %d)", k);
    }
  }
}

/* A shape for prose: [1, 3, batch, ?] (printable). */
static void shape_text(cg_buf *b, const mg_value *v) {
  if (v->shape.rank < 0) { cg_buf_printf(b, "(rank unknown)"); return; }
  cg_buf_printf(b, "[");
  for (int k = 0; k < v->shape.rank; k++) {
    cg_buf_printf(b, "%s", k ? ", " : "");
    if (v->shape.d[k].v >= 0) cg_buf_printf(b, "%lld", (long long)v->shape.d[k].v);
    else cg_buf_printable(b, v->shape.d[k].sym ? v->shape.d[k].sym : "?");
  }
  cg_buf_printf(b, "]");
}

/* name = [(name, dtype, dims), ...] for Python: dims an int, the symbol's name (a
 * str), or None for an unnamed unknown dim; dims None for an unknown rank. */
static void py_specs(cg_buf *b, const char *var, mg_value *const *vals, int n) {
  cg_buf_printf(b, "# name, dtype, dims: a dim is its size, the name of a symbolic dim, or None\n%s = [\n", var);
  for (int i = 0; i < n; i++) {
    const mg_value *v = vals[i];
    cg_buf_printf(b, "    (");
    cg_buf_py_literal(b, v->name);
    cg_buf_printf(b, ", \"%s\", ", np_name(v->dtype));
    if (v->shape.rank < 0) cg_buf_printf(b, "None");
    else {
      cg_buf_printf(b, "[");
      for (int k = 0; k < v->shape.rank; k++) {
        const mg_dim *dm = &v->shape.d[k];
        cg_buf_printf(b, "%s", k ? ", " : "");
        if (dm->v >= 0) cg_buf_printf(b, "%lld", (long long)dm->v);
        else if (dm->sym) cg_buf_py_literal(b, dm->sym);
        else cg_buf_printf(b, "None");
      }
      cg_buf_printf(b, "]");
    }
    cg_buf_printf(b, "),\n");
  }
  cg_buf_printf(b, "]\n");
}

/* The header every generated Python file shares: a "From:" comment and the
 * imports (the model_service import for the ModelArts service). */
static void py_head(cg_buf *b, const pk_ctx *c, const char *doc, int service) {
  cg_buf_printf(b, "%s# Written by migc from ", doc);
  cg_buf_printable(b, c->source);
  cg_buf_printf(b, "\nimport %sos\nimport sys\n\nimport numpy as np\nimport mindspore\n%s\n"
                   "HERE = os.path.dirname(os.path.abspath(__file__))\nsys.path.insert(0, HERE)\n"
                   "from net import Net, INPUTS  # noqa: E402\n\n",
                service ? "" : "argparse\nimport ",
                service ? "from model_service.model_service import SingleNodeService\n" : "");
  py_specs(b, "INPUT_SPECS", c->g->inputs, c->g->n_inputs);
}

static const char EXPORT_BODY[] =
    "# mindspore's dtype names are numpy's, but for bool (mindspore.bool_)\n"
    "MS_DTYPE = {\"bool\": \"bool_\"}\n"
    "\n"
    "\n"
    "def example_input(dtype, dims, sizes):\n"
    "    \"\"\"An example input for mindspore.export: zeros of the graph's shape or, where a\n"
    "    dim is symbolic and --dim gave it no size, a placeholder Tensor with None there,\n"
    "    so that the dim is exported as dynamic (mindspore.Tensor's notes: 'shape with\n"
    "    None/Symbol entries creates a dynamic-shape placeholder').\"\"\"\n"
    "    shape = [sizes.get(d) if isinstance(d, str) else d for d in dims]\n"
    "    if None in shape:\n"
    "        return mindspore.Tensor(input_data=None, dtype=getattr(mindspore, MS_DTYPE.get(dtype, dtype)),\n"
    "                                shape=tuple(shape))\n"
    "    return mindspore.Tensor(np.zeros(shape, dtype=np.dtype(dtype)))\n"
    "\n"
    "\n"
    "def main():\n"
    "    ap = argparse.ArgumentParser(description=\"Exports net.py with the checkpoint's weights to MINDIR or AIR.\")\n"
    "    ap.add_argument(\"--ckpt\", default=os.path.join(HERE, os.pardir, \"model.ckpt\"))\n"
    "    ap.add_argument(\"--format\", default=\"MINDIR\", choices=[\"MINDIR\", \"AIR\"],\n"
    "                    help=\"MINDIR for converter_lite (convert_lite.sh), AIR for atc (atc.sh)\")\n"
    "    ap.add_argument(\"--output\", default=os.path.join(HERE, \"net\"),\n"
    "                    help=\"the file name; mindspore.export adds .mindir or .air\")\n"
    "    ap.add_argument(\"--dim\", action=\"append\", default=[], metavar=\"NAME=SIZE\",\n"
    "                    help=\"a size for a symbolic dim (without it the dim is exported as dynamic)\")\n"
    "    a = ap.parse_args()\n"
    "    symbols = sorted({d for _, _, dims in INPUT_SPECS for d in dims or [] if isinstance(d, str)})\n"
    "    sizes = {}\n"
    "    for kv in a.dim:\n"
    "        name, _, size = kv.rpartition(\"=\")\n"
    "        if name not in symbols or not size.isdigit() or int(size) < 1:\n"
    "            sys.exit(\"export.py: --dim %r: want NAME=SIZE, NAME one of the symbolic dims %r, SIZE >= 1\"\n"
    "                     % (kv, symbols))\n"
    "        sizes[name] = int(size)\n"
    "    unranked = [n for n, _, dims in INPUT_SPECS if dims is None]\n"
    "    if unranked:\n"
    "        sys.exit(\"export.py: the inputs %r have no known rank: convert again with --input-shape\" % unranked)\n"
    "    if [n for n, _, _ in INPUT_SPECS] != list(INPUTS):\n"
    "        sys.exit(\"export.py: net.py's inputs %r are not %r: write both with one migc convert\"\n"
    "                 % (list(INPUTS), [n for n, _, _ in INPUT_SPECS]))\n"
    "    net = Net()\n"
    "    if CHECKPOINT:\n"
    "        params = mindspore.load_checkpoint(a.ckpt)\n"
    "        # names exactly; strict_load=False only casts a 16-bit checkpoint (load_param_into_net notes)\n"
    "        names = set(net.parameters_dict())\n"
    "        not_loaded, unused = sorted(names - set(params)), sorted(set(params) - names)\n"
    "        if not not_loaded and not unused:\n"
    "            not_loaded, unused = mindspore.load_param_into_net(net, params, strict_load=STRICT_DTYPE)\n"
    "        if not_loaded or unused:\n"
    "            sys.exit(\"export.py: parameters not in the checkpoint: %s; checkpoint tensors unused: %s\"\n"
    "                     % (not_loaded, unused))\n"
    "    net.set_train(False)\n"
    "    inputs = [example_input(dtype, dims, sizes) for _, dtype, dims in INPUT_SPECS]\n"
    "    print(\"export.py: %s to %s\" % (a.format, a.output), file=sys.stderr)\n"
    "    # every argument of mindspore.export(net, *inputs, file_name, file_format, **kwargs):\n"
    "    # file_name and file_format are required and keyword-only\n"
    "    mindspore.export(net, *inputs, file_name=a.output, file_format=a.format)\n"
    "\n"
    "\n"
    "if __name__ == \"__main__\":\n"
    "    main()\n";

static const char SERVICE_BODY[] =
    "\n"
    "\n"
    "class BadRequest(ValueError):\n"
    "    \"\"\"A request that does not match the model's inputs: an HTTP 400 answer.\n"
    "\n"
    "    ModelArts does not document how a SingleNodeService sets the status of an\n"
    "    answer (facts.md 1.3 names only the methods). This service's one convention:\n"
    "    every request error is raised as BadRequest, a ValueError with status_code 400\n"
    "    whose message names the input, the expected shape and dtype, and what was\n"
    "    sent. migc's tests answer it as a 400 (docs/mindspore.md).\"\"\"\n"
    "    status_code = 400\n"
    "\n"
    "\n"
    "def dims_text(dims):\n"
    "    if dims is None:\n"
    "        return \"any shape\"\n"
    "    return \"[%s]\" % \", \".join(\"?\" if d is None else str(d) for d in dims)\n"
    "\n"
    "\n"
    "def sent_text(arr):\n"
    "    kind = arr.dtype.kind\n"
    "    name = arr.dtype.name if kind in \"fiub\" else {\"U\": \"string\", \"S\": \"bytes\"}.get(kind, \"mixed values\")\n"
    "    return \"shape %s and dtype %s\" % (dims_text(list(arr.shape)), name)\n"
    "\n"
    "\n"
    "def dtype_accepts(dtype, arr):\n"
    "    \"\"\"Whether the JSON values in arr are values of dtype: any number for a float\n"
    "    input, integers in its range for an integer input, true/false for a bool one.\"\"\"\n"
    "    want, kind = np.dtype(dtype), arr.dtype.kind\n"
    "    if arr.size == 0:\n"
    "        return kind in \"fiub\"\n"
    "    if want.kind == \"f\":\n"
    "        return kind in \"fiu\"\n"
    "    if want.kind in \"iu\":\n"
    "        return kind in \"iu\" and np.iinfo(want).min <= int(arr.min()) and int(arr.max()) <= np.iinfo(want).max\n"
    "    return kind == \"b\"\n"
    "\n"
    "\n"
    "def check_input(name, dtype, dims, value, sizes):\n"
    "    \"\"\"The request's value of one input as an array of its dtype. BadRequest when its\n"
    "    shape or dtype differs; a symbolic dim takes its size from the first input that\n"
    "    has it (sizes), and later inputs must agree.\"\"\"\n"
    "    want = \"shape %s and dtype %s\" % (dims_text(dims), dtype)\n"
    "    try:\n"
    "        arr = np.asarray(value)\n"
    "    except ValueError:  # numpy refuses nested lists of unequal lengths\n"
    "        raise BadRequest(\"input %r: expected %s, got nested lists of unequal lengths\" % (name, want)) from None\n"
    "    why = None\n"
    "    if dims is not None and arr.ndim != len(dims):\n"
    "        why = \"\"\n"
    "    for d, n in zip(dims or [], arr.shape if why is None else []):\n"
    "        if isinstance(d, int) and d != n:\n"
    "            why = \"\"\n"
    "        elif isinstance(d, str) and sizes.setdefault(d, n) != n:\n"
    "            why = \" (%s is %d in an earlier input)\" % (d, sizes[d])\n"
    "    if why is None and not dtype_accepts(dtype, arr):\n"
    "        why = \"\"\n"
    "    if why is not None:\n"
    "        raise BadRequest(\"input %r: expected %s, got %s%s\" % (name, want, sent_text(arr), why))\n"
    "    return arr.astype(dtype)\n"
    "\n"
    "\n"
    "class MigcService(SingleNodeService):\n"
    "    def __init__(self, model_name, model_path):\n"
    "        # set here, as ModelArts' own examples do: the base class's __init__ is not\n"
    "        # documented beyond these two attributes\n"
    "        self.model_name = model_name\n"
    "        self.model_path = model_path\n"
    "        # self.model_path is the model's local path (facts.md 1.3): its folder, or a file in it\n"
    "        root = model_path if os.path.isdir(model_path) else os.path.dirname(model_path)\n"
    "        if [n for n, _, _ in INPUT_SPECS] != list(INPUTS):\n"
    "            raise RuntimeError(\"customize_service.py: net.py's inputs %r are not %r: write both with one \"\n"
    "                               \"migc convert\" % (list(INPUTS), [n for n, _, _ in INPUT_SPECS]))\n"
    "        self.net = Net()\n"
    "        if CHECKPOINT:\n"
    "            params = mindspore.load_checkpoint(os.path.join(root, CHECKPOINT))\n"
    "            # names exactly; strict_load=False only casts a 16-bit checkpoint (load_param_into_net notes)\n"
    "            names = set(self.net.parameters_dict())\n"
    "            not_loaded, unused = sorted(names - set(params)), sorted(set(params) - names)\n"
    "            if not not_loaded and not unused:\n"
    "                not_loaded, unused = mindspore.load_param_into_net(self.net, params, strict_load=STRICT_DTYPE)\n"
    "            if not_loaded or unused:\n"
    "                raise RuntimeError(\"customize_service.py: parameters not in the checkpoint: %s; checkpoint \"\n"
    "                                   \"tensors unused: %s\" % (not_loaded, unused))\n"
    "        self.net.set_train(False)\n"
    "\n"
    "    def _preprocess(self, data):\n"
    "        names = [n for n, _, _ in INPUT_SPECS]\n"
    "        if not isinstance(data, dict):\n"
    "            raise BadRequest(\"the request must be a JSON object with the inputs %r, got %s\"\n"
    "                             % (names, type(data).__name__))\n"
    "        missing = [n for n in names if n not in data]\n"
    "        unknown = [k for k in data if k not in names]\n"
    "        if missing or unknown:\n"
    "            raise BadRequest(\"the inputs are %r: missing %r, unknown %r\" % (names, missing, unknown))\n"
    "        sizes = {}\n"
    "        return [check_input(n, dtype, dims, data[n], sizes) for n, dtype, dims in INPUT_SPECS]\n"
    "\n"
    "    def _inference(self, data):\n"
    "        # replaces the built-in inference (facts.md 1.3): the net, in eval mode, on the checked inputs\n"
    "        outs = self.net(*[mindspore.Tensor(x) for x in data])\n"
    "        return outs if isinstance(outs, tuple) else (outs,)\n"
    "\n"
    "    def _postprocess(self, data):\n"
    "        return {name: y.asnumpy().tolist() for name, y in zip(OUTPUT_NAMES, data)}\n";

static const char EXPORT_DOC[] =
    "\"\"\"Exports the network for deployment: MINDIR for MindSpore Lite's converter_lite\n"
    "(convert_lite.sh), AIR for ATC (atc.sh).\n\n"
    "    python export.py [--ckpt ../model.ckpt] [--format MINDIR|AIR] [--output FILE] [--dim NAME=SIZE ...]\n\n"
    "A symbolic dim is exported as dynamic unless --dim gives it a size.\"\"\"\n";

static const char SERVICE_DOC[] =
    "\"\"\"ModelArts inference code (a SingleNodeService, facts.md 1.3) for the network of\n"
    "net.py with the weights of model.ckpt.\n\n"
    "A request (Content-type application/json) is a JSON object with one member per\n"
    "graph input, nested lists of its shape (config.json describes them); the answer\n"
    "has one member per graph output. A request that does not match the inputs'\n"
    "names, shapes and dtypes raises BadRequest: HTTP 400.\"\"\"\n";

/* The STRICT_DTYPE line: False when the checkpoint's float parameters are 16-bit
 * (convert --precision), which load into the net's float32 parameters only with
 * strict_load=False ('casts precision'). */
static void strict_dtype(cg_buf *b, const pk_ctx *c) {
  cg_buf_printf(b, "# False: the checkpoint holds 16-bit float parameters (migc convert --precision %s)\n"
                   "STRICT_DTYPE = %s\n", c->o->precision ? c->o->precision : "fp32",
                c->o->precision && strcmp(c->o->precision, "fp32") ? "False" : "True");
}

/* OUTDIR/mindspore/export.py. */
static void export_py(cg_buf *b, const pk_ctx *c) {
  py_head(b, c, EXPORT_DOC, 0);
  cg_buf_printf(b, "# whether the model has parameters, in ../model.ckpt\nCHECKPOINT = %s\n", c->o->checkpoint ? "True" : "False");
  strict_dtype(b, c);
  cg_buf_printf(b, "\n");
  cg_buf_printf(b, "%s", EXPORT_BODY);
}

/* OUTDIR/modelarts/model/customize_service.py. */
static void service_py(cg_buf *b, const pk_ctx *c) {
  py_head(b, c, SERVICE_DOC, 1);
  cg_buf_printf(b, "OUTPUT_NAMES = [");
  for (int i = 0; i < c->g->n_outputs; i++) {
    cg_buf_printf(b, "%s", i ? ", " : "");
    cg_buf_py_literal(b, c->g->outputs[i]->name);
  }
  cg_buf_printf(b, "]\n# the checkpoint beside this file; None: the model has no parameters\nCHECKPOINT = %s\n",
                c->o->checkpoint ? "\"model.ckpt\"" : "None");
  strict_dtype(b, c);
  cg_buf_printf(b, "%s", SERVICE_BODY);
}

/* A Markdown table cell: printable, its '|' escaped. */
static void md_cell(cg_buf *b, const char *s) {
  cg_buf x = {0};
  cg_buf_printable(&x, s);
  for (const char *p = x.s ? x.s : ""; *p; p++)
    if (*p == '|') cg_buf_printf(b, "\\|");
    else cg_buf_printf(b, "%c", *p);
  b->failed |= x.failed;
  cg_buf_free(&x);
}

/* A Markdown table of values: name, dtype, shape. */
static void md_values(cg_buf *b, const char *what, mg_value *const *vals, int n) {
  cg_buf_printf(b, "| %s | dtype | shape |\n|---|---|---|\n", what);
  for (int i = 0; i < n; i++) {
    cg_buf_printf(b, "| ");
    md_cell(b, vals[i]->name);
    cg_buf_printf(b, " | %s | ", mg_dtype_name(vals[i]->dtype));
    cg_buf x = {0};
    shape_text(&x, vals[i]);
    md_cell(b, x.s ? x.s : "");
    b->failed |= x.failed;
    cg_buf_free(&x);
    cg_buf_printf(b, " |\n");
  }
}

/* OUTDIR/mindspore/README.md: how to run, train, export and deploy. */
static void readme(cg_buf *b, const pk_ctx *c) {
  const mg_graph *g = c->g;
  cg_buf_printf(b, "# The MindSpore network of ");
  cg_buf_printable(b, c->source);
  cg_buf_printf(b, "\n\nWritten by migc. `net.py` defines `class Net(nn.Cell)`; its parameters are the tags of\n"
                   "`../model.ckpt`, one to one.\n\n");
  md_values(b, "input", g->inputs, g->n_inputs);
  cg_buf_printf(b, "\n");
  md_values(b, "output", g->outputs, g->n_outputs);
  cg_buf_printf(b, "\n## Run\n\nOne `.npy` per input; `run.py` writes one `.npy` per output into the folder:\n\n"
                   "```sh\npython run.py --ckpt ../model.ckpt");
  for (int i = 0; i < g->n_inputs; i++) {
    cg_buf x = {0};
    cg_buf_printf(&x, "%s=input%d.npy", g->inputs[i]->name, i);
    cg_buf_printf(b, " --input ");
    cg_buf_sh_literal(b, x.s ? x.s : "");
    b->failed |= x.failed;
    cg_buf_free(&x);
  }
  cg_buf_printf(b, " --output-dir out \\\n    [--device CPU|GPU|Ascend] [--mode graph|pynative]\n```\n\n"
                   "It loads the checkpoint with `load_checkpoint` + `load_param_into_net(strict_load=True)` and\n"
                   "stops, naming them, if a parameter is not loaded or a checkpoint tensor is unused.\n\n"
                   "## Train\n\n`Net()` is a trainable cell (BatchNorm and Dropout are layers, not constants). "
                   "One step of\nplain SGD on a squared error, with `mindspore.value_and_grad` for the parameters' "
                   "gradients\n(an optimizer such as `nn.Momentum` is the usual choice; migc's API table does not "
                   "list one):\n\n```python\nimport mindspore\nfrom mindspore import ops\nfrom net import Net\n\n"
                   "net = Net()\nnot_loaded, unused = mindspore.load_param_into_net(\n"
                   "    net, mindspore.load_checkpoint(\"../model.ckpt\"), strict_load=True)\n"
                   "assert not not_loaded and not unused\nnet.set_train(True)\nweights = net.trainable_params()\n\n\n"
                   "def loss_fn(target, *inputs):\n    err = ops.sub(net(*inputs)%s, target)\n"
                   "    return ops.mean(ops.mul(err, err), axis=None, keep_dims=False)\n\n\n"
                   "# grad_position=None with weights: the gradients of the parameters, not of the inputs\n"
                   "grad_fn = mindspore.value_and_grad(loss_fn, grad_position=None, weights=weights, has_aux=False,\n"
                   "                                   return_ids=False)\n\n\n"
                   "def train_step(target, *inputs, lr=0.01):\n    loss, grads = grad_fn(target, *inputs)\n"
                   "    for w, grad in zip(weights, grads):\n"
                   "        w.set_data(ops.sub(w, ops.mul(grad, lr)), slice_shape=False)\n    return loss\n```\n\n",
                g->n_outputs > 1 ? "[0]" : "");
  cg_buf_printf(b, "## Export\n\n```sh\npython export.py --format MINDIR   # net.mindir, for converter_lite\n"
                   "python export.py --format AIR      # net.air, for atc\n```\n\n"
                   "`mindspore.export` traces the net on example inputs of the graph's shapes and dtypes.%s\n\n",
                c->n_symbolic ? " A symbolic\ndim is exported as a dynamic one (a placeholder `Tensor` with `None` "
                                "there) unless `--dim NAME=SIZE`\nfixes it." : "");
  if (c->n_symbolic) {
    cg_buf_printf(b, "Symbolic dims: ");
    symbolic_text(b, g);
    cg_buf_printf(b, ".\n\n");
  }
  cg_buf_printf(b, "## Deploy\n\n**MindSpore Lite** (`converter_lite`, cloud-side, Ascend): `bash convert_lite.sh` runs\n"
                   "`converter_lite --fmk=MINDIR --modelFile=net.mindir --outputFile=net_lite "
                   "--configFile=converter_lite.cfg\n--optimize=ascend_oriented`; `converter_lite.cfg` is "
                   "`[ascend_context]` with the graph's `input_format` and\n`input_shape`.%s\n\n"
                   "**ATC** (Ascend 310 and others): `bash atc.sh` runs `atc --model=net.air --framework=1 "
                   "--output=net\n--input_format=NCHW --input_shape=... --soc_version=$SOC_VERSION` (default "
                   "Ascend310; ATC takes a\nMindSpore model only as AIR, and then only NCHW).%s\n\n"
                   "Further arguments to either script go to the tool. Neither tool was run by migc: the\n"
                   "command lines follow the tools' documentation.\n\n",
                c->n_symbolic ? " Symbolic dims are `-1` there, and the script asks for `DYNAMIC_DIMS`, the sizes\n"
                                "they take (`[ascend_context] dynamic_dims`)." : "",
                c->n_symbolic ? " With symbolic dims it asks for `DYNAMIC_DIMS` (ATC's `--dynamic_dims`) or an\n"
                                "`INPUT_SHAPE` with every dim fixed." : "");
  cg_buf_printf(b, "## ModelArts\n\n`../modelarts/model/` is a ModelArts model package: `config.json` (model_type MindSpore,\n"
                   "runtime `");
  cg_buf_printable(b, c->o->runtime);
  cg_buf_printf(b, "`, one API: POST `/`, application/json), `customize_service.py`\n"
                   "(a `SingleNodeService`), `net.py`, `model.ckpt` and the empty `tmp.om` the package "
                   "specification\nasks for. Upload the folder `modelarts` to OBS and import it as a model. A "
                   "request is a JSON\nobject with one member per input, nested lists of its shape; the answer has "
                   "one member per\noutput. A request whose names, shapes or dtypes differ is refused with a message "
                   "that names\nthe input, the expected shape and dtype, and what was sent (`BadRequest`, "
                   "status 400).\n");
}

/* OUTDIR/mindspore/converter_lite.cfg (facts.md 1.5, r2.0+ [ascend_context]):
 * input_format NCHW when every input has rank 4, else ND. A key=value file: no
 * comments, whose syntax the documentation does not give. */
static void lite_cfg(cg_buf *b, const pk_ctx *c) {
  int nchw = c->g->n_inputs > 0;
  for (int i = 0; i < c->g->n_inputs; i++) nchw &= c->g->inputs[i]->shape.rank == 4;
  cg_buf_printf(b, "[ascend_context]\ninput_format=%s\n", nchw ? "NCHW" : "ND");
  if (c->lists_ok && c->g->n_inputs) {
    cg_buf_printf(b, "input_shape=");
    shape_list(b, c->g, 1);
    cg_buf_printf(b, "\n");
  }
  if (c->o->quant_method && c->g->n_inputs == 1) {
    /* --precision int8: MindSpore Lite's post-training full quantisation, keys as
     * facts.md's "Post-training quantisation config" gives them (lines 346-356):
     * [common_quant_param] quant_type and bit_num (8 for full quantisation);
     * [data_preprocess_param] calibrate_path=in1:/dir1, calibrate_size, input_type
     * BIN, all three mandatory; [full_quant_param] activation_quant_method, and
     * target_device ASCEND, the device [ascend_context] and convert_lite.sh's
     * --optimize=ascend_oriented are for. */
    cg_buf_printf(b, "[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n[data_preprocess_param]\ncalibrate_path=");
    cg_buf_printable(b, c->g->inputs[0]->name);
    cg_buf_printf(b, ":%s\ncalibrate_size=%d\ninput_type=BIN\n[full_quant_param]\nactivation_quant_method=%s\n"
                     "target_device=ASCEND\n", c->o->calib_dir, c->o->calib_size, c->o->quant_method);
  }
}

/* echo 'script: why' >&2; exit 2 -- the message as one single-quoted word. */
static void sh_refuse(cg_buf *b, const char *indent, const char *script, const char *why) {
  cg_buf x = {0};
  cg_buf_printf(&x, "%s: %s", script, why);
  cg_buf_printf(b, "%secho ", indent);
  cg_buf_sh_literal(b, x.s ? x.s : "");
  cg_buf_printf(b, " >&2\n%sexit 2\n", indent);
  b->failed |= x.failed;
  cg_buf_free(&x);
}

/* The shell script's head: what it runs, from which model, the symbolic dims. */
static void sh_head(cg_buf *b, const pk_ctx *c, const char *what) {
  cg_buf_printf(b, "#!/bin/bash\n%s# Written by migc from ", what);
  cg_buf_printable(b, c->source);
  cg_buf_printf(b, ".\n");
  if (c->n_symbolic) {
    cg_buf_printf(b, "# Symbolic dims (-1 in the shapes below): ");
    symbolic_text(b, c->g);
    cg_buf_printf(b, ".\n");
  }
  cg_buf_printf(b, "set -eu\ncd \"$(dirname \"$0\")\"\n");
}

/* Why an input cannot be named in the shape lists, for the scripts' refusals. */
static const char *lists_why(void) {
  return "an input's name holds a newline, a control character or ';', or its rank is unknown, so the "
         "graph's shapes cannot be written into the tool's shape list; give INPUT_SHAPE";
}

/* OUTDIR/mindspore/convert_lite.sh: converter_lite on net.mindir (facts.md 1.5,
 * cloud-side converter_tool.md). Symbolic dims need [ascend_context] dynamic_dims,
 * sizes only the user knows: the script asks for them. */
static void lite_sh(cg_buf *b, const pk_ctx *c) {
  sh_head(b, c, "# MindSpore Lite for Ascend: converter_lite turns net.mindir (python export.py --format MINDIR)\n"
                "# into an offline model, with converter_lite.cfg ([ascend_context]) as its --configFile.\n"
                "# usage: bash convert_lite.sh [converter_lite options]; MODEL_FILE and OUTPUT_FILE override the "
                "names.\n# Newer converter_lite docs keep [ascend_context] input_shape for dynamic batch and take "
                "static shapes\n# as --inputShape=NAME:DIMS: add it to the arguments where converter_lite asks.\n");
  cg_buf_printf(b, "MODEL_FILE=${MODEL_FILE:-net.mindir}\nOUTPUT_FILE=${OUTPUT_FILE:-net_lite}\n"
                   "CONFIG_FILE=converter_lite.cfg\n");
  if (c->n_symbolic) {
    cg_buf_printf(b, "# [ascend_context] dynamic_dims: the sizes the symbolic dims take, e.g. DYNAMIC_DIMS='[1],[2],[4]'\n"
                     "# (at most 100 profiles, each value in [1, 2048]; facts.md 1.5)\n"
                     "if [ -z \"${DYNAMIC_DIMS:-}\" ]; then\n");
    sh_refuse(b, "  ", "convert_lite.sh",
              "the graph has symbolic dims (-1 in converter_lite.cfg): set DYNAMIC_DIMS to the sizes they take, "
              "e.g. DYNAMIC_DIMS='[1],[2],[4]'");
    cg_buf_printf(b, "fi\nCONFIG_FILE=$(mktemp \"${TMPDIR:-/tmp}/converter_lite.cfg.XXXXXX\")\n"
                     "trap 'rm -f \"$CONFIG_FILE\"' EXIT\ncat converter_lite.cfg > \"$CONFIG_FILE\"\n"
                     "printf 'dynamic_dims=%%s\\n' \"$DYNAMIC_DIMS\" >> \"$CONFIG_FILE\"\n");
  }
  if (!c->lists_ok)
    cg_buf_printf(b, "# converter_lite.cfg has no input_shape: an input's name cannot be written there\n");
  cg_buf_printf(b, "converter_lite --fmk=MINDIR --modelFile=\"$MODEL_FILE\" --outputFile=\"$OUTPUT_FILE\" "
                   "--configFile=\"$CONFIG_FILE\" \\\n  --optimize=ascend_oriented \"$@\"\n");
}

/* OUTDIR/mindspore/atc.sh: atc on net.air (facts.md 1.6: --framework=1 takes only
 * .air, and then only --input_format=NCHW). */
static void atc_sh(cg_buf *b, const pk_ctx *c) {
  sh_head(b, c, "# ATC: net.air (python export.py --format AIR) to an offline model net.om for Ascend.\n"
                "# usage: [SOC_VERSION=Ascend310] [INPUT_SHAPE='name:1,3,224,224;...'] bash atc.sh [atc options]\n");
  cg_buf_printf(b, "SOC_VERSION=${SOC_VERSION:-Ascend310}\nMODEL=${MODEL:-net.air}\nOUTPUT=${OUTPUT:-net}\n"
                   "if [ -z \"${INPUT_SHAPE:-}\" ]; then\n");
  if (!c->lists_ok) sh_refuse(b, "  ", "atc.sh", lists_why());
  else {
    cg_buf x = {0};
    shape_list(&x, c->g, 0);
    cg_buf_printf(b, "  INPUT_SHAPE=");
    cg_buf_sh_literal(b, x.s ? x.s : "");
    cg_buf_printf(b, "  # the graph's\n");
    b->failed |= x.failed;
    cg_buf_free(&x);
    if (c->n_symbolic) {
      cg_buf_printf(b, "  # -1 with --dynamic_dims=\"1;2;...\" (facts.md 1.6). ATC documents --dynamic_dims for ND\n"
                       "  # inputs and --framework=1 with NCHW only: where it refuses, fix the dims with INPUT_SHAPE\n"
                       "  # (and python export.py --dim NAME=SIZE for the same sizes)\n"
                       "  if [ -z \"${DYNAMIC_DIMS:-}\" ]; then\n");
      sh_refuse(b, "    ", "atc.sh",
                "the graph has symbolic dims (-1 in --input_shape): set DYNAMIC_DIMS to the sizes they take "
                "(atc --dynamic_dims, e.g. DYNAMIC_DIMS='1;2;4'), or INPUT_SHAPE with every dim fixed");
      cg_buf_printf(b, "  fi\n  set -- --dynamic_dims=\"$DYNAMIC_DIMS\" \"$@\"\n");
    }
  }
  cg_buf_printf(b, "fi\natc --model=\"$MODEL\" --framework=1 --output=\"$OUTPUT\" --input_format=NCHW "
                   "--input_shape=\"$INPUT_SHAPE\" \\\n  --soc_version=\"$SOC_VERSION\" \"$@\"\n");
}

/* The JSON Schema of one tensor as nested arrays: minItems = maxItems = a static
 * dim, no bound for a symbolic one; elements number, integer or boolean. */
static json_t *tensor_schema(const mg_value *v) {
  json_t *s = json_pack("{s:s}", "type", json_leaf(v->dtype));
  for (int k = v->shape.rank - 1; k >= 0 && s; k--) {
    json_t *a = json_pack("{s:s}", "type", "array");
    if (a && v->shape.d[k].v >= 0) {
      json_object_set_new(a, "minItems", json_integer(v->shape.d[k].v));
      json_object_set_new(a, "maxItems", json_integer(v->shape.d[k].v));
    }
    if (a) json_object_set_new(a, "items", s);
    else json_decref(s);
    s = a;
  }
  if (v->shape.rank < 0 && s) { /* any rank: an array of any depth or a number */
    json_decref(s);
    s = json_object();
  }
  return s;
}

/* {"type": "object", "required": [names], "properties": {name: schema}}; NULL on OOM. */
static json_t *values_schema(mg_value *const *vals, int n) {
  json_t *req = json_array(), *props = json_object();
  for (int i = 0; i < n; i++) {
    cg_buf x = {0};
    cg_buf_printf(&x, "%s ", mg_dtype_name(vals[i]->dtype));
    shape_text(&x, vals[i]);
    if (x.failed) { /* out of memory: no schema, never one without its description */
      cg_buf_free(&x);
      json_decref(req);
      json_decref(props);
      return NULL;
    }
    json_t *s = tensor_schema(vals[i]);
    if (s && x.s) json_object_set_new(s, "description", json_string(x.s));
    json_array_append_new(req, json_string(vals[i]->name));
    json_object_set_new(props, vals[i]->name, s);
    cg_buf_free(&x);
  }
  return json_pack("{s:s,s:o,s:o}", "type", "object", "required", req, "properties", props);
}

/* config.json, as facts.md 1.2's tables give it: the mandatory model_algorithm and
 * model_type, the runtime, one API (url "/", the only one a non-Image model may
 * have) whose request and response are the graph's inputs and outputs, and numpy
 * as the one pip dependency (MindSpore is the runtime's). NULL on OOM. */
static char *config_json(const pk_ctx *c) {
  json_t *j = json_pack("{s:s,s:s,s:s,s:[{s:s,s:s,s:{s:s,s:o},s:{s:s,s:o}}],s:[{s:s,s:[{s:s,s:s,s:s}]}]}",
                        "model_algorithm", c->o->model_algorithm, "model_type", "MindSpore", "runtime",
                        c->o->runtime, "apis", "url", "/", "method", "post", "request", "Content-type",
                        "application/json", "data", values_schema(c->g->inputs, c->g->n_inputs), "response",
                        "Content-type", "application/json", "data",
                        values_schema(c->g->outputs, c->g->n_outputs), "dependencies", "installer", "pip",
                        "packages", "package_name", "numpy", "package_version", "", "restraint", "");
  char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
  json_decref(j);
  return s;
}

/* out := a/b; -1 (with a diagnostic) when it does not fit in n bytes. */
static int join(mg_diags *d, char *out, size_t n, const char *a, const char *b) {
  int k = snprintf(out, n, "%s/%s", a, b);
  if (k < 0 || (size_t)k >= n) {
    mg_error(d, LIMIT, a, NULL, "path too long: %s/%s", a, b);
    return -1;
  }
  return 0;
}

/* dir/name := the file src, atomically and by the output rule: a hard link where
 * the file system allows one (a checkpoint is large and never changes once
 * written; migc rewrites it by rename, so the link keeps this conversion's),
 * else a streamed copy. */
static int link_or_copy(mg_diags *d, const char *src, const char *dir, const char *name, int try_link) {
  char tmp[4096], final[4096];
  if (join(d, final, sizeof final, dir, name)) return -1;
  int k = snprintf(tmp, sizeof tmp, "%s/.%s.tmp%ld", dir, name, (long)getpid());
  if (try_link && k > 0 && (size_t)k < sizeof tmp) {
    unlink(tmp);
    if (!link(src, tmp)) {
      /* installed by the output rule (core/outfile.h), as every other file is */
      int rc = mg_out_install(tmp, final, 1, d);
      if (rc) unlink(tmp);
      return rc;
    }
  }
  FILE *in = fopen(src, "rb");
  if (!in) {
    mg_error(d, IO, src, NULL, "cannot read %s: %s", src, strerror(errno));
    return -1;
  }
  return cg_copy_stream(d, in, src, dir, name);
}

const char *ms_package_algorithm_check(const char *name) {
  if (!((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z'))) return "it must start with a letter";
  if (strlen(name) > 36) return "it must be at most 36 characters long";
  if (strpbrk(name, "&!'\"<>=")) return "it must not contain any of & ! ' \" < > =";
  return NULL;
}

const char *ms_package_runtime_check(const char *s) {
  size_t n = strlen(s);
  if (!n || n > 128) return "it must be 1 to 128 characters long";
  if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
    return "it may hold only letters, digits, '.', '_' and '-'";
  return NULL;
}

/* What the package cannot carry, each an error on d: a name that is not UTF-8
 * (JSON and Python need text), a dtype with no JSON and numpy form. Also counts
 * the symbolic dims and checks the shape lists. 0, or -1 when the graph cannot be
 * packaged. */
static int check_graph(pk_ctx *c) {
  int bad = 0;
  c->lists_ok = 1;
  for (int io = 0; io < 2; io++) {
    mg_value *const *vals = io ? c->g->outputs : c->g->inputs;
    int n = io ? c->g->n_outputs : c->g->n_inputs;
    for (int i = 0; i < n; i++) {
      const mg_value *v = vals[i];
      const char *what = io ? "output" : "input";
      int utf8 = cg_utf8_valid(v->name);
      for (int k = 0; k < v->shape.rank; k++) {
        utf8 &= !v->shape.d[k].sym || cg_utf8_valid(v->shape.d[k].sym);
        c->n_symbolic += !io && v->shape.d[k].v < 0;
      }
      if (!utf8) mg_error(c->d, INVALID, NULL, NULL, "mindspore: a graph %s's name, or one of its dims' names, is "
                                                      "not UTF-8: config.json and the Python files cannot hold it", what);
      if (!np_name(v->dtype))
        mg_error(c->d, UNSUPPORTED_DTYPE, utf8 ? v->name : NULL, NULL, "mindspore: graph %s of dtype %s: the "
                 "ModelArts service and export.py carry tensors as JSON numbers and numpy arrays, which have no %s",
                 what, mg_dtype_name(v->dtype), mg_dtype_name(v->dtype));
      bad |= !utf8 || !np_name(v->dtype);
      if (!io && !fits_shape_lists(v)) c->lists_ok = 0;
    }
  }
  if (!bad && !c->lists_ok)
    mg_warn(c->d, UNSUPPORTED, NULL, NULL, "mindspore: %s: converter_lite.cfg has no input_shape, and atc.sh "
            "asks for INPUT_SHAPE", lists_why());
  return bad ? -1 : 0;
}

/* Writes text as dir/name, executable when exec (the scripts). */
static int put(mg_diags *d, const char *dir, const char *name, const cg_buf *b, int exec) {
  if (cg_write_text(d, dir, name, b->s ? b->s : "")) return -1;
  char path[4096];
  if (!exec) return 0;
  if (join(d, path, sizeof path, dir, name)) return -1;
  if (chmod(path, 0755)) {
    mg_error(d, IO, path, NULL, "cannot make %s executable: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int ms_write_package(const mg_model *m, const char *outdir, const ms_package_opts *o, mg_diags *d) {
  pk_ctx c = {.g = m->graph, .o = o, .source = m->path ? m->path : "the model", .d = d};
  if (check_graph(&c)) return 1;
  enum { EXPORT, README, CFG, LITE, ATC, SERVICE, N_TEXT };
  cg_buf t[N_TEXT] = {{0}};
  export_py(&t[EXPORT], &c);
  readme(&t[README], &c);
  lite_cfg(&t[CFG], &c);
  lite_sh(&t[LITE], &c);
  atc_sh(&t[ATC], &c);
  service_py(&t[SERVICE], &c);
  char *config = config_json(&c);
  int oom = !config;
  for (int i = 0; i < N_TEXT; i++) oom |= t[i].failed;
  char ms_dir[4096], pkg[4096], net[4096], stale[4096];
  int rc = -1;
  if (join(d, ms_dir, sizeof ms_dir, outdir, "mindspore") || join(d, pkg, sizeof pkg, outdir, "modelarts/model") ||
      join(d, net, sizeof net, ms_dir, "net.py") || join(d, stale, sizeof stale, pkg, "model.ckpt"))
    ;
  else if (oom) mg_error(d, OOM, NULL, NULL, "out of memory writing the MindSpore package");
  else if (cg_mkdirs(ms_dir) || cg_mkdirs(pkg)) mg_error(d, IO, outdir, NULL, "cannot create %s: %s", pkg, strerror(errno));
  else if (!put(d, ms_dir, "export.py", &t[EXPORT], 0) && !put(d, ms_dir, "README.md", &t[README], 0) &&
           !put(d, ms_dir, "converter_lite.cfg", &t[CFG], 0) && !put(d, ms_dir, "convert_lite.sh", &t[LITE], 1) &&
           !put(d, ms_dir, "atc.sh", &t[ATC], 1) && !cg_write_text(d, pkg, "config.json", config) &&
           !put(d, pkg, "customize_service.py", &t[SERVICE], 0) && !link_or_copy(d, net, pkg, "net.py", 0) &&
           !cg_write_text(d, pkg, "tmp.om", "") &&
           (!o->checkpoint || !link_or_copy(d, o->checkpoint, pkg, "model.ckpt", 1)))
    rc = 0;
  if (!rc && !o->checkpoint) {
    unlink(stale); /* an earlier conversion's would not match this net */
    mg_warn(d, UNSUPPORTED, NULL, NULL, "mindspore: the model has no parameters, so the ModelArts package has no "
            ".ckpt, which the package specification calls mandatory: ModelArts may refuse to import it");
  }
  for (int i = 0; i < N_TEXT; i++) cg_buf_free(&t[i]);
  free(config);
  return rc;
}
