"""The layer rule and no import cycles (.importlinter): the real tree keeps both contracts,
a planted back-edge or cycle breaks them, and the graph they check sees the lazy imports.
The package is copied to a tmp dir and edited there, then checked with the repo's config."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "memdir"
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAYERS = "Layers: core <- storage"
ACYCLIC = "No import cycles between sibling modules or packages"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the memdir package under `src`, with the repo's contracts."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(CONFIG), "--no-cache"],
        cwd=src.parent,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of src/memdir under tmp_path/src (the `src` dir is returned)."""
    shutil.copytree(SRC, tmp_path / "src" / "memdir", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "src"


def plant(src: Path, module: str, line: str) -> None:
    path = src / "memdir" / module
    path.write_text(path.read_text() + f"\n{line}  # planted\n")


def verdicts(out: str) -> dict[str, str]:
    """Each contract's KEPT or BROKEN from lint-imports' summary (a name may wrap a line)."""
    flat = " ".join(out.split())
    found = {}
    for name in (LAYERS, ACYCLIC):
        rest = flat[flat.index(name) :]
        kept, broken = rest.find(" KEPT"), rest.find(" BROKEN")
        found[name] = "KEPT" if kept != -1 and (broken == -1 or kept < broken) else "BROKEN"
    return found


def test_the_real_tree_keeps_the_contracts() -> None:  # the layer rule, no cycles
    result = lint_imports(SRC.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert verdicts(result.stdout) == {LAYERS: "KEPT", ACYCLIC: "KEPT"}


def test_a_planted_back_edge_breaks_the_layers(copy: Path) -> None:
    plant(copy, "storage/files.py", "import memdir.cli")
    result = lint_imports(copy)
    assert result.returncode == 1
    assert "memdir.storage is not allowed to import memdir.cli" in result.stdout
    assert verdicts(result.stdout)[LAYERS] == "BROKEN"


def test_a_back_edge_behind_type_checking_counts(copy: Path) -> None:
    # a type-only import still ties the layers: the facade's types under a tier
    plant(
        copy, "hot.py", "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .memory import Memory"
    )
    result = lint_imports(copy)
    assert result.returncode == 1
    assert "memdir.hot is not allowed to import memdir.memory" in result.stdout


def test_a_planted_cycle_breaks_acyclic(copy: Path) -> None:
    # two tiers of one layer importing each other: the layers allow it, acyclic does not
    plant(copy, "hot.py", "from . import heartbeat")
    plant(copy, "heartbeat.py", "from . import hot")
    result = lint_imports(copy)
    assert result.returncode == 1
    assert verdicts(result.stdout) == {LAYERS: "KEPT", ACYCLIC: "BROKEN"}


def test_a_part_of_the_facade_never_imports_another(copy: Path) -> None:
    plant(copy, "memory/facts.py", "from . import agent")
    result = lint_imports(copy)
    assert result.returncode == 1
    assert "memdir.memory.facts is not allowed to import memdir.memory.agent" in result.stdout


def lazy_imports() -> list[tuple[str, str]]:
    """(module, what it names in lazy("memdir.x")) for every lazy import under src."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "lazy"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("memdir.")
            ):
                found.append((module, str(node.args[0].value)))
    return found


def test_every_lazy_import_is_seen_by_the_contracts() -> None:
    # lazy("memdir.x") is a string the import graph cannot see: each one is paired with a
    # TYPE_CHECKING import of the same module, which the graph does see (and the contracts
    # count), so a lazy back-edge breaks them as an eager one would
    pairs = lazy_imports()
    assert len(pairs) > 20  # the facade, the index, the entries, the store...
    graph = grimp.build_graph("memdir")
    unseen = [
        (m, x)
        for m, x in pairs
        if m != "memdir.lazy" and not graph.direct_import_exists(importer=m, imported=x)
    ]
    assert unseen == []


def test_the_facade_package_binds_no_name_of_a_part() -> None:
    # importing memory/files.py binds `files` in the package's namespace: a concept module
    # imported under a part's name there would be replaced by the part (init_project once
    # called memory.files.ensure_dir that way)
    package = SRC / "memory"
    parts = {p.stem for p in package.glob("*.py")} - {"__init__"}
    bound = set()
    for node in ast.walk(ast.parse((package / "__init__.py").read_text())):
        if isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module):
            bound |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    assert parts and bound & parts == set()
