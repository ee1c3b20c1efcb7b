"""`Record`: typing.NamedTuple's class syntax without importing `typing` at run time.

`typing` costs ~6 ms of import, a fifth of the whole budget of a `memdir search` call. Type
checkers see `typing.NamedTuple` itself; at run time the same class statement builds a
`collections.namedtuple` subclass with the annotated fields, their defaults, and the
class's own methods and properties. Modules guard annotation-only imports the same way
(`TYPE_CHECKING = False` is understood by mypy as the typing constant).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    import collections

    class _RecordMeta(type):
        def __new__(mcls, name, bases, namespace):
            if not bases:  # `Record` itself
                return super().__new__(mcls, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = [namespace[field] for field in fields if field in namespace]
            base = collections.namedtuple(
                name, fields, defaults=defaults, module=namespace.get("__module__")
            )
            body = {k: v for k, v in namespace.items() if k not in fields}
            body["__slots__"] = ()
            return type(name, (base,), body)

    class Record(metaclass=_RecordMeta):
        pass


__all__ = ["Record"]
