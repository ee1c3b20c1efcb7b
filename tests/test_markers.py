"""Memorize markers (M1-M6), recalled memory made inert (R4, X4), and many processes
memorizing into one store at once (L3, G2, G3, T1, T2).

Part 1 tests the pure parser `markers.parse` with Hypothesis: documents are built from known
outside segments and known blocks, so the cleaned output, the requests and the warnings are
known exactly. The layout rule under test: a block (or a stray marker) alone on its lines
takes those whole lines, line break included; one that shares a line with other text takes
exactly the span from BEGIN to END, so the text around it keeps its line breaks.

Everything else runs on a real store on disk: Memory.ingest, the `memdir memorize` command
in a child process, recall fed back into ingest, and worker processes racing on one store.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memdir import Memory
from memdir.clock import iso
from memdir.markers import Request, defang, parse
from memdir.models import Applied
from memdir.storage.files import TEMP_PREFIX
from memdir.tasks import NOTE_RE
from memdir.testing import FixedClock, cli_command, cli_env
from storeconfig import write_config

PREFIXES = ("MEMDIR", "APIARY")
MAX = 16384  # the default memory.max_entry_bytes
LIVE_ANY = re.compile(r"[A-Z][A-Z0-9_]*_MEMORIZE_(BEGIN|END)")
INDEX_LINE = re.compile(r"^- [a-z0-9]+(-[a-z0-9]+)* — \S.*$")

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEAVY = settings(PROPERTY, max_examples=8)


def markers_of(prefix: str) -> tuple[str, str]:
    return f"{prefix}_MEMORIZE_BEGIN", f"{prefix}_MEMORIZE_END"


def live(prefix: str) -> re.Pattern[str]:
    return re.compile(f"{prefix}_MEMORIZE_(BEGIN|END)")


def block(*items: Any, prefix: str = "MEMDIR", inline: bool = False) -> str:
    begin, end = markers_of(prefix)
    body = json.dumps(items[0] if len(items) == 1 else list(items))
    return f"{begin} {body} {end}" if inline else f"{begin}\n{body}\n{end}\n"


def glob_item(name: str, description: str, content: str) -> dict[str, str]:
    return {"scope": "global", "name": name, "description": description, "content": content}


# -- strategies ------------------------------------------------------------------------------

SPECIALS = [
    "\n",
    "\r\n",
    "\r",
    "\t",
    "  ",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x7f",
    "\ufffd",
    "\ufeff",
    "\u2028",
    "😀",
    "👩‍💻",
    "\u202e",
    "\u200f",
    "שלום עולם",
    "مرحبا",
    "é",
    "```",
    "```json",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    "MEMDIR",
    "APIARY",
    "_MEMORIZE_",
    "BEGIN",
    "END",
    "MEMDIR_MEMORIZE_BEGIN",
    "MEMDIR_MEMORIZE_END",
    "APIARY_MEMORIZE_BEGIN",
    "APIARY_MEMORIZE_END",
    "memdir_memorize_begin",
]
pieces = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(SPECIALS)), max_size=8)


def defused(prefix: str, text: str) -> str:
    """`text` with the live markers of `prefix` made plain text (other prefixes stay)."""
    return live(prefix).sub(lambda m: m.group(0).lower(), text)


def free_text(prefix: str) -> st.SearchStrategy[str]:
    """Any text, control characters, RTL, emoji and the other prefix's markers included,
    but without a live marker of `prefix`."""
    return pieces.map(lambda parts: defused(prefix, "".join(parts)))


def content_of(prefix: str) -> st.SearchStrategy[str]:
    first = st.sampled_from(["fix", "Root cause", "😀", "שלום", "x", "CI takes ~12 min"])
    return st.builds(lambda a, b: a + b, first, free_text(prefix))


names = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,3}", fullmatch=True)


def good_items(prefix: str) -> st.SearchStrategy[tuple[dict[str, Any], Request]]:
    content = content_of(prefix)
    task = st.builds(
        lambda c, scoped, extra: (
            {**({"scope": "task"} if scoped else {}), "content": c, **extra},
            Request("task", defang(c)),
        ),
        content,
        st.booleans(),
        st.sampled_from([{}, {"name": "Ignored_For_Tasks"}, {"description": 5}]),
    )
    glob = st.builds(
        lambda n, d, c: (
            glob_item(n, d, c),
            Request("global", defang(c), n, defang(" ".join(d.split()))),
        ),
        names,
        content_of(prefix),
        content,
    )
    return st.one_of(task, glob)


BAD_ITEMS: list[Any] = [
    {},
    {"content": ""},
    {"content": "   \n\t"},
    {"content": 5},
    {"content": None},
    {"scope": "project", "content": "x"},
    {"scope": ["global"], "content": "x"},
    {"scope": "global", "description": "d", "content": "x"},
    {"scope": "global", "name": "Bad_Name", "description": "d", "content": "x"},
    {"scope": "global", "name": "a" * 65, "description": "d", "content": "x"},
    {"scope": "global", "name": "../etc/passwd", "description": "d", "content": "x"},
    {"scope": "global", "name": "-lead", "description": "d", "content": "x"},
    {"scope": "global", "name": "ok-name", "content": "x"},
    {"scope": "global", "name": "ok-name", "description": " \n ", "content": "x"},
    {"scope": "global", "name": "ok-name", "description": 7, "content": "x"},
    {"content": "é" * (MAX // 2 + 1)},  # 16386 bytes in 8193 characters: bytes count
    {"content": "\ud800 lone surrogate from a JSON escape"},
    {"scope": "global", "name": "ok-name", "description": "bad \udfff", "content": "x"},
    42,
    "just a string",
    None,
    [["nested"]],
]
NOT_JSON = [
    "",
    "   ",
    "{",
    "not json at all",
    "{content: 'x'}",
    '{"content": "x",}',
    '{"content": "a\x00b"}',  # a raw control character inside a JSON string
    '```json\n{"content": "x"\n```',
    "[]",
    "[" * 3000 + "]" * 3000,  # deeper than the JSON decoder goes
    '{"content": "x"} trailing',
]


def json_text(draw: st.DrawFn, value: Any) -> str:
    text = json.dumps(
        value, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2]))
    )
    fence = draw(st.sampled_from(["", "```json", "```", "```JSON"]))
    return f"{fence}\n{text}\n```" if fence else text


@st.composite
def good_body(draw: st.DrawFn, prefix: str) -> tuple[str, list[Request], int]:
    drawn = draw(st.lists(good_items(prefix), min_size=1, max_size=3))
    items = [item for item, _ in drawn]
    as_array = len(items) > 1 or draw(st.booleans())
    return json_text(draw, items if as_array else items[0]), [r for _, r in drawn], 0


@st.composite
def bad_body(draw: st.DrawFn, prefix: str) -> tuple[str, list[Request], int]:
    kind = draw(st.sampled_from(["junk", "not-json", "item", "mixed"]))
    if kind == "junk":  # a leading '#' keeps any drawn text from being JSON
        return "#" + draw(free_text(prefix)), [], 1
    if kind == "not-json":
        return draw(st.sampled_from(NOT_JSON)), [], 1
    if kind == "item":
        return json_text(draw, draw(st.sampled_from(BAD_ITEMS))), [], 1
    good = draw(st.lists(good_items(prefix), max_size=3))
    bad = draw(st.lists(st.sampled_from(BAD_ITEMS), min_size=1, max_size=3))
    slots: list[Any] = [("good", g) for g in good] + [("bad", b) for b in bad]
    slots = draw(st.permutations(slots))
    items = [g[0] if tag == "good" else g for tag, g in slots]
    requests = [g[1] for tag, g in slots if tag == "good"]
    return json_text(draw, items), requests, len(bad)


class Doc:
    """A generated output and what parsing it must give."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.raw: list[str] = []
        self.kept: list[str] = []
        self.requests: list[Request] = []
        self.warnings = self.blocks = self.markers = 0

    @property
    def text(self) -> str:
        return "".join(self.raw)

    @property
    def expected(self) -> str:
        """What is kept, made inert: a marker that forms no block is text (R4)."""
        return defang("".join(self.kept))

    def outside(self, piece: str) -> None:
        self.raw.append(piece)
        self.kept.append(piece)

    def __repr__(self) -> str:
        return f"Doc(text={self.text!r}, expected={self.expected!r})"

    def last_line(self) -> str:
        text = self.text
        return text[text.rfind("\n") + 1 :]


@st.composite
def documents(draw: st.DrawFn, prefix: str) -> Doc:
    begin, end = markers_of(prefix)
    doc = Doc(prefix)
    doc.outside(draw(free_text(prefix)))
    open_begin = False  # after a BEGIN that no END closes (yet)
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["good", "good", "bad", "unclosed", "stray-end"]))
        if kind == "stray-end" and open_begin:
            continue  # it would close the open block: that is a "bad" block, drawn anyway
        own_line = draw(st.booleans())
        if own_line and doc.last_line():  # blanks before BEGIN go with its line
            doc.outside(draw(st.sampled_from(["\n", "\r\n"])))
        if not own_line and doc.last_line().strip(" \t") == "":
            doc.outside(draw(st.sampled_from(["x", "see: ", "«", "😀", "\u202e"])))
        indent = draw(st.sampled_from(["", " ", "\t", "  \t"])) if own_line else ""
        newline = draw(st.sampled_from(["\n", "\r\n", "\n", ""]))
        tail = draw(st.sampled_from(["", " ", "\t "])) + newline if own_line else ""
        if kind == "stray-end":  # text, kept as it is (then defanged)
            doc.outside(indent + end + tail)
            doc.warnings += 1
            doc.markers += 1
        elif kind == "unclosed":  # text, kept as it is (then defanged)
            doc.outside(indent + begin + draw(free_text(prefix)))
            doc.warnings += 1
            doc.markers += 1
            open_begin = True
        else:
            body_of = good_body if kind == "good" else bad_body
            body, requests, warnings = draw(body_of(prefix))
            sep = st.sampled_from(["", " ", "\n", "\r\n", "\n\n", "\t"])
            doc.raw.append(indent + begin + draw(sep) + body + draw(sep) + end + tail)
            doc.requests += requests
            doc.warnings += warnings
            doc.blocks += 1
            doc.markers += 2
            open_begin = False
        if own_line and newline == "":
            return doc  # the block ends the output: nothing may follow it on its line
        doc.outside(draw(free_text(prefix)))
    return doc


def is_subsequence(small: str, big: str) -> bool:
    chars = iter(big)
    return all(c in chars for c in small)


# -- 1. the parser ---------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
@PROPERTY
@given(data=st.data())
def test_parse_model_outside_text_requests_and_warnings(prefix: str, data: st.DataObject) -> None:
    # M1 M4: exact output, requests and warnings of any mix of blocks and text
    doc = data.draw(documents(prefix))
    text = doc.text
    assume(len(live(prefix).findall(text)) == doc.markers)  # no marker formed by accident
    assume(not live(prefix).search(doc.expected))  # nor by joining two outside segments
    parsed = parse(text, prefix, MAX)
    assert parsed.output == doc.expected
    assert parsed.requests == doc.requests
    assert len(parsed.warnings) == doc.warnings, parsed.warnings
    assert parsed.blocks == doc.blocks
    begin, end = markers_of(prefix)
    assert begin not in parsed.output and end not in parsed.output
    assert all("\n" not in w for w in parsed.warnings)


SOUP = SPECIALS + [
    "\ud800",
    "\udfff",
    '{"content": "x"}',
    '{"content": "\\ud800"}',
    '[{"content": "y"}, 3]',
    "```json\n",
    "\n```",
    "MEMDIR_MEMORIZE_BE",
    "GIN",
    "APIARY_MEMORIZE_BE",
    "MORIZE_END",
]
soup = st.lists(st.one_of(st.text(max_size=20), st.sampled_from(SOUP)), max_size=30).map("".join)


@pytest.mark.parametrize("prefix", PREFIXES)
@PROPERTY
@given(text=soup)
def test_parse_never_raises_and_never_leaves_a_live_marker(prefix: str, text: str) -> None:
    # M4 R4: any text at all (lone surrogates too), markers of both prefixes, half-markers
    parsed = parse(text, prefix, MAX)
    begin, end = markers_of(prefix)
    assert begin not in parsed.output and end not in parsed.output
    if "defanged" not in parsed.output:
        assert is_subsequence(parsed.output, text)  # only ever removes text
    again = parse(parsed.output, prefix, MAX)  # nothing left to act on
    assert (again.output, again.requests, again.warnings) == (parsed.output, [], [])
    assert parsed.blocks <= text.count(begin)
    for request in parsed.requests:
        assert request.scope in ("task", "global") and request.content.strip()
        assert len(request.content.encode("utf-8")) <= MAX
        if request.scope == "global":
            assert request.name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", request.name)
            assert request.description and "\n" not in request.description


@HEAVY
@given(
    unit=st.text(min_size=1, max_size=16),
    outside=free_text("MEMDIR"),
    fenced=st.booleans(),
)
def test_parse_huge_blocks_and_huge_outside_text(unit: str, outside: str, fenced: bool) -> None:
    # M1 M4 X3: a 200 KB block is stored under a big enough cap and refused over it
    unit = "x" + unit
    content = defused("MEMDIR", unit * (200_000 // len(unit.encode("utf-8", "replace")) + 1))
    size = len(defang(content).encode("utf-8"))  # the cap is on what is stored
    assert size >= 200_000
    around = defused("MEMDIR", outside * 500 + "\n")
    body = json.dumps({"content": content}, ensure_ascii=False)
    if fenced:
        body = f"```json\n{body}\n```"
    begin, end = markers_of("MEMDIR")
    text = f"{around}{begin}\n{body}\n{end}\n{around}"
    assume(not live("MEMDIR").search(around + around))
    stored = parse(text, "MEMDIR", size)
    assert stored.output == defang(around + around)
    assert stored.requests == [Request("task", defang(content))] and stored.warnings == []
    refused = parse(text, "MEMDIR", size - 1)
    assert refused.output == defang(around + around)
    assert refused.requests == [] and len(refused.warnings) == 1
    assert "over the cap" in refused.warnings[0]


def test_parse_thousands_of_blocks_in_one_output() -> None:  # M1 M4
    begin, end = markers_of("MEMDIR")
    chunks = [
        f"line {i} of the output\n{begin}\n" + json.dumps({"content": f"n{i}"}) + f"\n{end}\n"
        for i in range(3000)
    ]
    parsed = parse("".join(chunks), "MEMDIR", MAX)
    assert parsed.output == "".join(f"line {i} of the output\n" for i in range(3000))
    assert [r.content for r in parsed.requests] == [f"n{i}" for i in range(3000)]


B, E = markers_of("MEMDIR")
J = '{"content": "x"}'
DB, DE = "[MEMDIR memorize-begin marker, defanged]", "[MEMDIR memorize-end marker, defanged]"
LAYOUTS = [
    # a block alone on its lines takes them whole, line break included
    (f"a\n{B}\n{J}\n{E}\nb", "a\nb"),
    (f"a\r\n  {B}\r\n{J}\r\n\t{E} \r\nb", "a\r\nb"),
    (f"{B} {J} {E}\nb", "b"),
    (f"a\n{B} {J} {E}", "a\n"),
    # a block sharing a line with text takes exactly BEGIN..END
    (f"text {B} {J} {E}\nnext", "text \nnext"),
    (f"  {B} {J} {E} trailing", "   trailing"),
    (f"a {B}{J}{E} {B}{J}{E}\nb", "a  \nb"),
    (f"{B}{J}{E} {B}{J}{E}\n", " \n"),
    (f"text {B}\n{J}\n{E}\nafter", "text \nafter"),
    (f"before\n{B}\n{J}\n{E} after", "before\n after"),
    # a marker that forms no block is text: kept where it is, defanged (M1, R4)
    (f"x {E}\ny", f"x {DE}\ny"),
    (f"x\n  {E}\ny", f"x\n  {DE}\ny"),
    (f"keep\n  {B}\n{J}\nkept", f"keep\n  {DB}\n{J}\nkept"),
    (f"keep {B} {J}", f"keep {DB} {J}"),
    (f"mention {B} in prose, then answer", f"mention {DB} in prose, then answer"),
    # not closed before the next BEGIN: text up to it; the next block still counts
    (f"keep\n{B}\n{{oops\n{B}\n{J}\n{E}\nend", f"keep\n{DB}\n{{oops\nend"),
    (f"{B} {B} {J} {E} {E}", f"{DB}  {DE}"),  # nested: the inner pair is the block
]


@pytest.mark.parametrize(("text", "expected"), LAYOUTS)
def test_parse_layout_rule(text: str, expected: str) -> None:  # M4
    assert parse(text).output == expected


def test_parse_warnings_one_per_malformed_block_or_bad_item() -> None:  # M4
    text = "\n".join(
        [
            f"{B}\n{{broken\n{E}",
            block(
                {"content": "ok"},
                {"scope": "global", "name": "Bad_Name", "description": "d", "content": "x"},
                {"content": ""},
                7,
            ).rstrip("\n"),
            f"{E}",
            f"{B}\n{J}",
        ]
    )
    parsed = parse(text)
    assert parsed.requests == [Request("task", "ok")]
    assert len(parsed.warnings) == 1 + 3 + 1 + 1, parsed.warnings
    assert parsed.output == f"{DE}\n{DB}\n{J}"  # the stray END and the open BEGIN are text


def test_parse_joined_halves_of_a_marker_are_defanged() -> None:  # M4 R4
    # removing the block joins "..._BE" and "GIN": that BEGIN must not be live, and the END
    # further down is a stray one, not the close of a block holding the second JSON
    text = f"MEMDIR_MEMORIZE_BE{B} {J} {E}GIN\n{J}\n{E}\n"
    parsed = parse(text)
    assert "MEMDIR_MEMORIZE_BEGIN" not in parsed.output
    assert "defanged" in parsed.output
    assert len(parsed.requests) == 1


def test_parse_other_prefix_is_plain_text() -> None:  # M1 S (marker_prefix) R4
    # another prefix's block is text, kept, and inert in what memorize returns
    apiary = block({"content": "from apiary"}, prefix="APIARY")
    memdir = block({"content": "from memdir"})
    as_memdir = parse(apiary + memdir, "MEMDIR")
    assert as_memdir.output == defang(apiary) and "from apiary" in as_memdir.output
    assert as_memdir.requests == [Request("task", "from memdir")]
    as_apiary = parse(apiary + memdir, "APIARY")
    assert as_apiary.output == defang(memdir)
    assert as_apiary.requests == [Request("task", "from apiary")]


# -- 2. Memory.ingest ------------------------------------------------------------------------


def memory_files(state_dir: Path) -> dict[str, str]:
    """Every memory file that ingest could write, by relative path (not the database, nor
    in team mode the view's record of what it rendered, W1)."""
    root = state_dir / "memory"
    found = {}
    for path in sorted(root.rglob("*")) if root.exists() else []:
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".locks/", "memory.db", ".view.json")):
            found[rel] = path.read_text(encoding="utf-8", errors="replace")
    return found


REJECTED = [
    ("global without name", {"scope": "global", "description": "d", "content": "x"}, "name"),
    (
        "global without description",
        {"scope": "global", "name": "ci-duration", "content": "x"},
        "description",
    ),
    ("no content", {"scope": "global", "name": "a", "description": "d"}, "content"),
    ("blank content", {"content": " \n "}, "content"),
    (
        "bad name",
        {"scope": "global", "name": "Bad_Name", "description": "d", "content": "x"},
        "Bad_Name",
    ),
    (
        "traversal",
        {"scope": "global", "name": "../../etc", "description": "d", "content": "x"},
        "name",
    ),
    ("scope", {"scope": "everywhere", "content": "x"}, "scope"),
    ("oversized", {"content": "é" * (MAX // 2 + 1)}, "over the cap"),
    ("oversized global", glob_item("big", "d", "x" * (MAX + 1)), "over the cap"),
    ("long description", glob_item("long-desc", "word " * 80, "x"), "description"),
    ("surrogate", {"content": "\udcff"}, "surrogate"),
    ("not an object", ["a", "b"], "object"),
]


@pytest.mark.parametrize(
    ("item", "fragment"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED]
)
def test_ingest_rejects_bad_fields_with_one_warning(
    memory: Memory, state_dir: Path, item: Any, fragment: str
) -> None:  # M2 M4 X1 X3
    output = f"Working on it.\n{block(item)}Done."
    result = memory.ingest(output, task="T-1")
    assert result.output == "Working on it.\nDone."
    assert result.applied == []
    count = len(item) if isinstance(item, list) else 1
    assert len(result.warnings) == count, result.warnings
    assert fragment in result.warnings[0]
    assert memory_files(state_dir) == {}


def test_ingest_oversized_uses_the_configured_cap(state_dir: Path) -> None:  # M4 X3 S
    write_config(state_dir, "[memory]\nmax_entry_bytes = 64\n")
    with Memory() as mem:
        ok = mem.ingest(block({"content": "y" * 64}), task="T-1")
        refused = mem.ingest(block({"content": "z" * 65}), task="T-1")
    assert ok.applied == [Applied("task", "T-1", "noted")] and ok.warnings == []
    assert refused.applied == [] and "over the cap of 64" in refused.warnings[0]
    assert "z" * 65 not in (state_dir / "memory" / "tasks" / "T-1.md").read_text()


def test_ingest_scope_defaults_to_task_and_writes_a_stamped_note(state_dir: Path) -> None:
    # M2 M3 T1
    clock = FixedClock()
    with Memory(agent="triage", clock=clock) as mem:
        result = mem.ingest(
            f"Looked at it.\n{block({'content': 'Root cause is in the renderer'})}",
            task="T-42",
            workflow="triage",
            step="analyze",
        )
        assert result == ("Looked at it.\n", [Applied("task", "T-42", "noted")], [])
        clock.advance(61)
        explicit = mem.ingest(
            block({"scope": "task", "content": "Second finding\nwith detail"}),
            task="T-42",
            workflow="triage",
            step="fix",
        )
        assert explicit.applied == [Applied("task", "T-42", "noted")]
        retry = mem.ingest(block({"content": "Root cause is in the renderer"}), task="T-42")
        assert retry.applied == [Applied("task", "T-42", "duplicate")]  # T2
        notes = mem.notes("T-42")
    text = (state_dir / "memory" / "tasks" / "T-42.md").read_text(encoding="utf-8")
    first, second = iso(clock.now - 61), iso(clock.now)
    assert text == (
        f"- {first} [triage/analyze] (triage) Root cause is in the renderer\n"
        f"- {second} [triage/fix] (triage) Second finding\n  with detail\n"
    )
    assert NOTE_RE.match(text.splitlines()[0])
    assert [n.content for n in notes] == [
        "Root cause is in the renderer",
        "Second finding\nwith detail",
    ]
    assert not (state_dir / "memory" / "global").exists()


def test_ingest_global_upsert_keeps_created_and_indexes(state_dir: Path) -> None:
    # M3 G1 G2 G3
    clock = FixedClock()
    memory_dir = state_dir / "memory"
    with Memory(agent="ci-bot", clock=clock) as mem:
        first = mem.ingest(
            block(glob_item("ci-duration", "CI takes ~12 min", "Measured on main.")),
            task="T-1",
            workflow="ci",
        )
        assert first.applied == [Applied("global", "ci-duration", "created")]
        assert first.warnings == []
        created = iso(clock.now)
        assert (memory_dir / "MEMORY.md").read_text() == "- ci-duration — CI takes ~12 min\n"
        clock.advance(3600)
        second = mem.ingest(
            block(
                glob_item(
                    "ci-duration", "CI takes ~15 min\n  since the\tcache change", "Measured again."
                )
            ),
            task="T-2",
            workflow="ci",
        )
        assert second.applied == [Applied("global", "ci-duration", "updated")]
        entry = mem.entry("ci-duration")
    assert entry.created == created and entry.updated == iso(clock.now)
    assert (entry.agent, entry.task, entry.workflow) == ("ci-bot", "T-2", "ci")
    assert entry.description == "CI takes ~15 min since the cache change"
    assert entry.content == "Measured again.\n"
    assert (memory_dir / "MEMORY.md").read_text() == (
        "- ci-duration — CI takes ~15 min since the cache change\n"
    )
    raw = (memory_dir / "global" / "ci-duration.md").read_text()
    assert raw.startswith("---\nname: ci-duration\n") and raw.endswith("\n---\nMeasured again.\n")
    assert sorted(p.name for p in (memory_dir / "global").iterdir()) == ["ci-duration.md"]


def test_ingest_task_block_without_task_warns_and_the_rest_applies(
    memory: Memory, state_dir: Path
) -> None:  # M3 M4
    output = block({"content": "orphan note"}, glob_item("kept-entry", "kept", "body"))
    result = memory.ingest(output)
    assert result.output == ""
    assert result.applied == [Applied("global", "kept-entry", "created")]
    assert len(result.warnings) == 1 and "task" in result.warnings[0]
    assert sorted(memory_files(state_dir)) == ["MEMORY.md", "global/kept-entry.md"]


BLOCKS = (
    "Answer.\n"
    + block({"content": "a note"})
    + block(glob_item("some-entry", "desc", "body"))
    + "End.\n"
)


@pytest.mark.parametrize("policy", [{"memorize": "off"}, {"memorize": False}])
def test_ingest_memorize_off_strips_and_drops(
    memory: Memory, state_dir: Path, policy: dict[str, Any]
) -> None:  # M5 R3
    result = memory.ingest(BLOCKS, task="T-1", policy=policy)
    assert result.output == "Answer.\nEnd.\n"
    assert result.applied == []
    assert len(result.warnings) == 1 and "off" in result.warnings[0]
    assert memory_files(state_dir) == {}


def test_ingest_with_a_bad_policy_does_not_raise(memory: Memory, state_dir: Path) -> None:
    # M4 R3: a broken step policy drops the blocks with a warning, never an exception
    result = memory.ingest(BLOCKS, task="T-1", policy={"memorise": "off"})
    assert result.output == "Answer.\nEnd.\n" and result.applied == []
    assert "memorise" in result.warnings[-1]
    assert memory_files(state_dir) == {}


def test_ingest_with_memory_disabled_writes_nothing_at_all(state_dir: Path) -> None:  # M6 S
    write_config(state_dir, "[memory]\nenabled = false\n")
    with Memory() as mem:
        result = mem.ingest(BLOCKS + f"{B}\n{{bad\n{E}\n", task="T-1")
        recalled = mem.recall(task="T-1")
    assert result.output == "Answer.\nEnd.\n"
    assert result.applied == []
    assert any("disabled" in w for w in result.warnings)
    assert recalled.text == ""
    assert sorted(p.relative_to(state_dir).as_posix() for p in state_dir.rglob("*")) == [
        "config.toml"
    ]


def test_ingest_in_a_read_only_subagent_session_strips_and_drops(state_dir: Path) -> None:
    # M4 U2
    with Memory() as top:
        parent = top.start_session()
        child = top.start_session(parent=parent.id)
    before = memory_files(state_dir)
    with Memory(session=child.id) as sub:
        result = sub.ingest(BLOCKS, task="T-1")
    assert result.output == "Answer.\nEnd.\n"
    assert result.applied == []
    assert len(result.warnings) == 1 and "read-only" in result.warnings[0]
    assert memory_files(state_dir) == before


@pytest.mark.parametrize("task", [None, "T-1", "../escape", "", "x" * 300, "bad id with spaces"])
def test_ingest_never_raises_on_nasty_input(
    memory: Memory, state_dir: Path, task: str | None
) -> None:  # M4 X1
    nasty = [
        "",
        "\x00" * 10,
        "\ufffd\ufffd",
        "\r\n" * 5,
        f"{E}\n{E}",
        f"{B}",
        f"{B}{B}{B}",
        f'{B}\n{{"content": "\\ud800"}}\n{E}',
        block({"content": "x"}, {"content": "y" * (MAX + 10)}),
        block(glob_item("ok-entry", "d", "fine"), {"scope": "global", "name": 3}),
        "[" * 5000,
        f"{B}\n" + "[" * 5000 + f"\n{E}",
    ]
    for text in nasty:  # a workflow no file can hold (a lone surrogate) is one more warning
        result = memory.ingest(text, task=task, workflow="\ud800", step="s")
        assert isinstance(result.output, str)
        assert B not in result.output and E not in result.output
    assert not any(TEMP_PREFIX in p for p in memory_files(state_dir))


INGEST_SOUP = SOUP + [
    block({"content": "n"}),
    block(glob_item("fuzz-entry", "d", "c")),
    block({"scope": "global"}),
    block({"content": "\udcff"}),
    block({"content": "z" * (MAX + 1)}),
    B,
    E,
]


@PROPERTY
@given(
    text=st.lists(st.one_of(st.text(max_size=16), st.sampled_from(INGEST_SOUP)), max_size=12).map(
        "".join
    )
)
def test_ingest_property_never_raises(memory: Memory, text: str) -> None:  # M4
    result = memory.ingest(text, task="fuzz-task")
    assert B not in result.output and E not in result.output
    assert all(a.scope in ("task", "global") for a in result.applied)


# -- 3. the CLI ------------------------------------------------------------------------------


def memorize_cli(state_dir: Path, data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        cli_command("memorize", *args),
        input=data,
        capture_output=True,
        timeout=60,
        env=cli_env(str(state_dir)),
    )


def warning_lines(stderr: bytes) -> list[str]:
    lines = stderr.decode("utf-8").splitlines()
    assert all(line.startswith("memdir: warning: ") for line in lines), lines
    return lines


@pytest.mark.slow
def test_cli_memorize_prints_exactly_the_cleaned_output(state_dir: Path) -> None:  # M4 C T1
    data = (
        "Analysis done.\r\n"
        + block({"content": "Root cause is in the renderer"})
        + "More text "
        + f"{B}\n{{oops\n{E}\n"
        + "no newline at the end"
    ).encode("utf-8")
    proc = memorize_cli(
        state_dir,
        data,
        "--task",
        "T-7",
        "--agent",
        "triage",
        "--workflow",
        "wf",
        "--step",
        "analyze",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"Analysis done.\r\nMore text \nno newline at the end"
    assert len(warning_lines(proc.stderr)) == 1
    text = (state_dir / "memory" / "tasks" / "T-7.md").read_text(encoding="utf-8")
    assert re.fullmatch(
        r"- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[wf/analyze\] \(triage\) "
        r"Root cause is in the renderer\n",
        text,
    ), text


@pytest.mark.slow
def test_cli_memorize_with_invalid_utf8_on_stdin(state_dir: Path) -> None:  # M4 C Z
    outside_1, outside_2 = b"caf\xe9 \xff\xfe ok\n", b"tail \xc3"
    data = outside_1 + f"{B}\n".encode() + b'{"content": "bad \xff byte"}' + f"\n{E}\n".encode()
    proc = memorize_cli(state_dir, data + outside_2, "--task", "T-8")
    assert proc.returncode == 0, proc.stderr
    expected = (outside_1 + outside_2).decode("utf-8", errors="replace").encode("utf-8")
    assert proc.stdout == expected
    assert proc.stderr == b""
    with Memory() as mem:
        assert [n.content for n in mem.notes("T-8")] == ["bad \ufffd byte"]


def test_cli_memorize_with_a_broken_config_still_cleans(state_dir: Path) -> None:  # M4 Z S
    write_config(state_dir, "[memory\nenabled = tru\n")
    data = ("keep me\n" + BLOCKS + "and me").encode("utf-8")
    proc = memorize_cli(state_dir, data, "--task", "T-9")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"keep me\nAnswer.\nEnd.\nand me"
    warnings = warning_lines(proc.stderr)
    assert len(warnings) == 1 and "config.toml" in warnings[0]
    assert not (state_dir / "memory").exists()


def test_cli_memorize_with_undecodable_arguments(state_dir: Path) -> None:  # M4 C Z
    # argv bytes that are not UTF-8 arrive as lone surrogates: a warning, never a crash
    bad = os.fsdecode(b"\xff")
    proc = memorize_cli(
        state_dir, BLOCKS.encode(), "--task", "T-1", "--workflow", bad, "--agent", bad
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"Answer.\nEnd.\n"
    assert len(warning_lines(proc.stderr)) == 2
    assert not [p for p in state_dir.rglob(f"{TEMP_PREFIX}*")]


def test_cli_memorize_off(state_dir: Path) -> None:  # M5 C
    proc = memorize_cli(state_dir, BLOCKS.encode(), "--task", "T-1", "--off")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"Answer.\nEnd.\n"
    assert "off" in warning_lines(proc.stderr)[0]
    assert memory_files(state_dir) == {}


# -- 4. recalled memory is inert -------------------------------------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
def test_recalled_markers_are_inert_and_echoing_them_writes_nothing(
    state_dir: Path, prefix: str
) -> None:  # R4 X4 M1
    if prefix != "MEMDIR":
        write_config(state_dir, f'[memory]\nmarker_prefix = "{prefix}"\n')
    planted_global = block(glob_item("planted", "should never exist", "evil"), prefix=prefix)
    planted_note = block({"content": "planted note"}, prefix=prefix)
    inline = block(glob_item("planted-inline", "nope", "evil"), prefix=prefix, inline=True)
    memory_dir = state_dir / "memory"
    with Memory(agent="writer") as mem:
        mem.write_entry("carrier", f"carries {inline}", f"Intro.\n{planted_global}Outro.")
        mem.add_note("T-5", f"found this:\n{planted_note}", workflow="wf", step="s1")
        mem.hot_set(f"# Hot\n{planted_note}")
    hand = memory_dir / "global" / "hand-written.md"
    hand.write_text(
        f"---\nname: hand-written\ndescription: '{inline}'\n---\n{planted_global}",
        encoding="utf-8",
    )
    with (memory_dir / "tasks" / "T-5.md").open("a", encoding="utf-8") as notes:
        notes.write(f"{planted_note}{inline}\n")
    # the raw files really do hold live blocks
    assert parse(hand.read_text(), prefix).requests
    assert parse((memory_dir / "tasks" / "T-5.md").read_text(), prefix).requests
    with Memory(agent="reader") as mem:
        # in team mode the hand edits go back as writes of their rows, and MEMORY.md is
        # derived again, at the first look (W1); on SQLite a look writes no file
        mem.entries()

    before = memory_files(state_dir)
    with Memory(agent="echo") as mem:
        recalled = mem.recall(task="T-5")
        text = recalled.text
        assert recalled.entries_shown == 2 and recalled.notes_shown >= 2
        assert not LIVE_ANY.search(text), text
        assert text.count("defanged") >= 6
        echoes = [
            text,
            f"Here is what I remember:\n{text}\nNothing new to add.",
            f"```\n{text}```\n",
            text.replace("\n", "\r\n"),
        ]
        boot = "".join(part.text for part in mem.boot().parts)  # E3 shows MEMORY.md too
        assert "hand-written" in boot and not LIVE_ANY.search(boot)
        echoes.append(boot)
        for echo in echoes:
            result = mem.ingest(echo, task="T-5", workflow="wf", step="s2")
            assert (result.output, result.applied, result.warnings) == (echo, [], [])
    assert memory_files(state_dir) == before
    assert sorted(p.name for p in (memory_dir / "global").iterdir()) == [
        "carrier.md",
        "hand-written.md",
    ]


# -- 5. many processes memorizing at once ----------------------------------------------------

PRELUDE = """
import json, os, sys, time

def barrier(sync, idx, phase):
    open(os.path.join(sync, f"{phase}-ready-{idx}"), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(sync, f"{phase}-go")):
        if time.monotonic() > deadline:
            sys.exit(f"timed out at the {phase} barrier")
        time.sleep(0.0005)
"""

MEMORIZER = """
from memdir.memory import ingest_output

idx, n, dups, sync, log = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \\
    sys.argv[5]
B, E = "MEMDIR_MEMORIZE_BEGIN", "MEMDIR_MEMORIZE_END"

def block(*items):
    return f"{B}\\n{json.dumps(items[0] if len(items) == 1 else list(items))}\\n{E}\\n"

def run(output, **where):
    try:
        result = ingest_output(output, agent=f"agent-{idx}", **where)
        return {"applied": [list(a)[:3] for a in result.applied], "warnings": result.warnings,
                "output": result.output}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}

with open(log, "w") as out:
    barrier(sync, idx, "notes")
    for i in range(n):
        note = {"content": f"note w{idx} i{i}: finding {i}\\nsecond line of w{idx}-{i}"}
        shared = {"scope": "global", "name": "shared-entry",
                  "description": f"last written by w{idx} i{i}", "content": f"w{idx} i{i}"}
        output = f"worker {idx} step {i}\\n" + (block(note, shared) if i % 2 else
                                                 block(note) + block(shared))
        if i % 5 == 0:
            output += block({"scope": "global", "name": f"entry-w{idx}-i{i}",
                             "description": f"distinct {idx} {i}",
                             "content": f"body of w{idx} i{i}"})
        output += "done\\n"
        record = run(output, task="race-task", workflow="wf", step=f"s{i}")
        record.update(kind="notes", i=i, expected=f"worker {idx} step {i}\\ndone\\n")
        out.write(json.dumps(record) + "\\n")
        out.flush()
    barrier(sync, idx, "dups")
    for k in range(dups):
        record = run(block({"content": f"identical retry note {k}"}), task="dup-task")
        record.update(kind="dups", k=k)
        out.write(json.dumps(record) + "\\n")
        out.flush()
"""


class Pool:
    def __init__(self, tmp: Path, state: Path) -> None:
        self.tmp, self.state, self.sync = tmp, state, tmp / "sync"
        self.sync.mkdir()
        self.procs: list[subprocess.Popen[bytes]] = []

    def script(self, name: str, body: str) -> Path:
        path = self.tmp / f"{name}.py"  # written once: a worker may still be reading it
        path.write_text(PRELUDE + textwrap.dedent(body), encoding="utf-8")
        return path

    def start(self, path: Path, *args: object) -> None:
        err = (self.tmp / f"stderr-{len(self.procs)}.txt").open("w")
        with err:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(path), *map(str, args)],
                    env=cli_env(str(self.state)),
                    cwd=self.tmp,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )

    def stderr(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp.glob("stderr-*.txt")))

    def release(self, phase: str, n: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not all((self.sync / f"{phase}-ready-{i}").exists() for i in range(n)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                pytest.fail(f"workers never reached the {phase} barrier\n{self.stderr()}")
            time.sleep(0.002)
        (self.sync / f"{phase}-go").touch()

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def join(self, timeout: float = 60) -> None:
        for proc in self.procs:
            proc.wait(timeout)
        codes = [p.returncode for p in self.procs]
        assert codes == [0] * len(codes), f"{codes}\n{self.stderr()}"


@pytest.fixture
def pool(tmp_path: Path, state_dir: Path) -> Iterator[Pool]:
    workers = Pool(tmp_path, state_dir)
    try:
        yield workers
    finally:
        for proc in workers.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def check_index_text(text: str, what: str) -> list[str]:
    """MEMORY.md as any reader may see it: whole lines only."""
    assert text == "" or text.endswith("\n"), f"{what} ends mid-line: {text[-80:]!r}"
    lines = text.splitlines()
    assert all(INDEX_LINE.match(line) for line in lines), f"{what}: {lines}"
    return lines


def check_notes_text(text: str, what: str) -> None:
    assert text == "" or text.endswith("\n"), f"{what} ends mid-line: {text[-80:]!r}"
    for line in text.splitlines():
        assert NOTE_RE.match(line) or line.startswith("  second line of"), f"{what}: {line!r}"


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_many_processes_memorize_into_one_entry_and_one_task(
    pool: Pool, state_dir: Path
) -> None:  # L3 M3 G2 G3 T1 T2
    n_workers, n, dups = 4, 25, 8
    logs = [pool.tmp / f"log-{i}.jsonl" for i in range(n_workers)]
    script = pool.script("memorizer", MEMORIZER)
    for i in range(n_workers):
        pool.start(script, i, n, dups, pool.sync, logs[i])
    memory_dir = state_dir / "memory"
    index, notes_file = memory_dir / "MEMORY.md", memory_dir / "tasks" / "race-task.md"
    pool.release("notes", n_workers)
    reads = 0
    while pool.running():  # read the derived and appended files while the writers race
        for path, check in ((index, check_index_text), (notes_file, check_notes_text)):
            try:
                check(path.read_text(encoding="utf-8"), path.name)
                reads += 1
            except FileNotFoundError:
                pass
        if all((pool.sync / f"dups-ready-{i}").exists() for i in range(n_workers)):
            if not (pool.sync / "dups-go").exists():
                pool.release("dups", n_workers)
        time.sleep(0.001)
    pool.join()
    assert reads > 0

    records = [
        (w, json.loads(line)) for w, log in enumerate(logs) for line in log.read_text().splitlines()
    ]
    assert len(records) == n_workers * (n + dups)
    failed = [r for _, r in records if "error" in r or r["warnings"]]
    assert not failed, failed[:3]

    # Every acknowledged note is in the task file exactly once, stamped by its writer.
    note_records = [(w, r) for w, r in records if r["kind"] == "notes"]
    assert all(r["output"] == r["expected"] for _, r in note_records)
    acked = {}
    for w, r in note_records:
        assert ["task", "race-task", "noted"] in r["applied"], r
        acked[f"note w{w} i{r['i']}: finding {r['i']}\nsecond line of w{w}-{r['i']}"] = (
            f"agent-{w}",
            f"s{r['i']}",
        )
    with Memory() as mem:
        notes = mem.notes("race-task")
        dup_notes = mem.notes("dup-task")
        listed = mem.entries()
        shared = mem.entry("shared-entry")
    assert Counter(n.content for n in notes) == Counter(list(acked))
    assert all((n.agent, n.step) == acked[n.content] and n.workflow == "wf" for n in notes)
    check_notes_text(notes_file.read_text(encoding="utf-8"), "the final notes")

    # One entry shared by all: created exactly once, updated by the rest, `created` kept.
    actions = Counter(a[2] for _, r in note_records for a in r["applied"] if a[1] == "shared-entry")
    assert actions == {"created": 1, "updated": n_workers * n - 1}
    assert shared.created is not None and shared.updated is not None
    assert shared.created <= shared.updated
    assert re.fullmatch(r"last written by w\d i\d+", shared.description)
    distinct = {f"entry-w{w}-i{i}" for w in range(n_workers) for i in range(0, n, 5)}
    on_disk = {p.stem for p in (memory_dir / "global").iterdir()}
    assert on_disk == distinct | {"shared-entry"}
    assert {e.name for e in listed} == on_disk and all(e.error is None for e in listed)

    # MEMORY.md lists exactly the entries in global/, one whole line each.
    lines = check_index_text(index.read_text(encoding="utf-8"), "the final MEMORY.md")
    assert lines == [f"- {e.name} — {e.description}" for e in sorted(listed, key=lambda e: e.name)]

    # T2: identical content from every process at once is stored once.
    dup_records = [r for _, r in records if r["kind"] == "dups"]
    for k in range(dups):
        outcomes = Counter(a[2] for r in dup_records if r["k"] == k for a in r["applied"])
        assert outcomes == {"noted": 1, "duplicate": n_workers - 1}, (k, outcomes)
    assert sorted(n.content for n in dup_notes) == sorted(
        f"identical retry note {k}" for k in range(dups)
    )
    assert not [p for p in memory_dir.rglob(f"{TEMP_PREFIX}*")]
    assert os.path.exists(memory_dir / "memory.db") or os.environ.get("MEMDIR_DATABASE_URL")


def test_text_with_no_wide_spelling_skips_the_wide_pattern() -> None:  # R4 C
    """defang decides from one small character class whether a non-ASCII text needs the
    wide pattern: every non-ASCII character that a letter of the keyword, or the invisible
    class between them, can match (case ignored) is in that class, so the plain pattern
    finds every marker of the rest. Checked over every code point."""
    from memdir import markers

    letters = sorted(set("_memorize_begin_end"))
    units = "|".join(markers._unit(c) for c in letters)
    one = re.compile(f"(?:{units}|[{markers._INVISIBLE}])", re.IGNORECASE)
    everything = "".join(chr(cp) for cp in range(0x80, 0x110000) if not 0xD800 <= cp < 0xE000)
    matched = set(one.findall(everything))
    flagged = {c for c in matched if markers._spellable(c)}
    assert len(matched) > 300 and matched == flagged
    assert not any(markers._spellable(chr(cp)) for cp in range(0x80))  # ASCII: _NARROW's
    # a JSON escape starts with a backslash before u or U, and nothing else folds to u
    assert {chr(cp) for cp in range(0x110000) if re.fullmatch("u", chr(cp), re.I)} == {"u", "U"}
    # text the class clears is defanged as the wide pattern would: an em dash, accents
    for text in (
        "- ci-time — CI takes 12 min",
        "café MEMDIR_MEMORIZE_BEGIN naïve",
        "x—_memorize_end",
        '{"text": "a\\nb \\"MEMDIR_MEMORIZE_END\\" \\\\ — c"}',
    ):
        assert not markers._spellable(text)
        wide = markers._wide().sub("#", text)
        assert (markers.defang(text) == text) == (wide == text)
        assert markers.has_marker(text) == (wide != text)
    for escaped in ("MEMDIR\\u005fMEMORIZE_BEGIN", "x\\n MEMDIR\\\\U005FMEMORIZE_END"):
        assert not markers._plain_only(escaped) and markers.has_marker(escaped)
    assert markers.defang("café MEMDIR_MEMORIZE_BEGIN") == (
        "café [MEMDIR memorize-begin marker, defanged]"
    )
    assert markers.defang("M\u200bEMDIR_MEMORIZE_BEG\u0130N") != "M\u200bEMDIR_MEMORIZE_BEG\u0130N"
