"""`Record`: typing.NamedTuple's class syntax without importing `typing` at run time.

`typing` costs ~6 ms of import, a fifth of the whole budget of a `memdir search` call. Type
checkers see `typing.NamedTuple` itself; at run time the same class statement builds a
namedtuple subclass with the annotated fields, their defaults, and the class's own methods
and properties. The namedtuple is collections.namedtuple's, built without compiling its
__new__ again for every class (_namedtuple; tests/test_public_types.py compares the two).
Modules guard annotation-only imports the same way (`TYPE_CHECKING = False` is understood
by mypy as the typing constant).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    import sys
    from _collections import _tuplegetter

    _CODES = {}  # number of fields -> the code of a namedtuple's __new__ for that many

    def _new(name, fields, defaults):
        """collections.namedtuple's __new__ (same signature, defaults, errors), its code
        compiled once per number of fields and renamed: namedtuple compiles it again for
        every class, ~35 of which load on a CLI call (~1 ms of eval)."""
        code = _CODES.get(len(fields))
        if code is None:
            args = ", ".join(f"_{i}" for i in range(len(fields)))
            lam = (
                f"lambda _cls, {args}: _tuple_new(_cls, ({args}{',' if len(fields) == 1 else ''}))"
            )
            code = _CODES[len(fields)] = eval(lam, {"_tuple_new": tuple.__new__}).__code__
        code = code.replace(co_varnames=("_cls", *fields), co_name="__new__")
        scope = {"_tuple_new": tuple.__new__, "__builtins__": {}, "__name__": f"namedtuple_{name}"}
        new = type(_new)(code, scope, "__new__", tuple(defaults) if defaults else None)
        new.__doc__ = f"Create new instance of {name}({', '.join(fields)})"
        return new

    def _namedtuple(name, fields, defaults, module):
        """collections.namedtuple(name, fields, defaults=defaults, module=module) for
        fields that are valid, distinct identifiers (annotations are)."""
        fields = tuple(sys.intern(f) for f in fields)
        count = len(fields)
        arg_list = ", ".join(fields)
        repr_fmt = "(" + ", ".join(f"{f}=%r" for f in fields) + ")"
        tuple_new = tuple.__new__

        @classmethod
        def _make(cls, iterable):
            result = tuple_new(cls, iterable)
            if len(result) != count:
                raise TypeError(f"Expected {count} arguments, got {len(result)}")
            return result

        _make.__func__.__doc__ = f"Make a new {name} object from a sequence or iterable"

        def _replace(self, /, **kwds):
            result = self._make(map(kwds.pop, fields, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return result

        _replace.__doc__ = f"Return a new {name} object replacing specified fields with new values"

        def __repr__(self):
            "Return a nicely formatted representation string"
            return self.__class__.__name__ + repr_fmt % self

        def _asdict(self):
            "Return a new dict which maps field names to their values."
            return dict(zip(self._fields, self, strict=False))

        def __getnewargs__(self):
            "Return self as a plain tuple.  Used by copy and pickle."
            return tuple(self)

        new = _new(name, fields, defaults)
        for method in (new, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):
            method.__qualname__ = f"{name}.{method.__name__}"
        namespace = {
            "__doc__": f"{name}({arg_list})",
            "__slots__": (),
            "_fields": fields,
            "_field_defaults": dict(zip(fields[count - len(defaults) :], defaults, strict=True))
            if defaults
            else {},
            "__new__": new,
            "_make": _make,
            "_replace": _replace,
            "__repr__": __repr__,
            "_asdict": _asdict,
            "__getnewargs__": __getnewargs__,
            "__match_args__": fields,
        }
        for index, field in enumerate(fields):
            namespace[field] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
        result = type(name, (tuple,), namespace)
        if module is not None:
            result.__module__ = module
        return result

    class _RecordMeta(type):
        def __new__(mcls, name, bases, namespace):
            if not bases:  # `Record` itself
                return super().__new__(mcls, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = [namespace[field] for field in fields if field in namespace]
            base = _namedtuple(name, fields, defaults, namespace.get("__module__"))
            body = {k: v for k, v in namespace.items() if k not in fields}
            body["__slots__"] = ()
            return type(name, (base,), body)

    class Record(metaclass=_RecordMeta):
        pass


__all__ = ["Record"]
