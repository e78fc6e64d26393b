"""mindspore.nn.Cell, SequentialCell, CellList: attribute registration and naming.

Naming follows the table entry 'mindspore.nn.Cell' (notes): a Parameter assigned to
attribute 'x' is stored under key 'x' and, when unnamed, takes the name 'x'; assigning a
child Cell with auto_prefix=True calls child.update_parameters_name(attr + '.'), which
renames every parameter of the child to prefix + its attribute path; Parameter(name=...)
survives only for top-level parameters and ParameterTuple items. So checkpoint keys are
attribute paths. SequentialCell/CellList children are '0', '1', ... (their entries).
"""
import collections

from . import _amp
from ._table import implements, not_in_facts
from ._tensor import Parameter, PARAMETER_NAME_DEFAULT


class _ParameterTuple(tuple):
    """Internal: the ParameterTuples nn.LSTM keeps its weights in (w_ih_list, ...).
    Items are stored under their own names (table 'mindspore.nn.LSTM' notes). Not exported:
    ParameterTuple is not in the table."""


def _contains_cell_or_param(v):
    return isinstance(v, (list, tuple, dict)) and any(
        isinstance(x, (Cell, Parameter)) for x in (v.values() if isinstance(v, dict) else v))


# mindspore.nn.Cell (table entry 'mindspore.nn.Cell')
@implements("mindspore.nn.Cell")
class Cell:
    def __init__(self, auto_prefix, flags):
        if flags is not None and not isinstance(flags, dict):
            raise TypeError("mindspore.nn.Cell: flags must be a dict or None")
        d = self.__dict__
        d["_params"] = collections.OrderedDict()
        d["_cells"] = collections.OrderedDict()
        d["_params_list"] = collections.OrderedDict()
        d["_auto_prefix"] = bool(auto_prefix)
        d["_flags"] = dict(flags or {})
        # 'Cell.training defaults to False (eval); call set_train(True) to train.'
        d["training"] = False

    # -- registration ----------------------------------------------------------------
    def _registry(self, what):
        if "_params" not in self.__dict__:
            raise AttributeError("mindspore.nn.Cell: super().__init__() must be called before "
                                 "assigning %s to %s" % (what, type(self).__name__))
        return self.__dict__

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            reg = self._registry("a Parameter")
            if name in reg["_cells"]:
                raise TypeError("mindspore.nn.Cell: attribute %r is a Cell, cannot become a Parameter" % name)
            if value._name is None or value._name == PARAMETER_NAME_DEFAULT:
                value.name = name  # 'name None -> the attribute (variable) name'
            reg["_params"][name] = value
            d.pop(name, None)
        elif isinstance(value, _ParameterTuple):
            reg = self._registry("a ParameterTuple")
            for item in value:
                if not isinstance(item, Parameter) or item._name is None:
                    raise TypeError("internal: ParameterTuple items must be named Parameters")
                reg["_params"][item.name] = item  # items keep their own names
            reg["_params_list"][name] = value
        elif isinstance(value, Cell):
            reg = self._registry("a Cell")
            if name in reg["_params"]:
                raise TypeError("mindspore.nn.Cell: attribute %r is a Parameter, cannot become a Cell" % name)
            if reg["_auto_prefix"]:
                value.update_parameters_name(name + ".")
            reg["_cells"][name] = value
            d.pop(name, None)
        elif value is None and "_params" in d and (name in d["_params"] or name in d["_cells"]):
            (d["_params"] if name in d["_params"] else d["_cells"])[name] = None
        elif "_params" in d and name in d["_params"]:
            raise TypeError("mindspore.nn.Cell: attribute %r is a Parameter; assign a Parameter or None" % name)
        elif "_params" in d and name in d["_cells"]:
            raise TypeError("mindspore.nn.Cell: attribute %r is a Cell; assign a Cell or None" % name)
        else:
            if _contains_cell_or_param(value):
                raise not_in_facts("mindspore.nn.Cell",
                                   "a list/tuple/dict of Cells or Parameters as an attribute "
                                   "(use nn.CellList / nn.SequentialCell)")
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for reg in ("_params", "_cells", "_params_list"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    def __delattr__(self, name):
        d = self.__dict__
        for reg in ("_params", "_cells", "_params_list"):
            r = d.get(reg)
            if r is not None and name in r:
                del r[name]
                return
        object.__delattr__(self, name)

    def insert_child_to_cell(self, child_name, child_cell):
        if not isinstance(child_name, str) or not child_name or "." in child_name:
            raise KeyError("mindspore.nn.Cell.insert_child_to_cell: child name %r must be a "
                           "non-empty str without '.'" % (child_name,))
        if child_cell is not None and not isinstance(child_cell, Cell):
            raise TypeError("mindspore.nn.Cell.insert_child_to_cell: child must be a Cell")
        if child_name in self._registry("a Cell")["_params"]:
            raise KeyError("mindspore.nn.Cell.insert_child_to_cell: %r is a Parameter" % child_name)
        self._cells[child_name] = child_cell

    # -- traversal -----------------------------------------------------------------------
    def cells_and_names(self, cells=None, name_prefix=""):
        seen = cells if cells is not None else set()
        if id(self) in seen:
            return
        seen.add(id(self))
        yield name_prefix, self
        for name, cell in self._cells.items():
            if cell is not None:
                prefix = name_prefix + "." + name if name_prefix else name
                yield from cell.cells_and_names(seen, prefix)

    def name_cells(self):
        return collections.OrderedDict((n, c) for n, c in self._cells.items() if c is not None)

    def cells(self):
        return self.name_cells().values()

    def parameters_and_names(self, name_prefix="", expand=True):
        """(attribute path, Parameter) for every parameter once, parents first."""
        cells = self.cells_and_names(name_prefix=name_prefix) if expand else [(name_prefix, self)]
        seen = set()
        for cell_name, cell in cells:
            for par_name, par in cell._params.items():
                if par is not None and id(par) not in seen:
                    seen.add(id(par))
                    yield (cell_name + "." + par_name if cell_name else par_name), par

    def get_parameters(self, expand=True):
        for _, p in self.parameters_and_names(expand=expand):
            yield p

    def trainable_params(self, recurse=True):
        # 'requires_grad=False only excludes it from trainable_params()' (Parameter notes)
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        return collections.OrderedDict((p.name, p) for p in self.get_parameters(expand=recurse))

    def update_parameters_name(self, prefix="", recurse=True):
        # 'param.name = prefix + name over parameters_and_names()' (Cell notes)
        if not isinstance(prefix, str):
            raise TypeError("mindspore.nn.Cell.update_parameters_name: prefix must be a str")
        for name, p in list(self.parameters_and_names(expand=recurse)):
            p.name = prefix + name

    # -- mode and call -------------------------------------------------------------------
    def set_train(self, mode=True):
        for _, c in self.cells_and_names():
            c.__dict__["training"] = bool(mode)
        return self

    def construct(self, *args, **kwargs):
        # 'Subclass and override construct(self, *args, **kwargs) (base raises)'
        raise AttributeError("%s.construct is not defined: subclass nn.Cell and override construct"
                             % type(self).__name__)

    def __call__(self, *args, **kwargs):
        if "_params" not in self.__dict__:
            raise AttributeError("mindspore.nn.Cell: super().__init__() was not called in %s"
                                 % type(self).__name__)
        if self.__dict__.get("_amp") is not None:
            return _amp.call(self, args, kwargs)  # to_float / auto_mixed_precision settings
        return self.construct(*args, **kwargs)

    def to_float(self, dst_type):
        # named by the mindspore.amp.auto_mixed_precision notes ('network.to_float(dtype)',
        # 'Cells with user to_float() settings are respected'); semantics in _amp.py
        return _amp.to_float(self, dst_type)

    def __repr__(self):
        return "%s<>" % type(self).__name__


def _append_child(container, cell, key=None):
    if not isinstance(cell, Cell):
        raise TypeError("%s: children must be Cells, got %s" % (container._ms_api, type(cell).__name__))
    key = str(len(container._cells)) if key is None else key
    container.insert_child_to_cell(key, cell)
    if container._auto_prefix:
        cell.update_parameters_name(key + ".")


# mindspore.nn.SequentialCell (table entry 'mindspore.nn.SequentialCell')
@implements("mindspore.nn.SequentialCell")
class SequentialCell(Cell):
    def __init__(self, *args):
        Cell.__init__(self)
        api = "mindspore.nn.SequentialCell"
        # 'args: a single list / OrderedDict / Cell, or several Cells as varargs'
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for k, c in args[0].items():
                _append_child(self, c, str(k))
        elif len(args) == 1 and isinstance(args[0], list):
            for c in args[0]:
                _append_child(self, c)
        else:
            for c in args:
                if not isinstance(c, Cell):
                    raise TypeError("%s: arguments must be one list, one OrderedDict or Cells, got %s"
                                    % (api, type(c).__name__))
                _append_child(self, c)

    def append(self, cell):
        _append_child(self, cell)
        return self

    def __getitem__(self, index):
        if not isinstance(index, int):
            raise not_in_facts("mindspore.nn.SequentialCell", "indexing with %s" % type(index).__name__)
        cells = list(self._cells.values())
        return cells[index]

    def __len__(self):
        return len(self._cells)

    def construct(self, input_data):
        # 'construct(input_data): single input threaded through cells'
        for c in self._cells.values():
            input_data = c(input_data)
        return input_data


# mindspore.nn.CellList (table entry 'mindspore.nn.CellList')
@implements("mindspore.nn.CellList")
class CellList(Cell):
    def __init__(self, *args, **kwargs):
        api = "mindspore.nn.CellList"
        extra = set(kwargs) - {"auto_prefix"}
        if extra:
            raise TypeError("%s: unexpected keyword(s) %s; the notes list only auto_prefix" % (api, sorted(extra)))
        # 'kwargs: auto_prefix (default True)'
        Cell.__init__(self, auto_prefix=kwargs.get("auto_prefix", True))
        if len(args) > 1:
            raise not_in_facts(api, "more than one positional argument")
        if args:
            # 'args[0] list -> extend'
            if not isinstance(args[0], list):
                raise TypeError("%s: args[0] must be a list of Cells" % api)
            self.extend(args[0])

    def append(self, cell):
        _append_child(self, cell)

    def extend(self, cells):
        for c in cells:
            _append_child(self, c)
        return self

    def insert(self, index, cell):
        if not isinstance(cell, Cell):
            raise TypeError("mindspore.nn.CellList.insert: cell must be a Cell")
        items = list(self._cells.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError("mindspore.nn.CellList.insert: index %d out of range" % index)
        items.insert(index if index >= 0 else n + index, cell)
        self._cells.clear()
        for c in items:
            _append_child(self, c)

    def __getitem__(self, index):
        if not isinstance(index, int):
            raise not_in_facts("mindspore.nn.CellList", "indexing with %s" % type(index).__name__)
        return list(self._cells.values())[index]

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(list(self._cells.values()))

    def construct(self, *inputs):
        # 'no usable construct (container only, iterate/index it)'
        raise NotImplementedError("mindspore.nn.CellList has no usable construct (table notes)")
