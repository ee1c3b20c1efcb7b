"""Exact lines of a memory file (E4) and the walls around the memory root (X1): windows at
the edges of a file, bad windows, and every way of pointing outside the root — through the
library, the CLI (a real process) and the memory_get tool."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.errors import NotFoundError, ValidationError
from memdir.tools import call_tool
from storeconfig import write_config

LINES = [f"line {n}" for n in range(1, 8)]  # seven lines


@pytest.fixture
def root(state_dir: Path) -> Path:
    """A memory root with a seven-line entry and a few odd files."""
    memory = state_dir / "memory"
    (memory / "global").mkdir(parents=True)
    (memory / "global" / "seven.md").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (memory / "global" / "no-newline.md").write_text("first\nlast", encoding="utf-8")
    (memory / "global" / "empty.md").write_text("", encoding="utf-8")
    (memory / "global" / "blank.md").write_text("\n", encoding="utf-8")
    return memory


def window(mem: Memory, path: str, start: int = 1, count: int | None = None) -> list[Any]:
    found = mem.get(path, from_line=start, lines=count)
    return [list(pair) for pair in found.lines]


# -- windows -----------------------------------------------------------------------------


def test_exact_lines_with_their_numbers(root: Path, memory: Memory) -> None:  # E4
    got = memory.get("global/seven.md", from_line=3, lines=2)
    assert got.to_dict() == {
        "path": "global/seven.md",
        "from_line": 3,
        "total_lines": 7,
        "lines": [{"n": 3, "text": "line 3"}, {"n": 4, "text": "line 4"}],
    }
    assert got.text == "line 3\nline 4\n"
    assert memory.get("global/seven.md").text == "\n".join(LINES) + "\n"  # default: all


def test_windows_at_the_edges_of_a_file(root: Path, memory: Memory) -> None:  # E4
    assert window(memory, "global/seven.md", 1, 1) == [[1, "line 1"]]
    assert window(memory, "global/seven.md", 7, 1) == [[7, "line 7"]]
    assert window(memory, "global/seven.md", 6, 50) == [[6, "line 6"], [7, "line 7"]]
    assert window(memory, "global/seven.md", 7) == [[7, "line 7"]]
    for past in (8, 9, 1000):
        got = memory.get("global/seven.md", from_line=past, lines=3)
        assert (got.lines, got.total, got.text) == ([], 7, "")
    # no final line break: the last line is still a line
    assert window(memory, "global/no-newline.md") == [[1, "first"], [2, "last"]]
    assert memory.get("global/no-newline.md", from_line=2).total == 2
    # an empty file has no lines; a lone line break is one empty line
    empty = memory.get("global/empty.md")
    assert (empty.lines, empty.total) == ([], 0)
    assert (memory.get("global/empty.md", from_line=5).lines, empty.total) == ([], 0)
    blank = memory.get("global/blank.md")
    assert (blank.lines, blank.total) == ([(1, "")], 1)


@pytest.mark.parametrize(
    "start, count", [(0, None), (-1, None), (1, 0), (1, -3), (True, None), (1, 1.5)]
)
def test_bad_windows_are_refused(
    root: Path, memory: Memory, start: Any, count: Any
) -> None:  # E4 Z
    with pytest.raises(ValidationError, match="a whole number from 1"):
        memory.get("global/seven.md", from_line=start, lines=count)


def test_cli_get(root: Path, run: Callable[..., Any]) -> None:  # E4 C
    res = run("get", "global/seven.md", "--from", "2", "--lines", "3", "--json")
    assert res.code == 0, res.err
    assert res.json()["lines"] == [{"n": n, "text": f"line {n}"} for n in (2, 3, 4)]
    assert res.json()["total_lines"] == 7
    assert run("get", "global/seven.md", "--from", "6").out == "line 6\nline 7\n"
    assert run("get", "global/no-newline.md").out == "first\nlast\n"
    past = run("get", "global/seven.md", "--from", "20", "--json")
    assert past.code == 0 and past.json()["lines"] == [] and past.json()["total_lines"] == 7
    empty = run("get", "global/empty.md")
    assert (empty.code, empty.out) == (0, "")
    for args in (["--from", "0"], ["--from", "-2"], ["--lines", "0"], ["--lines", "-1"]):
        res = run("get", "global/seven.md", *args)
        assert res.code == 1 and res.out == "", args
        assert res.err.startswith("memdir: error: bad ") and res.err.count("\n") == 1, res.err
    missing = run("get", "global/nope.md")
    assert missing.code == 1 and "no file global/nope.md" in missing.err
    assert missing.err.count("\n") == 1


# -- the walls ---------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("TOP SECRET\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../config.toml",
        "global/../../config.toml",
        "../../outside/secret.md",
        "",
        "global/\0.md",
    ],
)
def test_paths_out_of_the_root_are_refused(
    root: Path, memory: Memory, outside: Path, state_dir: Path, path: str
) -> None:  # X1 E4
    write_config(state_dir, "[memory]\n")
    with pytest.raises(ValidationError) as caught:
        memory.get(path)
    assert "TOP SECRET" not in str(caught.value)


def test_absolute_paths(root: Path, memory: Memory, outside: Path) -> None:  # X1 E4
    with pytest.raises(ValidationError, match="outside the memory root"):
        memory.get(str(outside / "secret.md"))
    with pytest.raises(ValidationError, match="outside the memory root"):
        memory.get("/etc/hostname")
    with pytest.raises(ValidationError, match="outside the memory root"):
        memory.get(str(root / ".." / "config.toml"))
    # an absolute path inside the root is fine (recall names files that way)
    got = memory.get(str(root / "global" / "seven.md"), from_line=7)
    assert (got.path, got.lines) == ("global/seven.md", [(7, "line 7")])


def test_symlinks_pointing_out_are_refused(
    root: Path, memory: Memory, outside: Path, run: Callable[..., Any]
) -> None:  # X1 E4
    (root / "global" / "evil.md").symlink_to(outside / "secret.md")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "procedures").symlink_to(outside, target_is_directory=True)
    refused = "outside the memory root|not a memory file"
    for path in (
        "global/evil.md",
        "linked/secret.md",
        "linked",
        str(root / "global/evil.md"),
        "procedures/secret.md",
    ):
        with pytest.raises(ValidationError, match=refused):
            memory.get(path)
        res = run("get", path)
        assert res.code == 1 and res.out == "" and "TOP SECRET" not in res.err
        assert res.err.count("\n") == 1
    # a symlink that stays inside the root is just another name for the file
    (root / "global" / "alias.md").symlink_to(root / "global" / "seven.md")
    assert memory.get("global/alias.md", from_line=1, lines=1).lines == [(1, "line 1")]


@pytest.mark.sqlite_only
def test_binary_files_and_folders_are_refused(
    root: Path, memory: Memory, run: Callable[..., Any]
) -> None:  # E4 X1
    memory.add_fact("The build uses make", "convention")
    assert (root / "memory.db").exists()
    (root / "global" / "binary.md").write_bytes(b"\x00\x01junk")
    with pytest.raises(ValidationError, match="binary.md is not a text file"):
        memory.get("global/binary.md")
    with pytest.raises(ValidationError, match="memory.db' is not a memory file"):
        memory.get("memory.db")  # X1: get reads the layout's markdown files only
    for folder in ("global", "global/", "."):
        with pytest.raises(ValidationError, match="not a memory file"):
            memory.get(folder)
    (root / "global" / "folder.md").mkdir()
    with pytest.raises(ValidationError, match="is a folder"):
        memory.get("global/folder.md")
    with pytest.raises(NotFoundError):
        memory.get("global/missing.md")
    res = run("get", "global/binary.md")
    assert res.code == 1 and res.err.count("\n") == 1 and "not a text file" in res.err
    res = run("get", "global/folder.md")
    assert res.code == 1 and res.err.count("\n") == 1 and "is a folder" in res.err


def test_memory_get_tool(root: Path, memory: Memory, outside: Path) -> None:  # E4 A1 A3 X1
    assert call_tool(
        memory, "memory_get", {"path": "global/seven.md", "from_line": 5, "lines": 2}
    ) == {
        "path": "global/seven.md",
        "from_line": 5,
        "total_lines": 7,
        "lines": [{"n": 5, "text": "line 5"}, {"n": 6, "text": "line 6"}],
    }
    assert len(call_tool(memory, "memory_get", {"path": "global/seven.md"})["lines"]) == 7
    for bad in (
        {"path": "global/seven.md", "from_line": 0},
        {"path": "global/seven.md", "lines": -1},
        {"from_line": 1},
        {"path": "../config.toml"},
        {"path": str(outside / "secret.md")},
    ):
        with pytest.raises(ValidationError):
            call_tool(memory, "memory_get", bad)
    # the tool is read-only: a subagent session may use it
    parent = memory.start_session()
    child = memory.start_session(parent=parent.id)
    with Memory(session=child.id) as sub:
        assert sub.read_only
        got = call_tool(sub, "memory_get", {"path": "global/seven.md", "from_line": 7})
        assert got["lines"] == [{"n": 7, "text": "line 7"}]
    assert os.path.exists(root / "global" / "seven.md")
