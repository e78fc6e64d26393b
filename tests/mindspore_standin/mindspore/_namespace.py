"""The strict public namespaces: mindspore, mindspore.nn, mindspore.ops, ...

A public module holds exactly
  - every API of mindspore-api.json under it: the implementation, or a stub that raises
    NotImplementedError naming the API;
  - the framework names the table's notes and the facts use but do not list as entries
    (FRAMEWORK below, each with its source).
Any other name is an AttributeError (module __getattr__), so no torch function, helper
or module can be reached through the namespace.
"""
import sys
import types

from . import _table


class StrictModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise AttributeError("module %r has no attribute %r: %s.%s is not in mindspore-api.json "
                             "(MindSpore stand-in)" % (self.__name__, name, self.__name__, name))

    def __dir__(self):
        return sorted(k for k in self.__dict__ if not k.startswith("_"))


def build(package, implemented, framework):
    """Fill the package module and create its submodules; returns {module name: module}."""
    mods = {package.__name__: package}

    def module(path):
        m = mods.get(path)
        if m is None:
            parent = module(path.rsplit(".", 1)[0])
            m = StrictModule(path, "MindSpore stand-in namespace %s (mindspore-api.json)" % path)
            m.__package__ = path
            mods[path] = m
            sys.modules[path] = m
            setattr(parent, path.rsplit(".", 1)[1], m)
        return m

    impl = {}
    for obj in implemented:
        api = obj._ms_api
        if api in impl:
            raise ImportError("mindspore stand-in: %s implemented twice" % api)
        if api not in _table.ENTRIES:
            raise ImportError("mindspore stand-in: %s is implemented but not in the table" % api)
        impl[api] = obj
    for api in _table.ENTRIES:
        path, name = api.rsplit(".", 1)
        setattr(module(path), name, impl.get(api) or _table.unimplemented(api))
    for api, (obj, _source) in framework.items():
        path, name = api.rsplit(".", 1)
        if api in _table.ENTRIES:
            raise ImportError("mindspore stand-in: framework name %s is a table entry" % api)
        setattr(module(path), name, obj)
    return mods
