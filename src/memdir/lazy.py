"""Modules imported when first used. The CLI starts many times per agent turn and most
calls touch one tier; importing every concept module up front cost ~10 ms a start.

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from . import daily
    else:
        daily = lazy("memdir.daily")

Type checkers see the real module; at run time the first attribute read imports it and
the proxy takes over the module's namespace, so later reads cost what a module's do. The
TYPE_CHECKING import is also what the import contracts (.importlinter) see of a lazy one:
every lazy() has one (tests/test_layers.py checks).
"""

from __future__ import annotations

import importlib


class _LazyModule:
    def __init__(self, name: str) -> None:
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attribute: str) -> object:
        module = importlib.import_module(self.__dict__["_lazy_name"])
        self.__dict__.update(module.__dict__)
        return getattr(module, attribute)


def lazy(name: str) -> object:
    return _LazyModule(name)
