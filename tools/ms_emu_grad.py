#!/usr/bin/python3
"""The MindSpore side of `migc verify --backend mindspore-emu [--grad]`.

    ms_emu_grad.py --net OUTDIR/mindspore/net.py --ckpt CKPT --inputs IN.npz
                   [--cotangents COT.npz] --out RESULT.npz

Loads net.py's Net() and the checkpoint as run.py does (load_checkpoint, then
load_param_into_net with strict_load=True; a parameter not loaded or a checkpoint
tensor unused is an error naming them), runs it in eval mode (set_train(False)) on
IN.npz's members "0", "1", ... (the graph inputs in order) and writes RESULT.npz:

    outputs/K          forward output K (graph order)
    grads/inputs/K     with --cotangents: dL/d input K, for every float input
    grads/params/TAG   with --cotangents: dL/d parameter TAG (net.trainable_params())
    grad_error         instead of grads/, when value_and_grad fails: why (a string);
                       the outputs stand
    time/forward, time/gradients   seconds (float64 scalars) of the forward run and
                       of value_and_grad

where L = sum_k sum(output_k * cotangent_k) (as mean * numel: ops.mean, ops.mul, ops.add) and COT.npz's members "0", "1", ...
are the cotangents of the outputs in order: the function tools/torch_reference.py
differentiates. Gradients come from mindspore.value_and_grad(fn, grad_position,
weights=net.trainable_params()), the only gradient API used (MindSpore 2.x, see
../shared/mindspore-api.json); under tests/mindspore_standin that is torch autograd
through the stand-in's ops. The moving statistics of a BatchNorm are not
trainable, so they have no gradient.

Run with the `mindspore` package on PYTHONPATH (migc sets it to the stand-in for
--backend mindspore-emu). Exit 0 done, 1 the net failed to load or run (the last
line of stderr says why), 2 bad arguments.
"""
import argparse
import importlib.util
import os
import sys
import time
import traceback

import numpy as np


def fail(msg, code=1):
    sys.stderr.write("ms_emu_grad: %s\n" % msg.replace("\n", " "))
    sys.exit(code)


def load_members(path):
    """The arrays "0", "1", ... of an npz, in index order."""
    with np.load(path) as z:
        n = len(z.files)
        missing = [str(i) for i in range(n) if str(i) not in z.files]
        if missing:
            fail("%s: members must be 0..%d, missing %s" % (path, n - 1, missing), 2)
        return [z[str(i)] for i in range(n)]


def load_net(net_py, ckpt):
    """Net() from net_py with the checkpoint loaded strictly, in eval mode."""
    import mindspore
    sys.path.insert(0, os.path.dirname(os.path.abspath(net_py)))
    spec = importlib.util.spec_from_file_location("migc_net", net_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = mod.Net()
    not_loaded, unused = mindspore.load_param_into_net(net, mindspore.load_checkpoint(ckpt), strict_load=True)
    if not_loaded or unused:
        fail("parameters not in the checkpoint: %s; checkpoint tensors unused: %s" % (not_loaded, unused))
    net.set_train(False)
    return mindspore, net


def where_text(e):
    """An exception in one line, with the net.py line (else the innermost) it came from."""
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f for f in reversed(tb) if f.filename.endswith("net.py")), tb[-1] if tb else None)
    return ("%s: %s%s" % (type(e).__name__, e, " (%s:%d)" % (os.path.basename(where.filename), where.lineno)
                                                if where else "")).replace("\n", " ")


def as_tuple(outs):
    return outs if isinstance(outs, tuple) else (outs,)


def gradients(mindspore, net, xs, tx, outs, cots, res):
    """value_and_grad of L into res (grads/..., time/gradients); raises what fails."""
    ops = mindspore.ops
    if len(cots) != len(outs):
        fail("%d cotangents for %d outputs" % (len(cots), len(outs)), 2)
    tc = [mindspore.Tensor(c.astype(np.float32)) for c in cots]
    floats = [k for k, o in enumerate(outs) if np.issubdtype(o.asnumpy().dtype, np.floating)]

    def loss(*args):
        ys = as_tuple(net(*args))
        total = None
        for k in floats:
            # sum(y * c) as mean(y * c) * numel: the stand-in has ops.mean, not ops.sum
            n = max(int(np.prod(tc[k].shape)), 1)
            s = ops.mul(ops.mean(ops.mul(ys[k], tc[k]), None, False), float(n))
            total = s if total is None else ops.add(total, s)
        return total

    pos = tuple(i for i, x in enumerate(xs) if np.issubdtype(x.dtype, np.floating))
    # the tags: parameters_and_names() is the checkpoint's names (net.py's contract);
    # the same Parameters as net.trainable_params()
    named = [(n, p) for n, p in net.parameters_and_names() if p.requires_grad]
    weights = [p for _, p in named]
    fn = mindspore.value_and_grad(loss, grad_position=pos if pos else None, weights=weights,
                                  has_aux=False, return_ids=False)
    t1 = time.perf_counter()
    _, g = fn(*tx)
    res["time/gradients"] = np.float64(time.perf_counter() - t1)
    gi, gw = g if pos else ((), g)
    for i, gx in zip(pos, gi):
        res["grads/inputs/%d" % i] = gx.asnumpy()
    for (tag, _), gp in zip(named, gw):
        res["grads/params/" + tag] = gp.asnumpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--cotangents")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    xs = load_members(a.inputs)
    cots = load_members(a.cotangents) if a.cotangents else None
    try:
        mindspore, net = load_net(a.net, a.ckpt)
        tx = [mindspore.Tensor(x) for x in xs]
        t0 = time.perf_counter()
        outs = as_tuple(net(*tx))
        res = {"outputs/%d" % k: o.asnumpy() for k, o in enumerate(outs)}
        res["time/forward"] = np.float64(time.perf_counter() - t0)
    except SystemExit:
        raise
    except Exception as e:  # the net failed: say where, in one line
        fail(where_text(e))
    if cots is not None:
        try:
            gradients(mindspore, net, xs, tx, outs, cots, res)
        except SystemExit:
            raise
        except Exception as e:  # the forward stands; the gradients are an error, said in one line
            for k in [k for k in res if k.startswith("grads/")]:
                del res[k]
            res["grad_error"] = np.array(where_text(e))
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **res)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
