#!/bin/bash
# The MindSpore stand-in's own tests (tests/mindspore_standin/test_*.py, unittest, on
# Debian's torch): strict bindings from ../shared/mindspore-api.json, the nn layers and
# ops against hand-translated torch calls on the table's pitfalls, .ckpt decoding (r18.ckpt
# against r18.pth and check-ckpt.py; malformed files), load_param_into_net, Cell naming,
# value_and_grad against torch autograd, ops.Custom aot with a compiled C kernel.
# Prints one line per test and "N passed, N failed" last; exits 1 on any failure.
# usage: tests/e2e/mindspore_standin.sh
set -u
cd "$(dirname "$0")/../mindspore_standin"
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 - <<'PY'
import sys
import unittest

class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        self.stream.write("ok   %s\n" % test.id())

    def _bad(self, kind, test, err):
        self.stream.write("FAIL %s (%s)\n%s\n" % (test.id(), kind, self._exc_info_to_string(err, test)))

    def addFailure(self, test, err):
        super().addFailure(test, err); self._bad("failure", test, err)

    def addError(self, test, err):
        super().addError(test, err); self._bad("error", test, err)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test); self.stream.write("FAIL %s (unexpected success)\n" % test.id())

suite = unittest.defaultTestLoader.discover(".", pattern="test_*.py", top_level_dir=".")
runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=0, resultclass=Result)
r = runner.run(suite)
failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
passed = r.testsRun - failed - len(r.skipped)
if r.testsRun == 0:
    print("no tests found"); failed = 1
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
