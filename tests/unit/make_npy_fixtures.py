#!/usr/bin/python3
"""Reference .npy/.npz files for tests/unit/test_npy.c, written by numpy itself.

    make_npy_fixtures.py OUTDIR          write the fixtures into OUTDIR (recreated)
    make_npy_fixtures.py --check OUTDIR  check with numpy the files test_npy wrote
                                         into OUTDIR/written

Values follow formulas that test_npy.c computes independently (see formula());
the two must stay in step. Needs Debian's /usr/bin/python3 with python3-numpy.
"""
import os
import shutil
import sys
import zipfile

import numpy as np

N = 12
SHAPE = (3, 4)
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128"]


def formula(dtype, n=N):
    """Element i of each test array; test_npy.c fill_formula() mirrors this."""
    i = np.arange(n)
    f = i * 0.5 - 3
    s = i - 6
    values = {
        "float16": f, "float32": f, "float64": f,
        "int8": s, "int16": s * 1000, "int32": s * 100000000, "int64": s * 10**15,
        "uint8": i * 20, "uint16": i * 5000, "uint32": i * 300000000,
        "uint64": np.arange(n, dtype=np.uint64) * np.uint64(1500000000000000000),
        "bool": i % 3 == 0,
        "complex64": f + 1j * i, "complex128": f + 1j * i,
    }[dtype]
    return np.asarray(values).astype(dtype)


# Strings for the '<U' (unicode) fixtures: ASCII, empty, 2-, 3- and 4-byte UTF-8.
STRINGS = ["monday", "", "h\u00e9llo", "\u20ac5", "\U0001f600!", "x"]


def unicode_array():
    """The [2, 3] unicode array of the string fixtures (test_npy.c STRINGS)."""
    return np.array(STRINGS).reshape(2, 3)


def npz_members():
    """The members of stored.npz / deflated.npz, in archive order."""
    return {
        "a": formula("float32").reshape(SHAPE),
        "b": formula("int64"),
        "c": formula("bool").reshape(SHAPE),
        "s": np.array(2.5),
        "e": np.zeros((0, 3), np.float32),
    }


def write_versioned(path, arr, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)


def generate(out):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "written"))
    j = lambda name: os.path.join(out, name)
    for dt in DTYPES:
        np.save(j(dt + ".npy"), formula(dt).reshape(SHAPE))
    for dt in ["float64", "int32", "complex64"]:
        big = formula(dt).reshape(SHAPE).astype(np.dtype(dt).newbyteorder(">"))
        np.save(j("be_" + dt + ".npy"), big)
    # C-order value at flat index i is i (3-D) and i * 7 (2-D); stored column-major.
    np.save(j("fortran_float32.npy"),
            np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)))
    np.save(j("fortran_uint16.npy"),
            np.asfortranarray((np.arange(15, dtype=np.uint16) * 7).reshape(3, 5)))
    np.save(j("scalar.npy"), np.array(2.5))
    np.save(j("unicode.npy"), unicode_array())
    np.save(j("be_unicode.npy"), unicode_array().astype(">U6"))
    np.save(j("fortran_unicode.npy"), np.asfortranarray(unicode_array()))
    np.save(j("empty.npy"), np.zeros((0, 3), np.float32))
    np.save(j("empty1d.npy"), np.zeros((0,), np.int64))
    write_versioned(j("v2.npy"), formula("float32").reshape(SHAPE), (2, 0))
    write_versioned(j("v3.npy"), formula("int32").reshape(SHAPE), (3, 0))
    np.savez(j("stored.npz"), **npz_members())
    np.savez_compressed(j("deflated.npz"), **npz_members())
    np.savez(j("positional.npz"), formula("float32"), formula("int8"))
    for name in sorted(os.listdir(out)):
        hdr = open(j(name), "rb").read(10) if name.endswith(".npy") else b""
        assert not hdr or hdr[:6] == b"\x93NUMPY", name
    print("wrote fixtures to", out)


def check_npy(path, want, failures):
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version != (1, 0):
            failures.append("%s: format version %s, want 1.0" % (path, version))
            return
        _, fortran, _ = np.lib.format.read_array_header_1_0(f)
        if fortran or f.tell() % 64:  # numpy aligns the data to 64 bytes
            failures.append("%s: version %s, fortran %s, data at %d" %
                            (path, version, fortran, f.tell()))
    got = np.load(path)
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        failures.append("%s: got %s %s %r, want %s %s %r" %
                        (path, got.dtype, got.shape, got, want.dtype, want.shape, want))


def check_npz(path, method, failures):
    want = npz_members()
    with zipfile.ZipFile(path) as z:
        if z.testzip() is not None:
            failures.append("%s: bad CRC" % path)
        names = [i.filename for i in z.infolist()]
        if names != [k + ".npy" for k in want]:
            failures.append("%s: members %s" % (path, names))
        for info in z.infolist():
            if info.compress_type != method:
                failures.append("%s: %s compress_type %d" % (path, info.filename,
                                                             info.compress_type))
    with np.load(path) as got:
        for k, v in want.items():
            if k not in got or got[k].dtype != v.dtype or got[k].shape != v.shape or \
                    not np.array_equal(got[k], v):
                failures.append("%s: member %s differs" % (path, k))


def check(out):
    """Verify what test_npy wrote: numpy must read it and see the formulas."""
    w = lambda name: os.path.join(out, "written", name)
    failures = []
    for dt in DTYPES:
        check_npy(w(dt + ".npy"), formula(dt).reshape(SHAPE), failures)
    check_npy(w("scalar.npy"), np.array(2.5), failures)
    check_npy(w("unicode.npy"), unicode_array(), failures)
    check_npy(w("unicode_empty.npy"), np.array(["", ""]), failures)
    check_npy(w("empty.npy"), np.zeros((0, 3), np.float32), failures)
    check_npz(w("stored.npz"), zipfile.ZIP_STORED, failures)
    check_npz(w("deflated.npz"), zipfile.ZIP_DEFLATED, failures)
    with np.load(w("none.npz")) as z:
        if list(z.keys()):
            failures.append("none.npz is not empty")
    stray = [n for n in os.listdir(os.path.join(out, "written")) if ".tmp" in n]
    if stray:
        failures.append("temporary files left behind: %s" % stray)
    for f in failures:
        print("FAIL", f)
    print("numpy read back %s: %s" % (os.path.join(out, "written"),
                                       "FAILED" if failures else "ok"))
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2:
        generate(argv[1])
        return 0
    if len(argv) == 3 and argv[1] == "--check":
        return check(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
