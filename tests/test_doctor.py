"""`memdir doctor [--json] [--fix]` (N2): each check fires on a store broken in exactly
its way, says what to do, and --fix repairs only what is safe, leaving the rest untouched.
Real files, real SQLite, the real CLI; no mocks."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memdir import Memory
from memdir.curation import doctor
from memdir.errors import ReadOnlyError
from memdir.testing import FixedClock

DAY = 86400.0


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(time.time())  # file ages (mtimes) and the store's times agree


@pytest.fixture
def healthy(state_dir: Path, clock: FixedClock) -> Iterator[Memory]:
    """A store with something in every tier, and its index caught up: nothing to report."""
    with Memory(clock=clock) as memory:
        memory.hot_append("Name: Ada, timezone Europe/London")
        memory.add_fact("Deploys go through staging first", "convention")
        memory.add_fact("The user prefers short answers with code first", "preference")
        memory.write_entry("ci-duration", "CI takes ~12 min", "Main's CI runs 12 minutes.")
        memory.write_entry("release-day", "Releases on Tuesdays", "Cut from main on Tuesdays.")
        memory.write_procedure("deploy", "---\ndescription: how to deploy\n---\n1. make test\n")
        memory.start_task("fix-login")
        memory.add_note("fix-login", "Root cause: the session cookie is not renewed")
        memory.daily_append("Looked at the login bug")
        memory.heartbeat_mark("email")
        memory.search("deploys", mode="lexical")  # catches the search index up with the files
        yield memory


def checks(report: doctor.Report, *severities: str) -> set[str]:
    wanted = severities or doctor.SEVERITIES
    return {f.check for f in report.findings if f.severity in wanted}


def find(report: doctor.Report, check: str) -> list[doctor.Finding]:
    return [f for f in report.findings if f.check == check]


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file's bytes and mtime, and every folder (by path) under `root`."""
    found: dict[str, tuple[bytes, int] | None] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root) + "/"] = None
        for name in names:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = (
                Path(path).read_bytes(),
                os.stat(path).st_mtime_ns,
            )
    return found


def age(path: Path, days: float) -> None:
    old = os.stat(path).st_mtime - days * DAY
    os.utime(path, (old, old))


# -- a healthy store, and read-only -----------------------------------------------------------


def test_healthy_store_has_nothing_to_report(healthy: Memory) -> None:
    report = doctor.run(healthy)
    assert report.findings == []
    assert report.ok and report.fixed == []
    assert report.database["exists"] and report.database["schema"] >= 6
    assert report.database["facts"]["active"] == 2


def test_plain_doctor_writes_nothing(healthy: Memory, run: Callable, state_dir: Path) -> None:
    # N2: without --fix nothing is written: not the db, not MEMORY.md, not a cache.
    # A store with something for every fixable check, so a write would have had reasons.
    root = Path(healthy.path)
    (root / "global" / "ci-duration.md").unlink()
    (root / "MEMORY.md").write_text("- edited by hand\n", encoding="utf-8")
    (root / "tasks" / "gone.md").write_text("- an orphan note\n", encoding="utf-8")
    age(root / "tasks" / "gone.md", 60)
    (root / ".tmp-HOT.md.123.0123456789ab").write_text("half a write", encoding="utf-8")
    age(root / ".tmp-HOT.md.123.0123456789ab", 1)
    healthy.close()
    before = snapshot(state_dir)
    with Memory() as memory:
        report = doctor.run(memory)
    assert {"entries.index", "tasks.orphan", "layout.temp", "index.search"} <= checks(report)
    result = run("doctor", "--json")
    assert result.code == 0, result.err
    assert {f["check"] for f in result.json()["findings"]} == checks(report)
    # SQLite makes and removes its -wal/-shm pair as any reader does: the folder's own
    # mtime may move, but no file or folder is added, removed or changed
    assert snapshot(state_dir) == before


@pytest.mark.sqlite_only  # team mode: HOT.md is a row, so writing it makes the scope (W1)
def test_doctor_on_a_store_without_a_database_creates_none(run: Callable, state_dir: Path) -> None:
    with Memory() as memory:
        memory.hot_append("Name: Ada")  # hot memory alone never needs memory.db
        report = doctor.run(memory)
    assert [(f.check, f.severity) for f in report.findings] == [("db.missing", "info")]
    assert run("doctor").code == 0
    assert not (state_dir / "memory" / "memory.db").exists()


def test_a_subagent_session_may_diagnose_but_not_fix(healthy: Memory, run: Callable) -> None:
    # U2: read-only sessions still run doctor; --fix is a write and is refused
    parent = healthy.start_session()
    child = healthy.start_session(parent=parent.id)
    (Path(healthy.path) / "MEMORY.md").write_text("stale\n", encoding="utf-8")
    result = run("--session", child.id, "doctor")
    assert result.code == 0 and "entries.index" in result.out
    with Memory(session=child.id, clock=healthy.clock) as sub:
        assert checks(doctor.run(sub)) == {"entries.index"}
        with pytest.raises(ReadOnlyError):
            doctor.run(sub, fix=True)
    refused = run("--session", child.id, "doctor", "--fix")
    assert refused.code == 1 and refused.err.startswith("memdir: error:")
    assert (Path(healthy.path) / "MEMORY.md").read_text(encoding="utf-8") == "stale\n"


# -- global entries and the index (G3, G4) ----------------------------------------------------


def test_hand_edited_memory_md_is_found_and_rebuilt(healthy: Memory) -> None:
    index = Path(healthy.path) / "MEMORY.md"
    good = index.read_text(encoding="utf-8")
    index.write_text(good + "- my own note\n", encoding="utf-8")
    report = doctor.run(healthy)
    [finding] = report.findings
    assert (finding.check, finding.severity, finding.fixable) == ("entries.index", "warning", True)
    # N2: advice in the caller's terms, here the library's
    assert "my own note" in finding.message and "doctor.run(memory, fix=True)" in finding.action
    fixed = doctor.run(healthy, fix=True)
    assert fixed.findings == [] and any("MEMORY.md" in line for line in fixed.fixed)
    assert index.read_text(encoding="utf-8") == good


def test_entry_deleted_by_hand_while_the_index_has_it(healthy: Memory) -> None:
    (Path(healthy.path) / "global" / "ci-duration.md").unlink()
    report = doctor.run(healthy)
    assert checks(report) == {"entries.index", "entries.cache", "index.search"}
    assert "ci-duration" in find(report, "entries.index")[0].message
    assert find(report, "index.search")[0].where == ["global/ci-duration.md"]
    assert all(f.fixable for f in report.findings)
    assert doctor.run(healthy, fix=True).findings == []
    assert doctor.run(healthy).findings == []  # a second run is clean
    assert "ci-duration" not in (Path(healthy.path) / "MEMORY.md").read_text(encoding="utf-8")


def test_broken_frontmatter_is_an_error_left_as_it_is(healthy: Memory, run: Callable) -> None:
    # G1/P2, Z: a broken file is named with the parser's message and never rewritten
    entry = Path(healthy.path) / "global" / "broken.md"
    entry.write_text("---\nname: broken\ndescription: [unclosed\n---\nbody\n", encoding="utf-8")
    proc = Path(healthy.path) / "procedures" / "bad.md"
    proc.write_text("---\ndescription: never closed\n1. step\n", encoding="utf-8")
    healthy.close()
    before = snapshot(Path(healthy.path))
    with Memory() as memory:
        report = doctor.run(memory, fix=True)
    [bad_entry] = find(report, "entries.frontmatter")
    assert bad_entry.severity == "error" and bad_entry.where == ["global/broken.md"]
    assert "global/broken.md" in bad_entry.message and "frontmatter" in bad_entry.message
    [bad_proc] = find(report, "procedures.frontmatter")
    assert "never closed" in bad_proc.message and not bad_proc.fixable
    assert not report.ok
    after = snapshot(Path(healthy.path))
    for rel in ("global/broken.md", "procedures/bad.md", "HOT.md"):
        assert after[rel] == before[rel]
    result = run("doctor")
    assert result.code == 1 and result.err == ""  # the report is the output, not an error
    assert "ERROR    entries.frontmatter: global/broken.md" in result.out


def test_a_corrupt_heartbeat_state_is_an_error_left_in_place(healthy: Memory) -> None:
    state = Path(healthy.path) / "heartbeat-state.json"
    state.write_text("{not json", encoding="utf-8")
    report = doctor.run(healthy, fix=True)
    [finding] = report.findings
    assert (finding.check, finding.severity) == ("heartbeat.state", "error")
    assert "heartbeat-state.json" in finding.message
    assert state.read_text(encoding="utf-8") == "{not json"


# -- hot memory (H2, H3) ----------------------------------------------------------------------


def test_hot_md_over_its_cap_by_hand_is_an_error_never_cut(healthy: Memory) -> None:
    hot = Path(healthy.path) / "HOT.md"
    hot.write_text("x" * 6000, encoding="utf-8")
    report = doctor.run(healthy, fix=True)
    [finding] = report.findings
    assert (finding.check, finding.severity, finding.fixable) == ("hot.cap", "error", False)
    assert "6,000" in finding.message and "`memory.add_fact(" in finding.action
    assert hot.read_text(encoding="utf-8") == "x" * 6000


def test_hot_md_nearly_full_is_a_warning(healthy: Memory) -> None:
    (Path(healthy.path) / "HOT.md").write_text("é" * 4300, encoding="utf-8")  # chars, not bytes
    [finding] = doctor.run(healthy).findings
    assert (finding.check, finding.severity) == ("hot.cap", "warning")
    assert "81% full" in finding.message


def test_non_utf8_files_are_errors_naming_the_path(healthy: Memory) -> None:
    daily = Path(healthy.path) / "daily" / "2026-01-02.md"
    daily.write_bytes(b"caf\xe9 au lait\n")
    (Path(healthy.path) / "HOT.md").write_bytes(b"\xff\xfe binary")
    report = doctor.run(healthy, fix=True)
    found = find(report, "files.encoding")
    assert {f.where[0] for f in found} == {"daily/2026-01-02.md", "HOT.md"}
    assert all(f.severity == "error" and "UTF-8" in f.message for f in found)
    assert daily.read_bytes() == b"caf\xe9 au lait\n"


# -- procedures (P1) --------------------------------------------------------------------------


def test_empty_procedure_is_a_warning(healthy: Memory) -> None:
    (Path(healthy.path) / "procedures" / "todo.md").write_text(
        "---\ndescription: later\n---\n\n", encoding="utf-8"
    )
    healthy.search("deploy", mode="lexical")
    [finding] = doctor.run(healthy).findings
    assert (finding.check, finding.severity) == ("procedures.empty", "warning")
    assert "`memory.write_procedure('todo', " in finding.action


# -- tasks (T4) -------------------------------------------------------------------------------


def test_orphaned_task_notes_old_are_swept_young_are_kept(healthy: Memory) -> None:
    tasks = Path(healthy.path) / "tasks"
    (tasks / "old-orphan.md").write_text("- an old note\n", encoding="utf-8")
    (tasks / "new-orphan.md").write_text("- a new note\n", encoding="utf-8")
    healthy.search("note", mode="lexical")
    age(tasks / "old-orphan.md", 40)  # past task_retention (30 days) of file age
    report = doctor.run(healthy)
    old = [f for f in find(report, "tasks.orphan") if f.fixable]
    young = [f for f in find(report, "tasks.orphan") if not f.fixable]
    assert old[0].where == ["tasks/old-orphan.md"] and old[0].severity == "warning"
    assert young[0].where == ["tasks/new-orphan.md"] and young[0].severity == "info"
    fixed = doctor.run(healthy, fix=True)
    assert any("tasks/old-orphan.md" in line for line in fixed.fixed)
    assert not (tasks / "old-orphan.md").exists() and (tasks / "new-orphan.md").exists()
    assert [f.where for f in find(fixed, "tasks.orphan")] == [["tasks/new-orphan.md"]]
    assert (tasks / "fix-login.md").exists()  # a registered, running task's notes stay


def test_notes_of_long_ended_tasks_are_swept(healthy: Memory, clock: FixedClock) -> None:
    healthy.start_task("old-task")
    healthy.add_note("old-task", "done long ago")
    healthy.end_task("old-task")
    clock.advance(31 * DAY)
    healthy.add_note("fix-login", "still on it")  # the running task stays fresh
    healthy.search("long ago", mode="lexical")
    report = doctor.run(healthy)
    assert checks(report) == {"tasks.expired"}
    assert find(report, "tasks.expired")[0].where == ["tasks/old-task.md"]
    assert doctor.run(healthy, fix=True).findings == []
    assert not (Path(healthy.path) / "tasks" / "old-task.md").exists()


def test_a_task_left_running_without_notes_is_noted(healthy: Memory, clock: FixedClock) -> None:
    clock.advance(100 * DAY)
    os.utime(Path(healthy.path) / "tasks" / "fix-login.md", (clock.now - 95 * DAY,) * 2)
    report = doctor.run(healthy, stale_days=90)
    [idle] = find(report, "tasks.idle")
    assert idle.where == ["fix-login"] and "`memory.end_task(" in idle.action


# -- duplicates and stale facts ---------------------------------------------------------------


def test_duplicates_exact_and_near(healthy: Memory) -> None:
    root = Path(healthy.path)
    copy = (root / "global" / "ci-duration.md").read_text(encoding="utf-8")
    (root / "global" / "ci-time.md").write_text(copy.replace("ci-duration", "ci-time"), "utf-8")
    healthy.add_fact("The user prefers dark mode in the editor and terminal", "preference")
    healthy.add_fact("User prefers dark mode in editor and the terminal too", "preference")
    report = doctor.run(healthy)
    [exact] = find(report, "duplicates.exact")
    assert exact.where == ["ci-duration", "ci-time"] and exact.severity == "warning"
    near = find(report, "duplicates.near")
    assert any(f.where == [3, 4] and f.severity == "info" for f in near)
    assert not any(f.fixable for f in report.findings if f.check.startswith("duplicates"))


def test_facts_no_search_found_in_n_days(healthy: Memory, clock: FixedClock) -> None:
    clock.advance(100 * DAY)
    healthy.search("deploys staging", mode="lexical")  # finds fact 1: it is recalled, so not stale
    healthy.flush_hits()
    os.utime(Path(healthy.path) / "tasks" / "fix-login.md", (clock.now,) * 2)
    report = doctor.run(healthy, stale_days=90)
    [stale] = find(report, "facts.stale")
    assert stale.where == [2] and stale.severity == "info" and "90 days" in stale.message
    assert find(doctor.run(healthy, stale_days=200), "facts.stale") == []


def test_a_forked_fact_is_flagged_until_one_version_is_kept(healthy: Memory, run: Callable) -> None:
    """F3 W1 N2: a fact superseded twice holds in two versions; doctor names the fact, both
    versions and the commands that settle it, and says nothing once one is kept."""
    a = healthy.add_fact("Builds run on Jenkins", "decision")
    b = healthy.supersede_fact(a.id, "Builds run on GitHub Actions")
    c = healthy.supersede_fact(a.id, "Nightly builds run on Buildkite agents")
    [fork] = find(doctor.run(healthy), "facts.forked")
    assert fork.where == [a.id, b.id, c.id] and fork.severity == "warning"
    assert not fork.fixable  # which version holds is the user's call
    assert f"fact {a.id} was superseded twice" in fork.message
    out = run("doctor").out
    assert f"facts.forked: fact {a.id} was superseded twice" in out
    assert f"`memdir fact supersede {c.id} '<text of fact {b.id}>'`" in out
    assert f"`memdir fact rm {c.id}`" in out and f"`memdir fact history {a.id}`" in out
    # settled by giving one version the other's text: the report goes away
    healthy.supersede_fact(c.id, "Builds run on GitHub Actions")
    assert find(doctor.run(healthy), "facts.forked") == []
    # a fork of a fork is one finding at the later fork point; removing one settles it
    d = healthy.supersede_fact(b.id, "Builds run on GitHub Actions, 4 runners")
    e = healthy.supersede_fact(b.id, "Builds run on self-hosted GitLab runners")
    [again] = find(doctor.run(healthy), "facts.forked")
    assert again.where == [b.id, d.id, e.id]
    healthy.remove_fact(e.id)
    assert find(doctor.run(healthy), "facts.forked") == []


# -- the database -----------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_garbage_memory_db_is_an_error_and_the_files_are_still_checked(
    healthy: Memory, run: Callable
) -> None:
    healthy.close()
    db = Path(healthy.path) / "memory.db"
    db.write_bytes(b"this is not a database at all" * 100)
    (Path(healthy.path) / "procedures" / "todo.md").write_text("", encoding="utf-8")
    (Path(healthy.path) / "MEMORY.md").write_text("stale\n", encoding="utf-8")
    with Memory() as memory:
        report = doctor.run(memory, fix=True)
    [finding] = find(report, "db.integrity")
    assert finding.severity == "error" and "not a database" in finding.message
    assert ".recover" in finding.action
    assert "procedures.empty" in checks(report)
    assert "entries.index" not in checks(report)  # MEMORY.md needs only the files (G3)
    assert report.fixed == ["rebuilt MEMORY.md and the entry cache from 2 entry file(s)"]
    assert db.read_bytes() == b"this is not a database at all" * 100
    result = run("doctor", "--json")
    assert result.code == 1 and result.json()["summary"]["errors"] == 1


@pytest.mark.sqlite_only
def test_a_deleted_database_beside_entries_is_an_error(healthy: Memory) -> None:
    healthy.close()
    for suffix in ("", "-wal", "-shm"):
        Path(healthy.path, "memory.db" + suffix).unlink(missing_ok=True)
    with Memory() as memory:
        report = doctor.run(memory)
    assert [(f.check, f.severity) for f in report.findings] == [("db.missing", "error")]
    assert not Path(healthy.path, "memory.db").exists()


@pytest.mark.sqlite_only
def test_free_pages_suggest_vacuum(healthy: Memory) -> None:
    # free pages as deleted rows leave them (a scratch table: the same pages, made faster)
    db = sqlite3.connect(Path(healthy.path) / "memory.db")
    db.execute("CREATE TABLE scratch (blob BLOB)")
    db.executemany("INSERT INTO scratch VALUES (randomblob(4000))", [()] * 1000)
    db.commit()
    db.execute("DROP TABLE scratch")
    db.commit()
    db.close()
    [finding] = find(doctor.run(healthy), "db.size")
    assert "free pages" in finding.message and "VACUUM" in finding.action
    assert not finding.fixable


# -- the layout (L2) --------------------------------------------------------------------------


def test_stray_files_are_warned_about_and_never_removed(healthy: Memory) -> None:
    root = Path(healthy.path)
    (root / "notes.txt").write_text("mine", encoding="utf-8")
    (root / "global" / "Not_Kebab.md").write_text("mine too", encoding="utf-8")
    (root / "attic").mkdir()
    (root / ".DS_Store").write_bytes(b"\0")
    report = doctor.run(healthy, fix=True)
    strays = find(report, "layout.stray")
    assert [f.where[0] for f in strays] == ["attic/", "global/Not_Kebab.md", "notes.txt"]
    assert all(f.severity == "warning" and not f.fixable for f in strays)
    assert "memdir never reads it" in strays[0].message
    assert (root / "notes.txt").exists() and (root / "global" / "Not_Kebab.md").exists()


def test_symlinks_out_of_the_memory_root_are_named_once(healthy: Memory, tmp_path: Path) -> None:
    # X1: memdir never reads through a link that leads outside the memory root
    outside = tmp_path / "elsewhere.md"
    outside.write_text("---\nname: link\ndescription: outside\n---\nsecret\n", "utf-8")
    (Path(healthy.path) / "global" / "link.md").symlink_to(outside)
    report = doctor.run(healthy, fix=True)
    assert [(f.check, f.where) for f in report.findings] == [("layout.symlink", ["global/link.md"])]
    assert (Path(healthy.path) / "global" / "link.md").is_symlink()


def test_temp_files_of_killed_writes_are_removed_by_fix(healthy: Memory, run: Callable) -> None:
    # storage/files.py: atomic writes go through .tmp-<name>.<pid>.<12 hex>
    root = Path(healthy.path)
    left = [
        root / ".tmp-HOT.md.4242.0123456789ab",
        root / "global" / ".tmp-ci-duration.md.7.aaaaaaaaaaaa",
        root / "tasks" / ".tmp-fix-login.md.99.bbbbbbbbbbbb",
    ]
    for path in left:
        path.write_text("half a write", encoding="utf-8")
        age(path, 0.01)  # ~15 minutes: no live writer takes that long
    fresh = root / "daily" / ".tmp-2026-01-01.md.5.cccccccccccc"
    fresh.write_text("a write in progress", encoding="utf-8")
    [finding] = doctor.run(healthy).findings
    assert finding.check == "layout.temp" and finding.fixable
    assert sorted(finding.where) == sorted(str(p.relative_to(root)) for p in left)
    result = run("doctor", "--fix")
    assert result.code == 0, result.err
    assert result.out.count("fixed: removed") == 3
    assert not any(p.exists() for p in left) and fresh.exists()
    assert doctor.run(healthy).findings == []


# -- the CLI ----------------------------------------------------------------------------------


def test_cli_text_and_json(healthy: Memory, run: Callable) -> None:
    (Path(healthy.path) / "MEMORY.md").unlink()
    (Path(healthy.path) / "stray.txt").write_text("x", encoding="utf-8")
    result = run("doctor")
    assert result.code == 0 and result.err == ""
    lines = result.out.splitlines()
    assert lines[1].startswith("WARNING  ")  # grouped by severity, worst first
    assert "entries.index: MEMORY.md does not match global/: it is missing" in result.out
    assert lines[-1].startswith("0 errors, 2 warnings, 0 notes; 1 fixable with --fix")
    data = run("doctor", "--json").json()
    assert set(data) == {"root", "findings", "fixed", "summary", "database", "elapsed_ms"}
    assert data["summary"] == {"errors": 0, "warnings": 2, "info": 0, "fixable": 1, "fixed": 0}
    assert {"check", "severity", "where", "message", "action", "fixable"} == set(
        data["findings"][0]
    )
    fixed = run("doctor", "--fix", "--json").json()
    assert fixed["fixed"] and [f["check"] for f in fixed["findings"]] == ["layout.stray"]
    assert json.loads(run("doctor", "--json").out)["summary"]["fixable"] == 0


def test_cli_stale_days_must_be_positive(run: Callable) -> None:
    result = run("doctor", "--stale-days", "0")
    assert result.code == 1 and "stale-days" in result.err
