#!/bin/bash
# migc convert --target mindspore on ops MindSpore has no rule for (issue 12 item 3,
# acceptance 3): each such node becomes an ops.Custom AOT call to the CPU target's
# kernel (OUTDIR/mindspore/custom, built by its Makefile into libmigc_custom.so),
# and the net runs under the stand-in with ONNX's semantics, computed here with
# numpy. Also: every ops.Custom argument is explicit (the table's signature), the
# library is found from net.py's folder whatever the working directory, net.py
# passes pyflakes3, coverage (convert's and `migc coverage`'s) names each node
# custom-op (cpu kernel) with its reason, --strict exits 2, a node reading a
# checkpoint parameter stays an error, and the AOT boundary refuses a wrong
# parameter count, rank, shape or dtype without writing.
# usage: tests/e2e/mindspore_custom.sh BUILD_DIR
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/../.."
MIGC=$(realpath "$BUILD/migc")
ROOT=$(pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/migc-mscustom.XXXXXX") fx=build/fixtures/custom
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
PY=/usr/bin/python3
export PYTHONPATH=$ROOT/tests/mindspore_standin
$PY tests/fixtures/make_custom_models.py "$fx" || { echo "fixture failed"; exit 1; }
CUSTOM="cumsum_excl cumsum_rev hardmax scatter topk" # the nodes with no usable MindSpore rule

out=$work/out
"$MIGC" convert "$fx/custom_ops.onnx" --target mindspore -o "$out" > "$work/convert.log" 2>&1
rc=$?
line=$(grep '^convert: mindspore:' "$work/convert.log")
if [ $rc -eq 0 ] && [[ $line == *" 5 custom ops (cpu kernel"* && $line == *" 0 not converted"* ]]; then
  ok "converts, the custom ops counted apart: ${line#convert: mindspore: }"
else bad "convert (rc $rc): $line $(grep error "$work/convert.log" | head -3)"; fi
named=0
for n in $CUSTOM; do
  grep -q "^warning\[unsupported\]: node '$n' ([A-Za-z]*): mindspore: custom-op (cpu kernel): ." "$work/convert.log" &&
    named=$((named + 1))
done
[ $named -eq 5 ] && ! grep -q '^error' "$work/convert.log" && ok "each custom node is a warning of its own naming it, no error" ||
  bad "diagnostics: $(grep -c custom-op "$work/convert.log") custom-op lines, $(grep -c '^error' "$work/convert.log") errors"

net=$out/mindspore/net.py
pyflakes3 "$net" "$out/mindspore/run.py" > "$work/flakes" 2>&1 && ok "net.py and run.py pass pyflakes3" ||
  bad "pyflakes3: $(head -3 "$work/flakes")"
# every keyword of the table's signature given, func a path:function, one per node, made in __init__
r=$($PY - "$net" ../shared/mindspore-api.json $CUSTOM <<'PY'
import ast, json, sys
net, table, nodes = sys.argv[1], sys.argv[2], sys.argv[3:]
sig = [a for a, _ in next(e for e in json.load(open(table)) if e["api"] == "mindspore.ops.Custom")["signature"]]
tree = ast.parse(open(net).read())
init = next(f for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body if getattr(f, "name", "") == "__init__")
calls = [c for c in ast.walk(init) if isinstance(c, ast.Call) and ast.unparse(c.func) == "mindspore.ops.Custom"]
bad = [ast.unparse(c) for c in calls if c.args or [k.arg for k in c.keywords] != sig]
kw = lambda c, k: next(x.value for x in c.keywords if x.arg == k)
bad += [ast.unparse(c) for c in calls if ast.literal_eval(kw(c, "func_type")) != "aot"
        or not ast.unparse(kw(c, "func")).startswith("CUSTOM_SO + ")]
funcs = sorted(ast.literal_eval(kw(c, "func").right) for c in calls)
want = sorted(":migc_" + n for n in nodes)
print("ok" if not bad and funcs == want else "FAIL %s funcs %s, want %s" % (bad[:1], funcs, want))
PY
)
[ "$r" = ok ] && ok "every ops.Custom passes the table's arguments by keyword (func_type='aot', bprop, reg_info)" ||
  bad "ops.Custom calls: $r"

if make -s -C "$out/mindspore/custom" > "$work/make.log" 2>&1 && [ -f "$out/mindspore/custom/libmigc_custom.so" ]; then
  exported=$(nm -D --defined-only "$out/mindspore/custom/libmigc_custom.so" | awk '$2 == "T" {print $3}' | sort | tr '\n' ' ')
  want=$(for n in $CUSTOM; do echo "migc_$n"; done | sort | tr '\n' ' ')
  [ "$exported" = "$want" ] && ok "make -C custom builds libmigc_custom.so, exporting only $exported" ||
    bad "exported symbols: '$exported', want '$want'"
else bad "make -C custom: $(tail -3 "$work/make.log")"; fi

# inputs with both signs
$PY - "$work" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
np.save(sys.argv[1] + "/x.npy", (rng.standard_normal((2, 3, 4)) * 5).astype(np.float32))
np.save(sys.argv[1] + "/n.npy", rng.integers(-30, 30, (2, 3, 4)).astype(np.int64))
np.save(sys.argv[1] + "/u.npy", (rng.standard_normal((2, 4)) * 3).astype(np.float32))
PY
reference() { # OUTDIR: the outputs against ONNX's semantics, from the model's own constants and weights
  $PY - "$fx/custom_ops.onnx" "$work" "$1" <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
model, work, outdir = sys.argv[1:]
g = onnx.load(model).graph
const = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in g.node if n.op_type == "Constant"}
w = {t.name: numpy_helper.to_array(t) for t in g.initializer}
x, n, u = (np.load("%s/%s.npy" % (work, k)) for k in "xnu")
r = np.maximum(x, 0)
fm = np.cumsum(r, axis=int(const["c1"])) - r            # CumSum exclusive: the sum before each element
ax = int(const["c2"])
im = np.flip(np.cumsum(np.flip(n, ax), ax), ax)          # CumSum reverse: the sum from each element on
s = fm + x
order = np.argsort(-s, axis=-1, kind="stable")[..., :int(const["k"][0])]  # TopK: largest first, ties to the lower index
tv, ti = np.take_along_axis(s, order, -1), order
t = s + im.astype(np.float32)
g = u @ w["fc.weight"].T + w["fc.bias"]
hs = np.eye(g.shape[-1], dtype=np.float32)[np.argmax(g, -1)]  # Hardmax of Gemm: 1 at the first maximum
for (i, j), row in zip(const["idx"], hs):               # ScatterND: whole rows of the last axis
    t[i, j, :] = row
y = 1 / (1 + np.exp(-t.astype(np.float64)))
got_y, got_im, got_tv, got_ti = (np.load("%s/%s.npy" % (outdir, f)) for f in ("0_y", "1_im", "2_tv", "3_ti"))
err = np.abs(got_y - y).max()
if got_im.dtype != np.int64 or not np.array_equal(got_im, im):
    print("FAIL im differs from numpy's reversed cumsum at %d of %d" % (int((got_im != im).sum()), im.size))
elif got_ti.dtype != np.int64 or not np.array_equal(got_ti, ti) or not np.array_equal(got_tv, tv):
    print("FAIL TopK's two outputs differ from numpy's: %s %s" % (got_ti.ravel()[:6], ti.ravel()[:6]))
elif got_y.dtype != np.float32 or err > 1e-5:
    print("FAIL y differs from numpy by %.3g" % err)
else:
    print("ok max |y - numpy| %.2g, im and TopK's two outputs exact" % err)
PY
}
mkdir -p "$work/elsewhere"
run() { # OUTDIR NET_DIR: run.py from another working directory
  (cd "$work/elsewhere" && $PY "$2/run.py" --ckpt "$1/model.ckpt" --input x="$work/x.npy" --input n="$work/n.npy" \
    --input u="$work/u.npy" --output-dir "$1/res") > "$work/run.log" 2>&1
}
if run "$out" "$out/mindspore"; then
  r=$(reference "$out/res")
  [[ $r == ok* ]] && ok "run.py under the stand-in, run from another folder, computes ONNX's values: ${r#ok }" ||
    bad "numbers: $r"
else bad "run.py: $(tail -3 "$work/run.log")"; fi
# the comparison can fail: the exclusive-cumsum kernel fed x instead of relu(x)
cp -r "$out" "$work/mut"
xname=$(grep -oP 'def construct\(self, \K[A-Za-z0-9_]+' "$net")
sed -i -E "s/self\.custom_cumsum_excl\(v[0-9]+_r\)/self.custom_cumsum_excl($xname)/" "$work/mut/mindspore/net.py"
if ! cmp -s "$net" "$work/mut/mindspore/net.py" && run "$work/mut" "$work/mut/mindspore" &&
   [[ $(reference "$work/mut/res") == FAIL* ]]; then ok "a custom op fed the wrong value fails the comparison"
else bad "the mutated net was not caught"; fi

# coverage: convert's report and migc coverage's name each node custom-op (cpu kernel) with the reason
"$MIGC" coverage "$fx/custom_ops.onnx" --format json > "$work/cov.json" 2> "$work/cov.log"
"$MIGC" coverage "$fx/custom_ops.onnx" > "$work/cov.md" 2>> "$work/cov.log"
r=$($PY - "$out/coverage.json" "$work/cov.json" $CUSTOM <<'PY'
import json, sys
files, nodes = sys.argv[1:3], sorted(sys.argv[3:])
for f in files:
    m = json.load(open(f))["models"][0]
    ms = m["targets"]["mindspore"]
    if sorted(ms["custom_op_nodes"]) != nodes:
        sys.exit(print("FAIL %s: custom_op_nodes %s" % (f, ms["custom_op_nodes"])))
    if ms["converted_nodes"] != m["nodes"] - len(nodes):
        sys.exit(print("FAIL %s: %d converted of %d" % (f, ms["converted_nodes"], m["nodes"])))
    for o in m["ops"]:
        if set(o["nodes"]) & set(nodes):
            if o["status"]["mindspore"] != "custom-op (cpu kernel)" or not o["reason"]["mindspore"].strip():
                sys.exit(print("FAIL %s: %s is %s" % (f, o["op"], o["status"]["mindspore"])))
            if o["status"]["cpu"] != "supported":
                sys.exit(print("FAIL %s: %s on cpu is %s (%s)" % (f, o["op"], o["status"]["cpu"], o["reason"]["cpu"])))
        if o["op"] in ("Hardmax", "ScatterND") and not o["suggestion"]["mindspore"]:
            sys.exit(print("FAIL %s: no suggestion for %s" % (f, o["op"])))
    if any(b["by_target"].get("mindspore") for b in json.load(open(f))["summary"]["blocking_ops"]):
        sys.exit(print("FAIL %s: a custom op counted as blocking" % f))
print("ok")
PY
)
[ "$r" = ok ] && ok "coverage.json (convert's and migc coverage's): custom-op (cpu kernel) with a reason, cpu supported, not blocking" ||
  bad "coverage: $r"
cmd=0
for n in $CUSTOM; do
  grep -q "^- mindspore: \`$n\` ([A-Za-z]*): custom-op (cpu kernel): ." "$work/cov.md" &&
    grep -q "^- mindspore: \`$n\` " "$out/coverage.md" && cmd=$((cmd + 1))
done
[ $cmd -eq 5 ] && ok "coverage.md names every custom node with its reason" || bad "coverage.md names $cmd of 5 custom nodes"

"$MIGC" convert "$fx/custom_ops.onnx" --target mindspore --strict -o "$work/strict" > "$work/strict.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "strict.*'scatter' (ScatterND, an ops.Custom CPU kernel)" "$work/strict.log" &&
  ok "--strict --target mindspore exits 2, naming the custom ops" || bad "--strict: rc $rc, $(grep strict "$work/strict.log")"

# a node reading a checkpoint parameter is no custom op: reported, and net.py raises there
"$MIGC" convert "$fx/custom_param.onnx" --target mindspore -o "$work/param" > "$work/param.log" 2>&1
if grep -q "^error\[unsupported\]: node 'scatter_param' (ScatterND): mindspore: .*no ops.Custom either: it reads checkpoint parameter 'divisor'" "$work/param.log" &&
   grep -q "raise NotImplementedError(\"node 'scatter_param'" "$work/param/mindspore/net.py" &&
   grep -q " 0 custom ops .* 1 not converted" "$work/param.log" && [ ! -e "$work/param/mindspore/custom" ]; then
  ok "a node reading a parameter stays an error, saying why (no custom/ written)"
else bad "parameter node: $(grep -E 'scatter_param|convert: mindspore' "$work/param.log")"; fi

# the AOT boundary: anything but what the kernel was made for is refused before a byte is written
r=$($PY - "$out/mindspore/custom/libmigc_custom.so" "$fx/custom_ops.onnx" <<'PY'
import ctypes, sys
import numpy as np
import onnx
from onnx import numpy_helper
lib = ctypes.CDLL(sys.argv[1])
c1 = next(numpy_helper.to_array(n.attribute[0].t) for n in onnx.load(sys.argv[2]).graph.node if n.output[0] == "c1")
f = lib.migc_cumsum_excl
f.restype = ctypes.c_int
def call(arrays, shapes=None, dtypes=None, nparam=None):
    shapes = shapes or [a.shape for a in arrays]
    dtypes = dtypes or [str(a.dtype) for a in arrays]
    n = len(arrays)
    params = (ctypes.c_void_p * n)(*[a.ctypes.data for a in arrays])
    ndims = (ctypes.c_int * n)(*[len(s) for s in shapes])
    dims = [(ctypes.c_int64 * max(len(s), 1))(*s) for s in shapes]
    sh = (ctypes.POINTER(ctypes.c_int64) * n)(*[ctypes.cast(d, ctypes.POINTER(ctypes.c_int64)) for d in dims])
    dt = (ctypes.c_char_p * n)(*[d.encode() for d in dtypes])
    return f(n if nparam is None else nparam, params, ndims, sh, dt, None, None)
x = np.linspace(-7, 7, 24, dtype=np.float32).reshape(2, 3, 4)
def fresh(shape=(2, 3, 4)):
    return np.full(shape, 12345.0, np.float32)
y = fresh()
want = np.cumsum(x, axis=int(c1)) - x                  # exclusive: the sum before each element
if call([x, y]) != 0 or not np.allclose(y, want, rtol=1e-6, atol=1e-5):
    sys.exit(print("FAIL the right call: %s" % y.ravel()[:4]))
cases = {
    "a wrong shape (2,3,5)": lambda y: call([np.zeros((2, 3, 5), np.float32), y], [(2, 3, 5), (2, 3, 5)]),
    "a wrong rank": lambda y: call([x.reshape(6, 4), y.reshape(6, 4)]),
    "a wrong dtype string": lambda y: call([x, y], dtypes=["float64", "float32"]),
    "a wrong parameter count": lambda y: call([x, y], nparam=3),
    "a wrong output shape": lambda y: call([x, y], [(2, 3, 4), (2, 3, 3)]),
}
for what, fn in cases.items():
    y = fresh((2, 3, 5)) if "(2,3,5)" in what else fresh()
    rc = fn(y)
    if rc == 0 or not (y == 12345.0).all():
        sys.exit(print("FAIL %s: returned %d, output %s" % (what, rc, "untouched" if (y == 12345.0).all() else "written")))
print("ok")
PY
)
[ "$r" = ok ] && ok "the AOT entry computes the exclusive cumsum, and refuses a wrong shape, rank, dtype or count without writing" ||
  bad "AOT boundary: $r"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ] && rm -rf "$work"
[ $fail -eq 0 ]
