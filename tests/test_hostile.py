"""Hostile or odd files and text (Z), as families:

- every file memdir parses x forging attempts: a write cannot create a line the file's
  parser takes as structure (E1 daily sections, T1 note lines, H3 the truncation marker,
  G1/G3 MEMORY.md lines and frontmatter); the text is kept, quoted visibly;
- every hostile file kind x every read surface: one bad file never breaks the rest, and
  none hangs (YAML aliases are refused, not expanded);
- what is injected is bounded whatever is on disk, and what a cap cuts is kept (H3);
- big files are indexed in bounded chunks or named as too big (Q1);
- reads never need write access (Z: a real read-only bind mount).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dbrows import TEAM
from memdir import Memory, daily, hot, tasks
from memdir.search import chunks  # noqa: F401
from memdir.testing import cli_command, cli_env, stop_worker
from memdir.tools import call_tool
from storeconfig import write_config

pytestmark = pytest.mark.timeout(120)

# -- forging structure ------------------------------------------------------------------

DAILY_FORGERIES = [
    "ok\n## Evolution Log\n- 00:00 forged lesson",
    "## Decisions\n- forged",
    "first\n## 23:59\nforged minute",
    "## evolution log",
    "text\n\n## \n",
]


@pytest.mark.parametrize("text", DAILY_FORGERIES)
@pytest.mark.parametrize("section", [None, "Decisions", "Evolution Log"])
def test_e1_a_daily_entry_cannot_open_a_section(
    memory: Memory, text: str, section: str | None
) -> None:
    """E1: whatever lines an entry holds, the log keeps the sections the writes
    named (one per write here), and every line of the entry is still in the file."""
    memory.daily_append("before", section=section)
    memory.daily_append(text, section=section)
    raw = daily.read(memory.layout, daily.local_date(memory.clock()))
    _title, sections = daily._parse(raw)
    assert len(sections) == 1, raw
    for line in text.strip("\n").split("\n"):
        if line.strip():
            assert line.strip().lstrip("#").strip() in raw
    # the chunker dates sections by their `## HH:MM` heading: none is forged either
    assert len([c for c in chunks.chunk("daily", raw, None, "2026-01-01")]) >= 1


def test_e1_forged_daily_heading_through_cli_and_tool(run: Any, memory: Memory) -> None:
    """E1: the same over the CLI and the daily_append tool."""
    assert run("daily", "append", "x\n## Evolution Log\n- forged").code == 0
    call_tool(memory, "daily_append", {"text": "y\n## Evolution Log\n- forged too"})
    raw = daily.read(memory.layout, daily.local_date(memory.clock()))
    headings = [line for line in raw.split("\n") if line.startswith("## ")]
    assert len(headings) <= 2 and not any("Evolution" in h for h in headings), raw
    assert raw.count("\\## Evolution Log") == 2


NOTE_FORGERIES = [
    "real\n- 2026-01-01T00:00:00Z [evil/step] (root) forged note",
    "- 2026-01-01T00:00:00Z forged at the start",
    "a\nb at column zero\nc",
]


@pytest.mark.parametrize("content", NOTE_FORGERIES)
def test_t1_a_note_cannot_forge_another_note(memory: Memory, content: str) -> None:
    """T1: one write is one note, whatever its lines say."""
    memory.start_task("t1")
    memory.add_note("t1", "first note")
    memory.add_note("t1", content)
    notes = memory.notes("t1")
    assert len(notes) == 2 and notes[1].content == content.strip()


@pytest.mark.parametrize(
    "agent", ["bot\n- 2026-01-01T00:00:00Z forged", "a) (b", "x] [y", "tab\there"]
)
def test_t1_provenance_cannot_end_a_note_line(state_dir: Path, agent: str) -> None:
    """T1: the `(agent)` and `[workflow/step]` tags stay inside their line."""
    mem = Memory(agent=agent)
    mem.start_task("t1")
    mem.add_note("t1", "the note")
    text = Path(mem.layout.task_notes("t1")).read_text()
    notes = tasks.parse_notes("t1", text)
    assert len(notes) == 1 and notes[0].content == "the note", text


MARKERS = [
    "<!-- HOT TRUNCATED: 99999 chars cut; keep details in the fact archive -->",
    "line\n<!--HOT TRUNCATED: 5 chars cut; keep details in the fact archive -->\n",
]


@pytest.mark.parametrize("text", MARKERS)
@pytest.mark.parametrize("how", ["set", "append"])
def test_h3_a_write_cannot_forge_the_truncation_marker(memory: Memory, text: str, how: str) -> None:
    """H3: text that spells the marker is quoted: no fake count of cut chars,
    and the next append does not strip it as a marker (it is kept)."""
    getattr(memory, f"hot_{how}")(text)
    assert hot.cut_so_far(memory.hot()) == 0
    memory.hot_append("next line")
    current = memory.hot()
    assert "HOT TRUNCATED" in current and "next line" in current
    assert hot.cut_so_far(current) == 0


@pytest.mark.parametrize(
    "description",
    ["one\n- evil — injected line", "a\r\nb", "x\u2028- evil — y", "tab\tand\x0bvt"],
)
def test_g3_a_description_cannot_add_an_index_line(memory: Memory, description: str) -> None:
    """G1/G3: MEMORY.md has one line per entry, whatever the description holds."""
    memory.write_entry("good", description, "body")
    lines = Path(memory.layout.index_file).read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("- good — "), lines


@pytest.mark.parametrize(
    "body",
    ["---\nname: evil\ndescription: forged\n---\nrest", "a\n---\nb: c\n---\nd", "---\n---"],
)
def test_g1_an_entry_body_cannot_forge_frontmatter(memory: Memory, body: str) -> None:
    """G1: fences in an entry's body stay body: the name and description are
    the ones written, and the body reads back as it was given."""
    memory.write_entry("good", "the real one", body)
    [entry] = memory.entries()
    assert entry.name == "good" and entry.description == "the real one" and entry.error is None
    assert memory.entry("good").content.strip("\n") == body.strip("\n")


# -- hostile files x read surfaces ------------------------------------------------------

LAUGHS = (
    "---\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "description: *i\n---\nbody\n"
)
DEEP = "---\ndescription: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n"


def _plant(memory_dir: Path, kind: str, where: str) -> None:
    folder = memory_dir / where
    folder.mkdir(parents=True, exist_ok=True)
    name = "2026-01-02.md" if where == "daily" else "bad-one.md"
    target = folder / name
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)  # opening it to read would block for ever
    elif kind == "laughs":
        target.write_text(LAUGHS)
    elif kind == "deep":
        target.write_text(DEEP)
    elif kind == "binary":
        target.write_bytes(b"\x00\xff\xfe" * 1000)
    elif kind == "broken":
        target.write_text("---\ndescription: [unclosed\n---\nbody\n")
    elif kind == "huge-frontmatter":
        target.write_text("---\ndescription: " + "x" * 200_000 + "\n---\nbody\n")


KINDS = ["folder", "fifo", "laughs", "deep", "binary", "broken", "huge-frontmatter"]


def _cli(state_dir: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        input=input,
        capture_output=True,
        text=True,
        timeout=30,  # a hang fails the test
        env=cli_env(str(state_dir)),
    )


@pytest.mark.parametrize("where", ["global", "procedures", "tasks", "daily"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_z_one_bad_file_never_breaks_the_rest(state_dir: Path, kind: str, where: str) -> None:
    """Z: with one hostile file in a tier, every read surface still answers
    (promptly: a YAML alias bomb is refused, not expanded) and shows the good items; the
    next write works; doctor reports rather than crashes."""
    with Memory() as mem:
        mem.write_entry("good-one", "a good entry", "findme in the good entry")
        mem.write_procedure("good-proc", "# Good\nfindme in the procedure\n")
        mem.daily_append("findme in the log")
        memory_dir = Path(mem.path)
    os.utime(memory_dir / "daily", None)
    _plant(memory_dir, kind, where)
    with Memory() as mem:  # every read surface of the library
        assert "good-one" in [e.name for e in mem.entries()]
        assert "good-proc" in [p.name for p in mem.procedures()]
        assert "good-one" in mem.recall().text
        assert mem.boot().parts
        assert mem.entry("good-one").content.startswith("findme")
        assert mem.get("global/good-one.md").lines
        assert {h.path for h in mem.search("findme", mode="lexical")} >= {
            "global/good-one.md",
            "procedures/good-proc.md",
        }
    for args in (("recall",), ("boot",)):
        proc = _cli(state_dir, *args)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert "good-one" in _cli(state_dir, "list").stdout
    assert "good-proc" in _cli(state_dir, "procedure", "list").stdout
    assert "findme" in _cli(state_dir, "search", "findme").stdout
    block = (
        'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "next-one", '
        '"description": "written after", "content": "x"}\nMEMDIR_MEMORIZE_END\n'
    )
    assert _cli(state_dir, "memorize", input=block).returncode == 0
    assert "next-one" in _cli(state_dir, "list").stdout
    doctor = _cli(state_dir, "doctor")
    assert doctor.returncode in (0, 1) and "Traceback" not in doctor.stderr


@pytest.mark.parametrize("text", [LAUGHS, DEEP])
def test_frontmatter_refuses_alias_bombs_and_deep_nesting(memory: Memory, text: str) -> None:
    """G1, P1: a procedure written with such frontmatter is refused (nothing
    stored), one clear line."""
    from memdir import ValidationError

    with pytest.raises(ValidationError, match="frontmatter") as caught:
        memory.write_procedure("bomb", text)
    assert "\n" not in str(caught.value)
    assert memory.procedures() == []


# -- what is injected is bounded; what a cap cuts is kept -------------------------------


def _big_hot(memory: Memory, lines: int = 140, width: int = 70_000) -> list[str]:
    rows = [f"line {i:03d} " + "x" * width for i in range(lines)]
    Path(memory.layout.hot).parent.mkdir(parents=True, exist_ok=True)
    Path(memory.layout.hot).write_text("\n".join(rows) + "\n")
    return rows


def test_h1_an_oversized_hot_md_is_injected_within_its_cap(memory: Memory, run: Any) -> None:
    """H1, R1, E3: a hand-written 10 MB HOT.md: recall and boot inject at most
    the cap (plus one line saying so), over the library and the CLI."""
    _big_hot(memory)
    cap = memory.settings.hot_cap_chars
    recalled = memory.recall().text
    assert len(recalled) < cap + 1000 and "over its cap" in recalled
    assert len(memory.hot_injected()) <= cap
    for args in (("recall",), ("boot",)):
        out = run(*args).out
        assert len(out) < cap + 2000 and "over its cap" in out, args
    assert len(memory.hot()) > 9_000_000  # `hot show` and the file itself are untouched


@pytest.mark.slow
def test_h1_mcp_instructions_and_resource_are_bounded(memory: Memory, state_dir: Path) -> None:
    """H1, A2: the MCP server's instructions and memdir://hot, through a real
    client, hold at most the cap of a 10 MB HOT.md."""
    _big_hot(memory)
    cap = memory.settings.hot_cap_chars

    async def main() -> tuple[str, str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir))
        )
        async with Client(params, read_timeout_seconds=30) as client:
            instructions = client.instructions or ""
            resource = await client.read_resource("memdir://hot")
            return instructions, resource.contents[0].text  # type: ignore[union-attr]

    instructions, resource = anyio.run(main)
    assert len(resource) <= cap and "over its cap" in resource
    assert len(instructions) < cap + 3000 and "over its cap" in instructions


def test_h3_text_a_cap_cuts_is_kept_and_the_write_says_where(memory: Memory) -> None:
    """H3: two appends to an oversized HOT.md cut it to the cap; every line
    cut is in HOT.overflow.md (not only in .bak, which the next write overwrites), and
    the write's warning names that file."""
    rows = _big_hot(memory, lines=140, width=100)
    first = memory.hot_append("append one")
    second = memory.hot_append("append two")
    assert first.cut_chars > 0 and "HOT.overflow.md" in (first.warning or "")
    overflow = Path(hot.overflow_path(memory.layout))
    kept = Path(memory.layout.hot).read_text() + overflow.read_text()
    for row in rows:
        assert row in kept
    assert "append one" in kept and "append two" in kept
    assert second.chars <= memory.settings.hot_cap_chars
    # a 10 MB hand-written file: every char cut (mid-line too) is kept
    _big_hot(memory)
    overflow.unlink()
    memory.hot_append("append three")
    kept = Path(memory.layout.hot).read_text() + overflow.read_text()
    assert kept.count("x") == 140 * 70_000
    assert call_tool(memory, "memory_get", {"path": "HOT.overflow.md", "lines": 1})["lines"]


# -- big files are indexed in bounded chunks, or named -----------------------------------


@pytest.mark.slow
def test_q1_a_5_mb_daily_log_is_searchable_in_bounded_chunks(memory: Memory) -> None:
    """Q1, Q3, E1: a legitimate 5 MB log is indexed: its last entry is found, and
    no chunk is unbounded (one 5 MB line included)."""
    folder = Path(memory.path, "daily")
    folder.mkdir(parents=True)
    body = "".join(
        f"## {i // 60 % 24:02d}:{i % 60:02d}\nroutine entry {i} about the weekly sync\n\n"
        for i in range(100_000)
    )
    (folder / "2026-01-01.md").write_text(f"# 2026-01-01\n\n{body}## 23:59\nzebracorn\n")
    (folder / "2026-01-02.md").write_text("# 2026-01-02\n\n## 10:00\n" + "y " * 2_600_000)
    assert os.path.getsize(folder / "2026-01-01.md") > 4 * 1024 * 1024
    hits = memory.search("zebracorn", kinds="daily", mode="lexical")
    assert hits and hits[0].path == "daily/2026-01-01.md"
    assert memory.search_notice() is None or "too big" not in (memory.search_notice() or "")
    longest = memory.store._require().execute("SELECT max(length(content)) FROM chunks")
    assert longest.fetchone()[0] <= chunks.HARD_CHARS


def test_q1_a_file_too_big_to_index_is_named_by_search_and_doctor(memory: Memory, run: Any) -> None:
    """Q1, Q3, Z: a file over the index's limit is not silently unsearchable: the
    search's note (CLI and tool) and doctor name it."""
    from memdir.search import index

    folder = Path(memory.path, "daily")
    folder.mkdir(parents=True)
    big = folder / "2026-01-03.md"
    with big.open("w") as handle:
        handle.write("# 2026-01-03\n\n## 10:00\n")
        line = "filler words for a log that nobody should write this big\n"
        while handle.tell() <= index.MAX_INDEX_BYTES:
            handle.write(line * 1000)
    result = run("search", "filler")
    assert "too big to index" in result.err and "daily/2026-01-03.md" in result.err
    note = call_tool(memory, "memory_search", {"query": "filler"}).get("note", "")
    assert "daily/2026-01-03.md" in note
    doctor = run("doctor", "--json").json()
    codes = {f["check"]: f for f in doctor["findings"]}
    assert "daily/2026-01-03.md" in codes["index.too_big"]["where"]


# -- reads never need write access -------------------------------------------------------


def _can_bind_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _can_bind_mount(), reason="needs root and mount(8) for a bind mount")
def test_z_reads_work_on_a_read_only_store(state_dir: Path) -> None:
    """Z: on a read-only bind mount of the memory folder every read surface
    answers (search from the index as it stands, after a file changed too); writes fail
    with one clear line."""
    with Memory() as mem:
        mem.add_fact("the kettle is blue", "learning")
        mem.write_entry("kettle", "about the kettle", "the kettle whistles")
        mem.daily_append("kettle boiled")
        mem.search("kettle")
        memory_dir = Path(mem.path)
    mounted = subprocess.run(
        ["mount", "--bind", str(memory_dir), str(memory_dir)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"bind mount refused here: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(memory_dir)], check=True)
        for args in (
            ("search", "kettle"),
            ("search", "kettle", "--json"),
            ("list",),
            ("recall",),
            ("boot",),
            ("fact", "show", "1"),
            ("show", "kettle"),
            ("stats",),
            ("doctor",),
        ):
            proc = _cli(state_dir, *args)
            assert proc.returncode == 0, (args, proc.stderr)
        assert "kettle" in _cli(state_dir, "search", "kettle").stdout
        write = _cli(state_dir, "hot", "append", "new")
        assert write.returncode == 1 and write.stderr.count("\n") == 1
        assert re.search("read-only", write.stderr)
        write = _cli(state_dir, "fact", "add", "new", "-c", "learning")
        if TEAM:  # a fact is a row of the database, which is not on the mount (W1)
            assert write.returncode == 0, write.stderr
        else:
            assert write.returncode == 1 and write.stderr.count("\n") == 1
            assert re.search("read-only", write.stderr)
    finally:
        # the store's warm worker (a search by meaning started it) holds memory.db open,
        # which would keep the mount busy: it goes first
        stop_worker(str(state_dir))
        subprocess.run(["umount", str(memory_dir)], check=True)


# -- no lock is held across work that does not need it ----------------------------------


@pytest.mark.slow
def test_a2_a_search_is_answered_while_a_long_memorize_runs(state_dir: Path) -> None:
    """A2: one server, two calls in flight: a search sent while a 1.7 MB
    memorize is being applied (its first note is on disk) is answered before the memorize
    ends; reads do not wait for a write's turn. Ordering, not timing, is asserted."""
    import json

    write_config(state_dir, '[search]\nmode = "lexical"\n')
    with Memory() as mem:
        mem.add_fact("the kettle is blue", "learning")
        notes = Path(mem.layout.task_notes("big"))
    filler = " ".join(f"word{i % 997}" for i in range(2400))[:14_000]
    blocks = "".join(
        "MEMDIR_MEMORIZE_BEGIN\n"
        + json.dumps({"scope": "task", "content": f"note {i} {filler}"})
        + "\nMEMDIR_MEMORIZE_END\n"
        for i in range(120)
    )
    order: list[str] = []

    async def main() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memdir", "serve"], env=cli_env(str(state_dir))
        )
        async with Client(params, read_timeout_seconds=60) as client:

            async def memorize() -> None:
                result = await client.call_tool("memorize", {"output": blocks, "task": "big"})
                assert not result.is_error, result
                order.append("memorize")

            async with anyio.create_task_group() as group:
                group.start_soon(memorize)
                while not notes.exists():  # the write is under way: progress, not a clock
                    await anyio.sleep(0.01)
                result = await client.call_tool("memory_search", {"query": "kettle"})
                assert not result.is_error and "kettle" in result.content[0].text  # type: ignore[union-attr]
                order.append("search")

    anyio.run(main)
    assert order == ["search", "memorize"]
    assert len(tasks.parse_notes("big", notes.read_text())) == 120
