#!/usr/bin/python3
"""Run a PyTorch model and dump what `migc verify` compares against.

    /usr/bin/python3 tools/torch_reference.py PKG.MODULE:FACTORY|MODEL.pt \
        --input-shape 2x9x16 [--input-shape ...] \
        [--input-dtype float32|int64|int32 ...] [--input-high N ...] \
        [--seed S] [--perturb] [--bn-stats data|random] \
        [--grad-dtype float32|float64] -o DIR

PKG.MODULE is imported with the current directory first on sys.path and
FACTORY is called with no arguments; a path ending in .pt is a TorchScript
file loaded with torch.jit.load.  --input-shape/--input-dtype/--input-high
repeat, one per model input in order (a single --input-dtype or
--input-high applies to every input).  Float inputs are standard normal;
integer inputs are uniform in [0, high).

DIR receives (see docs/parity.md, "Reference folder"):
    model.onnx           torch.onnx.export defaults (eval, constant folding)
    model_preserve.onnx  training=TrainingMode.PRESERVE,
                         do_constant_folding=False, model in eval()
    model.pth            the state_dict (after --perturb)
    ref.npz              inputs/, outputs/, modules/, cotangents/,
                         grads/inputs/, grads/params/
    ref.json             what was run: factory, seed, versions, inputs,
                         outputs, params, grad_dtype, ...
Both exports are opset 17 with static shapes; inputs are named `input`
(or input_0, input_1, ...), outputs `output` (or output_0, ...).

Gradients are those of  L = sum_k (output_k.double() * cotangent_k).sum()
in eval mode, with float32 inputs: exactly the function the ONNX graph
computes.  With --grad-dtype float64 they come from a float64 copy of the
model instead (same weights and inputs, cast up).

Every file is written under a temporary name and renamed.  Exit status:
0 done; 2 bad arguments, a factory that cannot be built or run, or an
export that fails.
"""

import argparse
import copy
import importlib
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import torch

OPSET = 17
INT_DTYPES = {"int64": torch.int64, "int32": torch.int32}
FLOAT_DTYPES = {"float32": torch.float32}


def _load_torchvision_fixtures():
    """tests/fixtures/export_torchvision.py, loaded by path.

    perturb() and calibrate_bn() live there; one definition keeps every
    fixture's weight distributions the same.  Loading by path leaves
    sys.path alone, so a `tests` package of the caller's is not shadowed.
    """
    import importlib.util
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(repo, "tests", "fixtures", "export_torchvision.py")
    spec = importlib.util.spec_from_file_location("export_torchvision", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tvfix = _load_torchvision_fixtures()


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


def log(msg):
    print(msg, flush=True)


# --- arguments ---------------------------------------------------------------

def parse_shape(text):
    """'2x9x16' -> [2, 9, 16]; 'scalar' -> []."""
    if text == "scalar":
        return []
    try:
        dims = [int(d) for d in text.lower().split("x")]
    except ValueError:
        raise UsageError("--input-shape %r: expected sizes joined by 'x', "
                         "e.g. 2x9x16" % text)
    if any(d <= 0 for d in dims):
        raise UsageError("--input-shape %r: sizes must be positive" % text)
    return dims


def per_input(values, n, flag, default):
    """Expand a repeated flag to one value per input (one value = all)."""
    if not values:
        return [default] * n
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise UsageError("%s given %d times for %d inputs (give it once, or "
                         "once per --input-shape)" % (flag, len(values), n))
    return values


def input_specs(args):
    """[(name, shape, dtype name, high)] from the command line."""
    shapes = [parse_shape(s) for s in args.input_shape]
    n = len(shapes)
    dtypes = per_input(args.input_dtype, n, "--input-dtype", "float32")
    highs = per_input(args.input_high, n, "--input-high", None)
    names = ["input"] if n == 1 else ["input_%d" % i for i in range(n)]
    specs = []
    for name, shape, dt, high in zip(names, shapes, dtypes, highs):
        if dt not in INT_DTYPES and dt not in FLOAT_DTYPES:
            raise UsageError("--input-dtype %s: one of %s" % (
                dt, ", ".join(list(FLOAT_DTYPES) + list(INT_DTYPES))))
        if dt in INT_DTYPES and (high is None or high < 1):
            raise UsageError("input '%s' is %s: give --input-high N >= 1 "
                             "(values are drawn from [0, N))" % (name, dt))
        specs.append((name, shape, dt, high if dt in INT_DTYPES else None))
    return specs


# --- the model ---------------------------------------------------------------

def load_model(target):
    """Build the module from PKG.MODULE:FACTORY or load a TorchScript file."""
    if target.endswith(".pt"):
        if not os.path.isfile(target):
            raise UsageError("%s: no such TorchScript file" % target)
        try:
            return torch.jit.load(target, map_location="cpu")
        except Exception as e:
            raise UsageError("%s: torch.jit.load failed: %s" % (
                target, str(e).strip().splitlines()[0]))
    modname, sep, attr = target.partition(":")
    if not sep or not modname or not attr:
        raise UsageError("%r: expected PKG.MODULE:FACTORY or a .pt file"
                         % target)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(modname)
    except Exception as e:
        raise UsageError("cannot import %s: %s: %s" % (
            modname, type(e).__name__, e))
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise UsageError("%s has no callable %r" % (modname, attr))
    try:
        model = factory()
    except Exception as e:
        raise UsageError("%s() raised %s: %s" % (
            target, type(e).__name__, e))
    if not isinstance(model, torch.nn.Module):
        raise UsageError("%s() returned %s, not a torch.nn.Module" % (
            target, type(model).__name__))
    return model


class Splat(torch.nn.Module):
    """Calls the model with a tuple of inputs, for calibrate_bn's model(x)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, xs):
        return self.model(*xs)


def make_inputs(specs, gen):
    """Seeded inputs: float ~ N(0, 1); ints uniform in [0, high)."""
    xs = []
    for _, shape, dt, high in specs:
        if dt in INT_DTYPES:
            xs.append(torch.randint(0, high, shape, generator=gen,
                                    dtype=INT_DTYPES[dt]))
        else:
            xs.append(torch.randn(shape, generator=gen,
                                  dtype=FLOAT_DTYPES[dt]))
    return xs


def perturb_model(model, specs, gen, bn_stats):
    """tvfix.perturb(), then BatchNorm stats measured on a fresh batch."""
    tvfix.perturb(model, gen)
    model.eval()
    if bn_stats == "data" and tvfix._batchnorms(model):
        tvfix.calibrate_bn(Splat(model), tuple(make_inputs(specs, gen)), gen)
    model.eval()


def flatten(value):
    """Leaves of nested tuples/lists/dicts (dict values in order), depth first.

    The same order torch.onnx.export uses for graph outputs; non-tensor
    leaves (None) are kept so positions match the torch structure.
    """
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    return [value]


def to_numpy(t):
    """A copy: numpy views of .grad tensors would see later accumulation."""
    return t.detach().cpu().contiguous().numpy().copy()


# --- the reference run -------------------------------------------------------

def record_modules(model):
    """Forward hooks on every submodule; returns (store, remove function).

    Keys: module path; '#i' for the i-th leaf of a tuple output; '@k' for
    the k-th call (k >= 1) of a module called more than once.
    """
    store, calls, handles = {}, {}, []

    def hook_for(path):
        def hook(mod, inputs, output):
            k = calls.get(path, 0)
            calls[path] = k + 1
            key = path if k == 0 else "%s@%d" % (path, k)
            leaves = flatten(output)
            if isinstance(output, torch.Tensor):
                store[key] = to_numpy(output)
                return
            for i, leaf in enumerate(leaves):
                if isinstance(leaf, torch.Tensor):
                    store["%s#%d" % (key, i)] = to_numpy(leaf)
        return hook

    for path, mod in model.named_modules():
        if path:
            handles.append(mod.register_forward_hook(hook_for(path)))

    def remove():
        for h in handles:
            h.remove()
    return store, remove


def run_reference(model, target, xs, gen, grad_dtype):
    """Forward with hooks, seeded cotangents, backward; returns a dict.

    Keys: outputs (list of tensors), modules (dict), cotangents (list,
    None for non-float outputs), grads_inputs (list, None for int inputs),
    grads_params (dict name -> array), no_grad_path (names whose gradient
    is identically zero because they do not reach the outputs).
    """
    scripted = isinstance(model, torch.jit.ScriptModule)
    store, remove = ({}, lambda: None)
    if not scripted:
        store, remove = record_modules(model)
    # Autograd on (and parameters requiring grad) keeps torch 1.13 off the
    # fused inference fast paths of MultiheadAttention and
    # TransformerEncoderLayer, the same code path the ONNX export traces.
    with torch.enable_grad():
        xin = [x.clone().requires_grad_(x.is_floating_point()) for x in xs]
        try:
            outs = flatten(model(*xin))
        finally:
            remove()
    bad = [type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)]
    if bad:
        raise UsageError("model output has non-tensor leaves: %s"
                         % ", ".join(bad))
    cots = []
    for o in outs:
        if o.is_floating_point():
            cots.append(torch.randn(o.shape, generator=gen,
                                    dtype=torch.float64))
        else:
            cots.append(None)

    if grad_dtype == "float64":
        grads = gradients(float64_copy(model, target), xs, cots,
                          torch.float64)
    else:
        grads = gradients(model, xs, cots, torch.float32, outs, xin)
    return dict(outputs=[to_numpy(o) for o in outs], modules=store,
                cotangents=cots, **grads)


def float64_copy(model, target):
    """An independent float64 copy of the model, in eval().

    copy.deepcopy of a loaded ScriptModule shares state with the original
    (a backward through the copy accumulated into the original's .grad), so
    a TorchScript model is loaded again from its file instead.
    """
    if isinstance(model, torch.jit.ScriptModule):
        fresh = torch.jit.load(target, map_location="cpu")
        fresh.load_state_dict(model.state_dict())
        return fresh.double().eval()
    return copy.deepcopy(model).double().eval()


def gradients(model, xs, cots, dtype, outs=None, xin=None):
    """Gradients of sum_k (out_k.double() * cot_k).sum() in eval mode.

    dtype float64: pass a float64_copy(); float inputs are cast up.  outs/xin: a float32 forward already run on xin with
    autograd on, reused instead of running the model again.
    Returns grads_inputs (None for int inputs), grads_params, no_grad_path
    (parameters that do not reach the outputs: zero gradient), loss.
    """
    if outs is None:
        with torch.enable_grad():
            xin = [x.detach().to(dtype).requires_grad_()
                   if x.is_floating_point() else x for x in xs]
            outs = flatten(model(*xin))
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for _, p in params:
        p.grad = None
    with torch.enable_grad():
        terms = [(o.double() * c).sum() for o, c in zip(outs, cots)
                 if c is not None]
        if not terms:
            raise UsageError("model has no floating-point output to "
                             "differentiate")
        loss = torch.stack(terms).sum()
        loss.backward()
    grads_params, no_grad_path = {}, []
    for name, p in params:
        if p.grad is None:
            no_grad_path.append(name)
            grads_params[name] = np.zeros(tuple(p.shape),
                                          dtype=to_numpy(p).dtype)
        else:
            grads_params[name] = to_numpy(p.grad)
        p.grad = None  # a later backward (gradient_stability) starts clean
    grads_inputs = []
    for x in xin:
        if not x.is_floating_point():
            grads_inputs.append(None)
        elif x.grad is None:  # the input does not reach the outputs
            grads_inputs.append(np.zeros(tuple(x.shape), to_numpy(x).dtype))
        else:
            grads_inputs.append(to_numpy(x.grad))
    return dict(grads_inputs=grads_inputs, grads_params=grads_params,
                no_grad_path=no_grad_path, loss=float(loss))


def kink_masks(model, xs, dtype):
    """Which side of the kink each ReLU/ReLU6/Hardtanh/(P|Leaky)ReLU input is on.

    Runs the model (float inputs cast to dtype) with forward pre-hooks, so
    in-place activations are seen before they overwrite their input.
    Returns {module path: bool tensor (inside the linear region)}.
    """
    masks, handles = {}, []
    kinked = (torch.nn.ReLU, torch.nn.Hardtanh, torch.nn.LeakyReLU,
              torch.nn.PReLU)

    def hook_for(path, mod):
        if isinstance(mod, torch.nn.Hardtanh):  # ReLU6 is one
            lo, hi = mod.min_val, mod.max_val
        else:
            lo, hi = 0.0, float("inf")

        def hook(m, inputs):
            masks.setdefault(path, (inputs[0] > lo) & (inputs[0] < hi))
        return hook

    for path, mod in model.named_modules():
        if isinstance(mod, kinked):
            handles.append(mod.register_forward_pre_hook(hook_for(path, mod)))
    try:
        with torch.enable_grad():
            model(*[x.to(dtype) if x.is_floating_point() else x for x in xs])
    finally:
        for h in handles:
            h.remove()
    return masks


def rel_norm(a, b):
    """||a - b|| / ||b|| in float64 (0 when both are zero)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    nb = float(np.linalg.norm(b))
    d = float(np.linalg.norm(a - b))
    return d / nb if nb > 0 else (0.0 if d == 0 else float("inf"))


def gradient_stability(model, target, xs, ref, in_names, grad_dtype):
    """How far float32 gradients are from float64 ones, and why.

    A float32 forward puts a few activations on the other side of a
    ReLU/ReLU6 kink than exact arithmetic would; each such flip changes
    the gradient by a finite amount (one flip in 6.1M ReLU6 inputs moves
    mobilenet_v2's gradients by ~0.4% in norm).  Any float32
    reimplementation flips different elements, so this figure is the floor
    below which gradient tolerances cannot go.  Returns a JSON-able dict.
    """
    f64 = float64_copy(model, target)
    if grad_dtype == "float64":
        other = gradients(model, xs, ref["cotangents"], torch.float32)
        g32, g64 = other, ref
    else:
        other = gradients(f64, xs, ref["cotangents"], torch.float64)
        g32, g64 = ref, other
    params = sorted(((rel_norm(g32["grads_params"][n],
                               g64["grads_params"][n]), n)
                     for n in g64["grads_params"]), reverse=True)
    a_all = np.concatenate([g.ravel() for g in g32["grads_params"].values()]
                           or [np.zeros(0)])
    b_all = np.concatenate([g.ravel() for g in g64["grads_params"].values()]
                           or [np.zeros(0)])
    inputs = {n: rel_norm(a, b) for n, a, b in
              zip(in_names, g32["grads_inputs"], g64["grads_inputs"])
              if a is not None}
    m32 = kink_masks(model, xs, torch.float32)
    m64 = kink_masks(f64, xs, torch.float64)
    flips = {p: int((m32[p] != m64[p]).sum()) for p in m32 if p in m64}
    return {
        "compared": "float32 model vs float64 copy, ||g32 - g64|| / ||g64||",
        "params": {n: r for r, n in params},
        "params_all": rel_norm(a_all, b_all) if a_all.size else 0.0,
        "params_max": params[0][0] if params else 0.0,
        "params_worst": [[n, r] for r, n in params[:5]],
        "inputs": inputs,
        "kink_elements": sum(int(m.numel()) for m in m32.values()),
        "kink_flips": {p: c for p, c in flips.items() if c},
    }


def forward_stability(model, target, xs, outs):
    """The float32 reference's own error: the outputs of a float64 copy of the
    model on the same inputs, and per output max |out32 - out64| and
    ||out32 - out64|| / ||out64||.  migc verify allows a stated multiple of this
    noise on top of its tolerance, since no float32 result can be closer to
    torch's than torch is to exact arithmetic.  Returns (list of float64 arrays,
    None for non-float outputs; JSON-able dict by output index)."""
    f64 = float64_copy(model, target)
    with torch.enable_grad():  # the same (non-fused) path as the reference run
        o64 = flatten(f64(*[x.double() if x.is_floating_point() else x
                            for x in xs]))
    arrs, stats = [], []
    for a, b in zip(outs, o64):
        if not np.issubdtype(a.dtype, np.floating):
            arrs.append(None)
            stats.append(None)
            continue
        b = to_numpy(b).astype(np.float64)
        arrs.append(b)
        stats.append({"max_abs": float(np.abs(a.astype(np.float64) - b).max()) if b.size else 0.0,
                      "rel_norm": rel_norm(a, b)})
    return arrs, stats


# --- writing -----------------------------------------------------------------

def tmp_name(path):
    root, ext = os.path.splitext(path)
    return "%s.tmp%d%s" % (root, os.getpid(), ext)


def write_atomic(path, writer):
    """writer(tmp) then rename over path; the temporary file never stays."""
    tmp = tmp_name(path)
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def export_onnx(model, xs, path, in_names, out_names, preserve):
    """One opset-17 export with static shapes; raises on failure."""
    kw = dict(opset_version=OPSET, input_names=in_names,
              output_names=out_names)
    if preserve:
        kw.update(training=torch.onnx.TrainingMode.PRESERVE,
                  do_constant_folding=False)
    model.eval()
    # enable_grad: see run_reference (the MHA fast path has no symbolic).
    with torch.enable_grad():
        write_atomic(path, lambda tmp: torch.onnx.export(
            model, tuple(xs), tmp, **kw))


def check_export(path, n_outputs):
    """The exported graph must have exactly the outputs torch returned."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    got = len(m.graph.output)
    if got != n_outputs:
        raise UsageError("%s has %d outputs, the torch model returned %d "
                         "tensors" % (path, got, n_outputs))


def save_npz(path, members):
    def writer(tmp):
        with open(tmp, "wb") as f:  # a file object: savez adds no suffix
            np.savez(f, **members)
    write_atomic(path, writer)


def save_json(path, obj):
    def writer(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
    write_atomic(path, writer)


# --- main --------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="torch_reference.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", metavar="PKG.MODULE:FACTORY|MODEL.pt")
    ap.add_argument("--input-shape", action="append", required=True,
                    metavar="AxBxC", help="one per input, in order")
    ap.add_argument("--input-dtype", action="append", default=[],
                    metavar="DT", help="float32 (default), int64, int32")
    ap.add_argument("--input-high", action="append", default=[], type=int,
                    metavar="N", help="integer inputs are drawn from [0, N)")
    ap.add_argument("--seed", type=int, default=0,
                    help="seeds construction, inputs, cotangents and "
                    "--perturb (default 0)")
    ap.add_argument("--perturb", action="store_true",
                    help="perturb every parameter and BatchNorm buffer "
                    "(tests/fixtures/export_torchvision.py perturb())")
    ap.add_argument("--bn-stats", choices=("data", "random"), default="data",
                    help="with --perturb: BatchNorm running stats measured "
                    "on a seeded batch then perturbed (data, default) or "
                    "drawn at random")
    ap.add_argument("--grad-dtype", choices=("float32", "float64"),
                    default="float32",
                    help="float32: gradients of the float32 model (default);"
                    " float64: of a float64 copy")
    ap.add_argument("--no-stability", action="store_true",
                    help="skip the float32-vs-float64 gradient comparison "
                    "(ref.json grad_stability)")
    ap.add_argument("-o", dest="out", required=True, metavar="DIR")
    ap.add_argument("--warnings", action="store_true",
                    help="show torch's export warnings")
    ap.add_argument("--traceback", action="store_true",
                    help="print the Python traceback of a failed run or "
                    "export")
    args = ap.parse_args(argv)
    if not args.warnings:
        warnings.filterwarnings("ignore")

    try:
        return run(args)
    except UsageError as e:
        print("torch_reference.py: error: %s" % e, file=sys.stderr)
        return 2


def run(args):
    t_start = time.time()
    specs = input_specs(args)
    in_names = [s[0] for s in specs]

    torch.manual_seed(args.seed)  # the factory's random initialisation
    model = load_model(args.model)
    model.eval()
    gen = torch.Generator().manual_seed(args.seed)
    xs = make_inputs(specs, gen)
    if args.perturb:
        pgen = torch.Generator().manual_seed(args.seed + 1)
        try:
            perturb_model(model, specs, pgen, args.bn_stats)
        except Exception as e:
            raise UsageError("perturbing %s: %s: %s" % (
                args.model, type(e).__name__, e))
    n_params = sum(p.numel() for p in model.parameters())
    log("built %s: %d parameters (%d tensors)%s" % (
        args.model, n_params, len(list(model.parameters())),
        ", perturbed" if args.perturb else ""))

    t0 = time.time()
    cgen = torch.Generator().manual_seed(args.seed + 2)
    try:
        ref = run_reference(model, args.model, xs, cgen, args.grad_dtype)
    except UsageError:
        raise
    except Exception as e:
        if args.traceback:
            traceback.print_exc()
        raise UsageError("running %s on inputs %s: %s: %s" % (
            args.model, ", ".join("x".join(map(str, s[1])) for s in specs),
            type(e).__name__, str(e).strip().splitlines()[0]))
    outs = ref["outputs"]
    out_names = (["output"] if len(outs) == 1 else
                 ["output_%d" % i for i in range(len(outs))])
    log("forward + backward in %.1fs: %d output(s) %s, %d module outputs, "
        "loss %.6g" % (time.time() - t0, len(outs),
                       ", ".join("x".join(map(str, o.shape)) or "scalar"
                                 for o in outs),
                       len(ref["modules"]), ref["loss"]))
    if ref["no_grad_path"]:
        log("note: %d parameter(s) do not reach the outputs (zero gradient):"
            " %s" % (len(ref["no_grad_path"]),
                     ", ".join(ref["no_grad_path"][:8])))

    stability = None
    if not args.no_stability:
        t0 = time.time()
        try:
            stability = gradient_stability(model, args.model, xs, ref,
                                           in_names, args.grad_dtype)
        except Exception as e:  # a diagnostic: never fatal
            log("note: gradient stability not measured: %s: %s" % (
                type(e).__name__, str(e).strip().splitlines()[0]
                if str(e).strip() else ""))
        if stability:
            flips = stability["kink_flips"]
            log("gradient stability (%.1fs): float32 vs float64 %.2g over "
                "all parameters, worst tensor %.2g (%s)%s; %d kink flip(s)"
                " in %d ReLU-type inputs%s" % (
                    time.time() - t0, stability["params_all"],
                    stability["params_max"],
                    stability["params_worst"][0][0]
                    if stability["params_worst"] else "-",
                    "".join(", input %s %.2g" % kv
                            for kv in stability["inputs"].items()),
                    sum(flips.values()), stability["kink_elements"],
                    " (%s)" % ", ".join(list(flips)[:4]) if flips else ""))

    fwd64, fwd_stats = None, None
    if not args.no_stability:
        try:
            fwd64, fwd_stats = forward_stability(model, args.model, xs, outs)
        except Exception as e:  # a diagnostic: never fatal
            log("note: forward stability not measured: %s: %s" % (
                type(e).__name__, str(e).strip().splitlines()[0]
                if str(e).strip() else ""))
        if fwd_stats:
            log("forward stability: float32 vs float64 %s" % ", ".join(
                "%s max abs %.2g, rel norm %.2g" % (n, st["max_abs"], st["rel_norm"])
                for n, st in zip(out_names, fwd_stats) if st))

    os.makedirs(args.out, exist_ok=True)
    for fname, preserve in (("model.onnx", False),
                            ("model_preserve.onnx", True)):
        path = os.path.join(args.out, fname)
        t0 = time.time()
        try:
            export_onnx(model, xs, path, in_names, out_names, preserve)
        except Exception as e:
            if args.traceback:
                traceback.print_exc()
            raise UsageError("ONNX export (%s) failed: %s: %s" % (
                fname, type(e).__name__, str(e).strip().splitlines()[0]
                if str(e).strip() else ""))
        check_export(path, len(outs))
        log("wrote %s (%.1fs, %.1f MB)" % (path, time.time() - t0,
                                          os.path.getsize(path) / 1e6))

    path = os.path.join(args.out, "model.pth")
    write_atomic(path, lambda tmp: torch.save(model.state_dict(), tmp))
    log("wrote %s" % path)

    members = {}
    for name, x in zip(in_names, xs):
        members["inputs/" + name] = to_numpy(x)
    for name, o, c in zip(out_names, outs, ref["cotangents"]):
        members["outputs/" + name] = o
        if c is not None:
            members["cotangents/" + name] = to_numpy(c)
    for name, o64 in zip(out_names, fwd64 or []):
        if o64 is not None:
            members["outputs_f64/" + name] = o64
    for key, arr in ref["modules"].items():
        members["modules/" + key] = arr
    for name, g in zip(in_names, ref["grads_inputs"]):
        if g is not None:
            members["grads/inputs/" + name] = g
    for name, g in ref["grads_params"].items():
        members["grads/params/" + name] = g
    path = os.path.join(args.out, "ref.npz")
    t0 = time.time()
    save_npz(path, members)
    log("wrote %s (%d members, %.1fs, %.1f MB)" % (
        path, len(members), time.time() - t0, os.path.getsize(path) / 1e6))

    meta = {
        "factory": args.model,
        "seed": args.seed,
        "torch_version": torch.__version__,
        "inputs": [{"name": n, "shape": list(s), "dtype": dt,
                    **({"high": h} if h is not None else {})}
                   for n, s, dt, h in specs],
        "outputs": [{"name": n, "shape": list(o.shape),
                     "dtype": str(o.dtype)} for n, o in zip(out_names, outs)],
        "params": list(ref["grads_params"]),
        "grad_dtype": args.grad_dtype,
        "loss": "sum_k (outputs[k].double() * cotangents[k]).sum(), eval mode",
        "perturb": bool(args.perturb),
        "bn_stats": args.bn_stats if args.perturb else None,
        "opset": OPSET,
        "onnx": {"default": "model.onnx", "preserve": "model_preserve.onnx"},
        "params_without_grad_path": ref["no_grad_path"],
        "grad_stability": stability,
        "forward_stability": None if fwd_stats is None else {
            n: st for n, st in zip(out_names, fwd_stats) if st},
        "module_outputs": len(ref["modules"]),
        "numpy_version": np.__version__,
    }
    path = os.path.join(args.out, "ref.json")
    save_json(path, meta)
    log("wrote %s; done in %.1fs" % (path, time.time() - t_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
