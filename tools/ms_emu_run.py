"""Runs many migc MindSpore nets through the MindSpore stand-in in one process:
the runner of `migc conformance --backend mindspore-emu` (cli/conformance_ms.c).

usage: PYTHONPATH=tests/mindspore_standin /usr/bin/python3 tools/ms_emu_run.py MANIFEST RESULTS

MANIFEST has one line per test set, tab-separated:
    KEY  NET_DIR  CKPT|-  OUT_DIR  INPUT.npy...
NET_DIR holds the net.py `migc convert --target mindspore` wrote; its Net() is
built, the checkpoint (when given) loaded as run.py loads it (strict: every
parameter loaded, every tensor used), the net put in inference mode and called
on the inputs in INPUTS order; output K is saved as OUT_DIR/out_K.npy.
RESULTS gets one line per test as it finishes: KEY, then OK or ERR and the
exception's type and first line (flushed, so a crash loses nothing before it).
"""
import importlib.util
import os
import sys
import traceback

import numpy as np
import mindspore


def _one(key, net_dir, ckpt, out_dir, inputs):
    spec = importlib.util.spec_from_file_location("migc_net_" + key, os.path.join(net_dir, "net.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if len(inputs) != len(mod.INPUTS):
        raise RuntimeError("net.py takes %d inputs %s, the test gives %d" % (len(mod.INPUTS), mod.INPUTS, len(inputs)))
    net = mod.Net()
    if ckpt != "-":
        not_loaded, unused = mindspore.load_param_into_net(net, mindspore.load_checkpoint(ckpt), strict_load=True)
        if not_loaded or unused:
            raise RuntimeError("parameters not in the checkpoint: %s; checkpoint tensors unused: %s"
                               % (not_loaded, unused))
    net.set_train(False)
    outs = net(*[mindspore.Tensor(np.load(p)) for p in inputs])
    if not isinstance(outs, tuple):
        outs = (outs,)
    if len(outs) != len(mod.OUTPUTS):
        raise RuntimeError("construct returned %d values for %d outputs" % (len(outs), len(mod.OUTPUTS)))
    for k, y in enumerate(outs):
        if not isinstance(y, mindspore.Tensor):
            raise TypeError("output %d is a %s, not a mindspore.Tensor" % (k, type(y).__name__))
        np.save(os.path.join(out_dir, "out_%d.npy" % k), y.asnumpy())


def _reason(e):
    lines = str(e).strip().splitlines()
    msg = "%s: %s" % (type(e).__name__, lines[0] if lines else "")
    # where in net.py it happened: the statement's node comment is the line above
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if fr.filename.endswith("net.py"):
            msg += " (net.py line %d: %s)" % (fr.lineno, (fr.line or "").strip()[:160])
            break
    return msg.replace("\t", " ")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    mindspore.set_context(mode=mindspore.GRAPH_MODE)
    mindspore.set_device("CPU")
    with open(sys.argv[1], encoding="utf-8") as man, open(sys.argv[2], "w", encoding="utf-8") as res:
        for line in man:
            f = line.rstrip("\n").split("\t")
            if len(f) < 4:
                continue
            key = f[0]
            try:
                _one(key, f[1], f[2], f[3], f[4:])
                res.write("%s\tOK\n" % key)
            except Exception as e:  # every failure is the test's verdict, not the runner's
                res.write("%s\tERR\t%s\n" % (key, _reason(e)))
            res.flush()
            sys.modules.pop("migc_net_" + key, None)


if __name__ == "__main__":
    main()
