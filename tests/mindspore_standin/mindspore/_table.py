"""The API table: ../shared/mindspore-api.json, read once at import.

Every public callable of the stand-in gets its argument binding from the table entry
of the same name: positional order, defaults, keyword-only markers, *args/**kwargs.
An implementation only states the parameter names (no defaults); `implements`
checks at import time that they are exactly the table's, so the table and the code
cannot drift apart silently.

Table conventions (see docs/mindspore-standin.md):
  ["x", "<required>"]        a required parameter, no default
  ["*", "<kwonly-marker>"]   the parameters after it are keyword-only
  ["*args", "<varargs>"]     *args
  ["**kw", "<varkw>"]        **kw
  ["dtype", "mstype.float32"] a default recorded as MindSpore source text: the
                             stand-in resolves 'mstype.<name>' to its dtype object;
                             no other string default is interpreted (they are strings).
"""
import functools
import inspect
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
# tests/mindspore_standin/mindspore -> repository root -> ../shared (or ./shared where a
# checkout carries one)
_REPO = os.path.join(_HERE, "..", "..", "..")
_CANDIDATES = [os.path.join(_REPO, "..", "shared", "mindspore-api.json"),
               os.path.join(_REPO, "shared", "mindspore-api.json")]
_DEFAULT_TABLE = next((c for c in _CANDIDATES if os.path.isfile(c)), _CANDIDATES[0])
TABLE_PATH = os.path.normpath(os.environ.get("MINDSPORE_STANDIN_API", _DEFAULT_TABLE))

REQUIRED = "<required>"
KWONLY = "<kwonly-marker>"
VARARGS = "<varargs>"
VARKW = "<varkw>"


def _load():
    try:
        with open(TABLE_PATH, "r", encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ImportError("mindspore stand-in: cannot read the API table %s: %s "
                          "(set MINDSPORE_STANDIN_API)" % (TABLE_PATH, e)) from None
    if not isinstance(data, list):
        raise ImportError("mindspore stand-in: %s is not a JSON list" % TABLE_PATH)
    out = {}
    for e in data:
        api = e.get("api")
        if not isinstance(api, str) or not api.startswith("mindspore."):
            raise ImportError("mindspore stand-in: bad table entry %r" % (e,))
        if api in out:
            raise ImportError("mindspore stand-in: %s listed twice in the table" % api)
        out[api] = e
    return out


ENTRIES = _load()

_dtype_resolver = None  # set by _dtype (avoids an import cycle)


def _resolve_default(api, value):
    if isinstance(value, str) and value.startswith("mstype."):
        d = _dtype_resolver(value[len("mstype."):]) if _dtype_resolver else None
        if d is None:
            raise ImportError("mindspore stand-in: %s: default %r names no dtype" % (api, value))
        return d
    return value


def signature_of(api, with_self=False):
    """inspect.Signature built from the table entry `api`."""
    e = ENTRIES.get(api)
    if e is None:
        raise KeyError("%s is not in the API table" % api)
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)] if with_self else []
    kind = P.POSITIONAL_OR_KEYWORD
    for name, default in e["signature"]:
        if default == KWONLY:
            kind = P.KEYWORD_ONLY
            continue
        if default == VARARGS:
            params.append(P(name.lstrip("*"), P.VAR_POSITIONAL))
            kind = P.KEYWORD_ONLY
            continue
        if default == VARKW:
            params.append(P(name.lstrip("*"), P.VAR_KEYWORD))
            continue
        if default == REQUIRED:
            params.append(P(name, kind))
        else:
            params.append(P(name, kind, default=_resolve_default(api, default)))
    return inspect.Signature(params)


def _check_impl(api, fn, sig):
    """The implementation's own parameter list must be the table's, without defaults."""
    got = inspect.signature(fn)
    want = [(p.name, p.kind) for p in sig.parameters.values()]
    have = [(p.name, p.kind) for p in got.parameters.values()]
    if want != have:
        raise ImportError("mindspore stand-in: implementation of %s takes %s, the table says %s"
                          % (api, have, want))
    for p in got.parameters.values():
        if p.default is not inspect.Parameter.empty:
            raise ImportError("mindspore stand-in: implementation of %s sets its own default for %s; "
                              "defaults come from the table" % (api, p.name))


def bind(api, sig, args, kwargs):
    try:
        ba = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError("%s: %s (signature from mindspore-api.json: %s)" % (api, e, sig)) from None
    ba.apply_defaults()
    return ba


def implements(api):
    """Decorator for a function or a class (its __init__) implementing table entry `api`."""
    def deco(obj):
        if inspect.isclass(obj):
            init = obj.__dict__["__init__"]
            sig = signature_of(api, with_self=True)
            _check_impl(api, init, sig)

            @functools.wraps(init)
            def __init__(*args, **kwargs):
                ba = bind(api, sig, args, kwargs)
                return init(*ba.args, **ba.kwargs)
            __init__.__signature__ = sig
            obj.__init__ = __init__
            obj._ms_api = api
            return obj
        sig = signature_of(api)
        _check_impl(api, obj, sig)

        @functools.wraps(obj)
        def wrapper(*args, **kwargs):
            ba = bind(api, sig, args, kwargs)
            return obj(*ba.args, **ba.kwargs)
        wrapper.__signature__ = sig
        wrapper._ms_api = api
        return wrapper
    return deco


def unimplemented(api):
    """A listed API the stand-in does not implement: calling it raises NotImplementedError."""
    short = api.rsplit(".", 1)[1]

    def stub(*args, **kwargs):
        raise NotImplementedError(
            "%s is listed in mindspore-api.json but the MindSpore stand-in does not implement it "
            "(tests/mindspore_standin; see docs/mindspore-standin.md)" % api)
    stub.__name__ = stub.__qualname__ = short
    stub.__doc__ = "Not implemented by the stand-in: %s" % api
    stub._ms_api = api
    stub._ms_unimplemented = True
    return stub


def not_in_facts(api, what):
    """An argument value or behaviour of an implemented API that the facts do not settle."""
    return NotImplementedError("%s: %s is not settled by mindspore-api.json / facts.md, so the "
                               "MindSpore stand-in does not emulate it" % (api, what))
