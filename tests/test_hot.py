"""Hot memory: HOT.md under a hard cap, atomic writes with a backup (H1-H6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memdir import Memory, NotFoundError, ReadOnlyError, ValidationError
from memdir.hot import KEEP_CHARS, MARKER_RE, truncate
from memdir.tools import tool_schemas

CAP = 5250


def test_hot_text_is_returned_verbatim(memory: Memory) -> None:  # H1
    text = "# Who\nName: Ada — TZ Europe/Paris\n\n  indented *markdown* stays\n"
    memory.hot_set(text)
    assert memory.hot() == text
    assert Path(memory.layout.hot).read_text(encoding="utf-8") == text


def test_cap_counts_characters_not_bytes(memory: Memory) -> None:  # H2
    text = "é" * CAP  # 10,500 bytes, 5,250 characters
    result = memory.hot_set(text)
    assert result.cut_chars == 0
    assert memory.hot() == text


def test_content_of_exactly_the_cap_is_unchanged() -> None:  # H3
    text = ("x" * 99 + "\n") * 52 + "y" * 50
    assert len(text) == CAP
    assert truncate(text, CAP) == (text, 0)


def test_truncation_cuts_the_end_at_a_line_break_with_a_marker() -> None:  # H3
    lines = [f"line {i:03d} " + "z" * 40 for i in range(200)]
    text = "\n".join(lines)
    result, cut = truncate(text, CAP)
    assert len(result) <= CAP
    body, marker = result.rsplit("\n", 1)
    assert MARKER_RE.search("\n" + marker)
    assert f"{cut} chars cut" in marker
    assert text.startswith(body) and text[len(body)] == "\n"  # cut at a line break
    assert len(body) + cut == len(text)
    assert body.split("\n")[-1] in lines  # the last kept line is whole


def test_truncation_never_sacrifices_the_first_600_chars() -> None:  # H3
    head = "h" * 700  # no line break after the head: the cut must fall mid-line
    text = head + "t" * 6000
    result, cut = truncate(text, CAP)
    assert len(result) <= CAP
    assert result.startswith(head)
    assert cut == len(text) - len(result.rsplit("\n", 1)[0])
    # a line break early in the head is not used: the cut would eat into the first 600
    text2 = "a" * 100 + "\n" + "b" * 6000
    result2, _ = truncate(text2, CAP)
    assert result2.startswith(text2[:KEEP_CHARS])
    assert len(result2.rsplit("\n", 1)[0]) > KEEP_CHARS


def test_write_reports_truncation_and_last_written_goes_first(memory: Memory) -> None:  # H3
    memory.hot_set("Name: Ada\n" + "keep me\n" * 100)
    results = [memory.hot_append(f"note {i:03d} " + "n" * 30) for i in range(200)]
    first_cut = next(i for i, r in enumerate(results) if r.cut_chars)
    assert results[first_cut].warning and "cut" in results[first_cut].warning
    text = memory.hot()
    assert len(text) <= CAP
    assert text.startswith("Name: Ada\n" + "keep me\n" * 100)
    assert "note 000" in text
    assert "note 199" not in text  # the newest appends are the first cut
    assert f"note {first_cut:03d}" not in text
    assert text.count("HOT TRUNCATED") <= 1  # an old marker is replaced, never stacked


def test_writes_warn_from_80_percent(memory: Memory) -> None:  # H3
    below = memory.hot_set("x" * (int(CAP * 0.8) - 1))
    assert below.warning is None
    at = memory.hot_set("x" * int(CAP * 0.8))
    assert at.warning is not None and "80%" in at.warning


def test_every_write_keeps_the_previous_content_in_bak(memory: Memory) -> None:  # H4
    memory.hot_set("version one\n")
    memory.hot_append("two")
    assert Path(memory.layout.hot + ".bak").read_text() == "version one\n"
    memory.hot_set("three\n")
    assert Path(memory.layout.hot + ".bak").read_text() == "version one\ntwo\n"
    leftovers = [n for n in os.listdir(memory.path) if n.startswith(".tmp-")]
    assert leftovers == []


def test_show_set_append_remove_line_and_section(memory: Memory) -> None:  # H5
    memory.hot_set("# User\n- Name: Ada\n- TZ: Europe/Paris\n\n## Project\n- memdir v1\n- ship\n")
    memory.hot_append("- prefers short answers")
    assert memory.hot().endswith("- prefers short answers\n")
    memory.hot_remove(line="TZ: Europe/Paris")
    assert "Europe/Paris" not in memory.hot()
    memory.hot_remove(section="Project")
    # the append landed in the last section, so it leaves with "Project"
    assert memory.hot() == "# User\n- Name: Ada\n"
    with pytest.raises(NotFoundError):
        memory.hot_remove(line="not there")
    with pytest.raises(NotFoundError):
        memory.hot_remove(section="Nope")


def test_ambiguous_line_removal_changes_nothing(memory: Memory) -> None:  # H5
    memory.hot_set("- likes tea\n- likes coffee\n")
    with pytest.raises(ValidationError, match="2 lines"):
        memory.hot_remove(line="likes")
    assert memory.hot() == "- likes tea\n- likes coffee\n"


def test_empty_append_is_refused(memory: Memory) -> None:  # H5
    with pytest.raises(ValidationError):
        memory.hot_append("   \n")
    assert memory.hot() == ""


def test_tool_description_says_what_belongs_in_hot_memory() -> None:  # H6
    update = next(s for s in tool_schemas() if s["name"] == "memory_update")
    text = update["description"]
    for phrase in (
        "every session",
        "5,250",
        "name, timezone, role",
        "active project",
        "everything else",
    ):
        assert phrase in text


def test_subagent_cannot_write_hot_memory(memory: Memory) -> None:  # H5, U2
    parent = memory.start_session()
    child = memory.start_session(parent=parent.id)
    sub = Memory(session=child.id)
    with pytest.raises(ReadOnlyError):
        sub.hot_append("nope")
    assert not os.path.exists(memory.layout.hot)


def test_an_earlier_cut_stays_announced_until_hot_memory_is_replaced(memory: Memory) -> None:
    # H3: a short append after a cut must not hide the cut by using the marker's room
    memory.hot_set("Name: Ada\n" + "\n".join(f"fact line {i:03d} " + "f" * 60 for i in range(80)))
    assert "HOT TRUNCATED" in memory.hot()
    memory.hot_remove(line="fact line 000")  # frees room
    memory.hot_append("short")
    text = memory.hot()
    assert len(text) <= CAP
    assert text.rstrip().endswith("-->") and "HOT TRUNCATED" in text
    memory.hot_set("fresh start\n")
    assert memory.hot() == "fresh start\n"
