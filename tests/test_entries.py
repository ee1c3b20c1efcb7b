"""Global entries and the MEMORY.md index (G1-G5)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from memdir import Memory, NotFoundError, ValidationError
from memdir.testing import FixedClock


def _frontmatter(path: Path) -> dict:  # type: ignore[type-arg]
    text = path.read_text()
    return yaml.safe_load(text.split("---\n")[1])


def test_entry_is_frontmatter_plus_body(state_dir: Path) -> None:  # G1
    mem = Memory(agent="triage", clock=FixedClock())
    entry = mem.write_entry(
        "ci-duration",
        "CI takes ~12 min",
        "# CI\nMain takes 12 minutes.",
        task="t-1",
        workflow="triage",
    )
    path = Path(mem.path) / "global" / "ci-duration.md"
    meta = _frontmatter(path)
    assert meta == {
        "name": "ci-duration",
        "description": "CI takes ~12 min",
        "agent": "triage",
        "task": "t-1",
        "workflow": "triage",
        "created": "2026-05-28T20:26:40Z",
        "updated": "2026-05-28T20:26:40Z",
    }
    assert path.read_text().endswith("---\n# CI\nMain takes 12 minutes.\n")
    assert entry.content == "# CI\nMain takes 12 minutes.\n"
    assert mem.entry("ci-duration").content == "# CI\nMain takes 12 minutes.\n"


def test_description_is_one_line(memory: Memory) -> None:  # G1
    entry = memory.write_entry("x", "first line\nsecond   line", "body")
    assert entry.description == "first line second line"
    with pytest.raises(ValidationError, match="description"):
        memory.write_entry("y", "  ", "body")
    with pytest.raises(ValidationError, match="one line"):
        memory.write_entry("y", "d" * 301, "body")


def test_upsert_keeps_created(state_dir: Path) -> None:  # G2
    clock = FixedClock()
    mem = Memory(clock=clock)
    mem.write_entry("deploy", "How we deploy", "v1")
    clock.advance(86400)
    updated = mem.write_entry("deploy", "How we deploy now", "v2")
    assert updated.created == "2026-05-28T20:26:40Z"
    assert updated.updated == "2026-05-29T20:26:40Z"
    assert mem.entry("deploy").content == "v2\n"
    assert [e.name for e in mem.entries()] == ["deploy"]


def test_index_is_regenerated_on_every_write(memory: Memory) -> None:  # G3
    index = Path(memory.path) / "MEMORY.md"
    memory.write_entry("zeta", "last one", "z")
    memory.write_entry("alpha", "first one", "a")
    assert index.read_text() == "- alpha — first one\n- zeta — last one\n"
    memory.write_entry("alpha", "first, changed", "a2")
    assert index.read_text() == "- alpha — first, changed\n- zeta — last one\n"
    memory.remove_entry("zeta")
    assert index.read_text() == "- alpha — first, changed\n"


def test_missing_stale_or_hand_edited_index_is_rebuilt(memory: Memory) -> None:  # G3
    index = Path(memory.path) / "MEMORY.md"
    memory.write_entry("alpha", "first", "a")
    index.write_text("garbage written by hand\n")
    memory.write_entry("beta", "second", "b")  # the next write rebuilds it
    assert index.read_text() == "- alpha — first\n- beta — second\n"
    index.unlink()
    assert len(memory.reindex().entries) == 2
    assert index.read_text() == "- alpha — first\n- beta — second\n"


def test_hand_edits_and_deletions_are_picked_up(memory: Memory) -> None:  # G4
    memory.write_entry("alpha", "first", "a")
    memory.write_entry("beta", "second", "b")
    folder = Path(memory.path) / "global"
    text = (
        (folder / "alpha.md")
        .read_text()
        .replace("description: first", "description: edited by hand")
    )
    (folder / "alpha.md").write_text(text)
    os.utime(folder / "alpha.md", ns=(time.time_ns(), time.time_ns() + 10**9))
    (folder / "beta.md").unlink()
    (folder / "gamma.md").write_text("---\ndescription: made by hand\n---\nbody\n")
    assert [(e.name, e.description) for e in memory.entries()] == [
        ("alpha", "edited by hand"),
        ("gamma", "made by hand"),
    ]
    recalled = memory.recall().text
    assert "- alpha — edited by hand" in recalled and "beta" not in recalled
    assert "- gamma — made by hand" in recalled


def test_recall_and_boot_see_every_hand_change_at_once_whatever_the_listing_kept(
    memory: Memory,
) -> None:  # G4, X1
    """Recall and boot answer from the listing kept whole while no entry file changed; an
    edit in place, a new file, a deletion, or a kept listing that lies (a name that is no
    name, a wrong size) each sends them back to the files."""
    memory.write_entry("alpha", "first", "a")
    memory.write_entry("beta", "second", "b")
    folder = Path(memory.path) / "global"
    assert "- alpha — first" in memory.recall().text  # from the kept listing
    path = folder / "alpha.md"
    text = path.read_text().replace("description: first", "description: FIRST")
    with open(path, "r+") as handle:  # in place: the folder's mtime does not move
        handle.write(text)
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert "- alpha — FIRST" in memory.recall().text
    (folder / "gamma.md").write_text("---\ndescription: made by hand\n---\nbody\n")
    (folder / "Not A Name.md").write_text("---\ndescription: never listed\n---\n")
    assert "- gamma — made by hand" in "".join(part.text for part in memory.boot().parts)
    (folder / "beta.md").unlink()
    recalled = memory.recall().text
    assert "beta" not in recalled and "never listed" not in recalled
    kept = json.loads(memory.store.entry_listing() or "")
    lied = [["Not A Name", ["x" for _ in range(5)]], *kept]
    memory.store.set_entry_listing(json.dumps(lied))
    assert "never listed" not in memory.recall().text
    wrong = [[name, [row[0], row[1] + 1, "a lie", *row[3:]]] for name, row in kept]
    memory.store.set_entry_listing(json.dumps(wrong))
    assert "a lie" not in memory.recall().text and "- alpha — FIRST" in memory.recall().text


def test_broken_frontmatter_is_named_and_the_rest_keeps_working(memory: Memory) -> None:
    # G4, Z
    memory.write_entry("good", "fine", "ok")
    bad = Path(memory.path) / "global" / "bad.md"
    bad.write_text("---\ndescription: [unclosed\n---\nbody\n")
    listed = {e.name: e for e in memory.entries()}
    assert listed["good"].error is None
    assert listed["bad"].error and "global/bad.md" in listed["bad"].error
    memory.reindex()
    assert (Path(memory.path) / "MEMORY.md").read_text() == "- good — fine\n"
    assert bad.read_text() == "---\ndescription: [unclosed\n---\nbody\n"  # left in place


def test_symlink_out_of_the_root_is_not_read(memory: Memory, tmp_path: Path) -> None:  # X1
    secret = tmp_path / "secret.md"
    secret.write_text("---\ndescription: private\n---\nthe secret\n")
    folder = Path(memory.path) / "global"
    folder.mkdir(parents=True)
    (folder / "leak.md").symlink_to(secret)
    [entry] = memory.entries()
    assert entry.error and "outside the memory root" in entry.error
    with pytest.raises(ValidationError, match="outside"):
        memory.entry("leak")


def test_entries_are_never_pruned(memory: Memory) -> None:  # G5
    clock = FixedClock()
    mem = Memory(clock=clock)
    mem.write_entry("keep", "forever", "x")
    clock.advance(10 * 365 * 86400)
    mem.prune()
    assert [e.name for e in mem.entries()] == ["keep"]


def test_curation_commands(run, state_dir: Path) -> None:  # G5
    mem = Memory(agent="scout")
    mem.write_entry("release-train", "Releases every second Tuesday", "Cut from main.")
    listed = run("list", "--json").json()
    assert listed[0]["name"] == "release-train" and listed[0]["agent"] == "scout"
    assert {"name", "description", "updated", "agent"} <= listed[0].keys()
    assert "release-train — Releases every second Tuesday" in run("list").out
    assert run("show", "release-train").out == "Cut from main.\n"
    assert run("path").out.strip() == str(state_dir / "memory")
    assert run("rm", "release-train").code == 0
    assert run("list").out.strip() == "no global entries"
    missing = run("show", "release-train")
    assert missing.code == 1 and "no global entry" in missing.err


def test_bad_names_and_missing_entries(memory: Memory) -> None:  # G1, X1
    for name in ("Bad_Name", "../x", "a" * 65):
        with pytest.raises(ValidationError):
            memory.write_entry(name, "d", "c")
    with pytest.raises(NotFoundError):
        memory.remove_entry("nope")
    assert not (Path(memory.path) / "global").exists() or not list(
        (Path(memory.path) / "global").iterdir()
    )


def test_no_tier_reads_a_symlink_out_of_the_root(memory: Memory, tmp_path: Path) -> None:  # X1
    """Procedures, task notes and daily logs are refused like entries: never read, never
    shown by search, recall or the duplicate guard; the file stays."""
    secret = tmp_path / "secret.md"
    secret.write_text("- 2026-01-01T00:00:00Z the kiwi secret\n")
    root = Path(memory.path)
    for folder, name in (
        ("procedures", "leak.md"),
        ("tasks", "T-1.md"),
        ("daily", "2026-01-01.md"),
    ):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).symlink_to(secret)
    [proc] = memory.procedures()
    assert proc.error and "outside the memory root" in proc.error and "kiwi" not in proc.content
    with pytest.raises(ValidationError, match="outside"):
        memory.procedure("leak")
    with pytest.raises(ValidationError, match="outside"):
        memory.notes("T-1")
    with pytest.raises(ValidationError, match="outside"):
        memory.daily("2026-01-01")
    assert memory.search("kiwi secret", mode="lexical") == []
    written = memory.write_procedure("kiwi", "- 2026-01-01T00:00:00Z the kiwi secret\n")
    assert not written.duplicate  # the guard compared nothing it may not read
    assert secret.read_text().startswith("- 2026")


# -- provenance through upserts (G1, G2) ----------------------------------------------------

MEMORIZE = (
    "MEMDIR_MEMORIZE_BEGIN\n"
    '{{"scope": "global", "name": "ci-duration", "description": "CI takes ~{n} min", '
    '"content": "Main\'s CI runs {n} minutes."}}\n'
    "MEMDIR_MEMORIZE_END\n"
)


@pytest.mark.parametrize(
    ("creator", "updaters"),
    [
        ("triage", ["reviewer"]),  # another agent
        ("triage", [None]),  # no agent: must not erase the creator
        ("triage", ["reviewer", None]),  # the last update named none: no stale updated_by
        ("triage", [None, "triage"]),  # the creator itself updates
        (None, ["reviewer"]),  # created by nobody known: stays unknown
    ],
)
def test_an_upsert_keeps_the_creator_and_records_the_updater(
    state_dir: Path, creator: str | None, updaters: list[str | None]
) -> None:  # G1 G2
    clock = FixedClock()
    Memory(agent=creator, clock=clock).write_entry(
        "ci-duration", "CI takes ~12 min", "v0", task="t-1", workflow="triage"
    )
    for n, agent in enumerate(updaters, 1):
        clock.advance(3600)
        named = {"task": "t-2", "workflow": "release"} if n == 1 else {}  # later: none
        written = Memory(agent=agent, clock=clock).write_entry(
            "ci-duration", f"CI takes ~{12 + n} min", f"v{n}", **named
        )
    last = updaters[-1]
    meta = _frontmatter(state_dir / "memory" / "global" / "ci-duration.md")
    expected = {
        "name": "ci-duration",
        "description": f"CI takes ~{12 + len(updaters)} min",
        "task": "t-2",
        "workflow": "release",
        "created": "2026-05-28T20:26:40Z",
        "updated": clock_iso(clock),
    }  # task and workflow: the latest named
    if creator:
        expected["agent"] = creator
    if last:
        expected["updated_by"] = last
    assert meta == expected
    mem = Memory()
    for entry in (written, mem.entry("ci-duration"), *mem.entries()):
        assert (entry.agent, entry.updated_by, entry.task, entry.workflow, entry.created) == (
            creator,
            last,
            "t-2",
            "release",
            "2026-05-28T20:26:40Z",
        )
        data = entry.to_dict()
        assert data["agent"] == creator and data["updated_by"] == last  # both keys, always


def clock_iso(clock: FixedClock) -> str:
    from memdir.clock import iso

    return iso(clock())


def test_list_and_show_show_the_creator_and_the_updater(run, state_dir: Path) -> None:
    # G2 G5 C: every write path keeps the creator (the CLI's memorize here)
    first = run("memorize", "--agent", "scout", input=MEMORIZE.format(n=12))
    assert first.code == 0 and "ci-duration" not in first.out
    assert run("memorize", "--agent", "fixer", input=MEMORIZE.format(n=14)).code == 0
    [listed] = run("list", "--json").json()
    shown = run("show", "ci-duration", "--json").json()
    for data in (listed, shown):
        assert (data["agent"], data["updated_by"]) == ("scout", "fixer")
        assert data["created"] <= data["updated"]
    assert "by scout, updated by fixer" in run("list").out
    assert run("memorize", input=MEMORIZE.format(n=15)).code == 0  # no agent
    [listed] = run("list", "--json").json()
    assert (listed["agent"], listed["updated_by"]) == ("scout", None)
    assert listed["description"] == "CI takes ~15 min"
