"""The typed public surface: every record a public Memory method returns is exported from
memdir; the Literal aliases equal the tuples the code validates with; Embedder is a
protocol at run time; errors carry what they are about (path, kind, key)."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import types as pytypes
import typing
from pathlib import Path

import pytest

import memdir
from memdir import Memory, NotFoundError, SecretError, search
from memdir.models import CATEGORIES, FACT_STATUSES, SURFACES, TASK_STATES
from memdir.testing import HashEmbedder


def _resolved_hints(function: object, module: pytypes.ModuleType) -> dict[str, object]:
    """get_type_hints with the module's lazy proxies replaced by the real modules (their
    TYPE_CHECKING imports name the same modules)."""
    namespace = dict(vars(module))
    for name, value in list(namespace.items()):
        lazy_name = getattr(value, "__dict__", {}).get("_lazy_name")
        if lazy_name:
            namespace[name] = importlib.import_module(lazy_name)
    source = inspect.getsource(module)
    for line in source.splitlines():  # the TYPE_CHECKING-only names (Embedder, aliases...)
        stripped = line.strip()
        if line.startswith("    from ") and " import " in stripped:
            package, names = stripped[5:].split(" import ")
            base = importlib.import_module(package, module.__package__)
            for name in names.split(", "):
                namespace.setdefault(
                    name,
                    getattr(base, name, None) or importlib.import_module(f"{base.__name__}.{name}"),
                )
    return typing.get_type_hints(function, globalns=namespace)


def _records(annotation: object) -> set[type]:
    """The record classes (NamedTuple-like: `_fields`) inside a return annotation."""
    found: set[type] = set()
    if isinstance(annotation, type) and hasattr(annotation, "_fields"):
        found.add(annotation)
    for arg in typing.get_args(annotation):
        found |= _records(arg)
    return found


def public_returns() -> dict[str, set[type]]:
    out = {}
    for name, function in inspect.getmembers(Memory, inspect.isfunction):
        if name.startswith("_"):
            continue
        module = sys.modules[function.__module__]
        hints = _resolved_hints(function, module)
        out[name] = _records(hints.get("return"))
    for name in ("init_project", "ingest_output", "open_memory"):
        function = getattr(memdir.memory, name)
        out[name] = _records(_resolved_hints(function, memdir.memory).get("return"))
    return out


def test_every_record_a_public_method_returns_is_exported() -> None:
    returns = public_returns()
    assert len(returns) >= 55  # every public method of the facade was looked at
    exported = {getattr(memdir, name) for name in memdir.__all__}
    missing = {
        f"{method} -> {cls.__module__}.{cls.__name__}"
        for method, classes in returns.items()
        for cls in classes
        if cls not in exported
    }
    assert missing == set()
    # the records nested in those answers too (Ingested.applied, Fact.similar...)
    for name in ("Applied", "Similar", "Provenance", "ImportItem", "ImportReport"):
        assert name in memdir.__all__


def test_exports_are_lazy_for_the_cold_start() -> None:
    # the CLI imports memdir: the records of lazily imported tiers load on first use only
    code = (
        "import sys, memdir; before = 'memdir.daily' in sys.modules; "
        "memdir.DailyWrite; print(before, 'memdir.daily' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "True"]
    with pytest.raises(AttributeError):
        memdir.NoSuchName  # noqa: B018


def test_literal_aliases_are_the_validated_vocabularies() -> None:
    from memdir.types import Category, FactStatus, Kind, SearchMode, Surface, TaskState

    assert typing.get_args(Category) == CATEGORIES
    assert typing.get_args(FactStatus) == FACT_STATUSES
    assert typing.get_args(TaskState) == TASK_STATES
    assert typing.get_args(Surface) == SURFACES
    assert typing.get_args(Kind) == search.KINDS
    assert set(typing.get_args(SearchMode)) == {"auto", *search.MODES}


def test_embedder_is_a_protocol_at_run_time() -> None:  # Q2
    assert isinstance(HashEmbedder(), memdir.Embedder)
    assert not isinstance(object(), memdir.Embedder)


def test_errors_carry_their_context(tmp_path: Path) -> None:  # X2, L1
    with Memory(str(tmp_path / "state"), create=True) as memory:
        cases = [
            (lambda: memory.get_fact(999), "fact", 999),
            (lambda: memory.entry("no-such"), "entry", "no-such"),
            (lambda: memory.procedure("no-such"), "procedure", "no-such"),
            (lambda: memory.task("no-such"), "task", "no-such"),
            (lambda: memory.end_session("20200101T000000-abcdef"), "session", None),
            (lambda: memory.daily("2020-01-01"), "daily", "2020-01-01"),
        ]
        for call, kind, key in cases:
            with pytest.raises(NotFoundError) as info:
                call()
            assert info.value.kind == kind
            if key is not None:
                assert info.value.key == key
        with pytest.raises(NotFoundError) as missing_file:
            memory.get("global/none.md")
        assert missing_file.value.kind == "file" and missing_file.value.key == "global/none.md"
        assert missing_file.value.path == str(tmp_path / "state" / "memory" / "global/none.md")
        with pytest.raises(SecretError) as secret:
            memory.add_fact("the key is ghp_" + "a1B2" * 9, "learning")
        assert secret.value.kind == "a GitHub token"
        assert secret.value.field == "" and secret.value.line == 1
    with pytest.raises(NotFoundError) as state:
        Memory(str(tmp_path / "nowhere"))
    assert state.value.kind == "state dir" and state.value.path == str(tmp_path / "nowhere")


def test_every_type_ignore_in_src_says_why() -> None:
    # the reason follows the ignore on its line, or a comment just above names the ignore
    src = Path(memdir.__file__).parent
    bare = []
    for path in sorted(src.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if "type: ignore" not in line:
                continue
            inline = re.search(r"type: ignore\[[^\]]+\]\s*#\s*\S", line)
            above = any(
                lines[k].strip().startswith("#") and "ignore" in lines[k]
                for k in range(max(0, number - 3), number)
            )
            if not (inline or above):
                bare.append(f"{path.relative_to(src)}:{number + 1}")
    assert bare == []


def test_records_are_the_namedtuples_collections_would_build() -> None:  # C
    """Record builds its namedtuples without compiling __new__ per class (the CLI's cold
    start): the same signature, defaults, repr, errors and methods as
    collections.namedtuple's."""
    import collections
    import copy
    import pickle

    from memdir.models import Provenance
    from memdir.records import _namedtuple

    theirs = collections.namedtuple("P", ("a", "b", "c"), defaults=[3], module="m")
    ours = _namedtuple("P", ("a", "b", "c"), [3], "m")
    for attr in ("__doc__", "_fields", "_field_defaults", "__match_args__", "__module__"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert ours.__new__.__doc__ == theirs.__new__.__doc__
    assert ours.__new__.__qualname__ == theirs.__new__.__qualname__
    a, b = theirs(1, 2), ours(1, 2)
    assert (repr(a), a._asdict(), a._replace(b=5)) == (repr(b), b._asdict(), b._replace(b=5))
    assert ours(a=1, b=2, c=4) == (1, 2, 4) and ours._make([1, 2, 3]) == (1, 2, 3)
    assert errors_of(theirs) == errors_of(ours) and len(errors_of(ours)) == 4
    one = _namedtuple("One", ("x",), [], "m")
    assert repr(one(1)) == "One(x=1)" and one._make([2]) == (2,)
    p = Provenance("s", "cli", None)
    assert copy.copy(p) == p and pickle.loads(pickle.dumps(p)) == p


def errors_of(make: typing.Any) -> list[str]:
    """What a namedtuple class says to a call with too few or too many fields, a short
    _make and an unknown _replace field."""
    errors = []
    for args, how in (((), make), ((1, 2, 3, 4), make), (([1],), make._make)):
        try:
            how(*args)
        except TypeError as exc:
            errors.append(str(exc))
    try:
        make(1, 2)._replace(z=1)
    except ValueError as exc:
        errors.append(str(exc))
    return errors
