"""W1: the writers of many documents at once — an import from another agent's memory (N4),
an archive import (N3), the retention sweep of task notes (T4) — write the scope's rows in
team mode, as every other writer does: what they wrote is rendered into a second machine's
memory root, and what another machine (or a hand edit) wrote meanwhile is not lost. Two
"machines" are two state dirs with their own memory roots and the same database URL; a real
server (tests/pg_server.py). On SQLite the same writers are the files' (test_importers.py,
test_archive.py, test_tasks.py).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dbrows import look
from memdir import Memory
from memdir.curation import archive, importers
from memdir.models import ImportReport
from memdir.testing import FixedClock

pytestmark = pytest.mark.usefixtures("pg_server")

HOUR = 3600.0
RETENTION = 720 * HOUR
JAN_14 = datetime(2026, 1, 14, 10, 0, tzinfo=UTC).timestamp()


def machine(tmp_path: Path, name: str, url: str | None) -> dict[str, str]:
    """One machine's environment: its own state dir and memory root; `url` None: local."""
    state = tmp_path / name
    state.mkdir(exist_ok=True)
    env = {**os.environ, "MEMDIR_STATE_DIR": str(state)}
    env.pop("MEMDIR_MEMORY_DIR", None)
    env.pop("MEMDIR_DATABASE_URL", None)
    if url is not None:
        env["MEMDIR_DATABASE_URL"] = url
    return env


def rows(url: str) -> dict[str, str | None]:
    """path -> body of every stored document (None: deleted)."""
    with look(url) as db:  # the scope's rows, as its stores see them (L4)
        found = db.execute('SELECT path, body FROM "memdir_default".documents').fetchall()
    return {path: body for path, body in found}


def conflicts(url: str) -> list[str]:
    with look(url) as db:
        found = db.execute('SELECT path FROM "memdir_default".document_conflicts').fetchall()
    return [path for (path,) in found]


def workspace(root: Path) -> Path:
    """An OpenClaw workspace: two daily logs and a heartbeat state (what memdir keeps whole)."""
    folder = root / "workspace" / "memory"
    folder.mkdir(parents=True)
    (folder / "2026-01-14.md").write_text("# 2026-01-14\n\n## 09:12\nSet up CI.\n", "utf-8")
    (folder / "2026-01-15.md").write_text("# 2026-01-15\n\n## 17:40\nShipped 0.9.\n", "utf-8")
    state = {"lastChecks": {"email": 1767225600}}
    (folder / "heartbeat-state.json").write_text(json.dumps(state), "utf-8")
    return root / "workspace"


def reasons(report: ImportReport) -> dict[str, str | None]:
    return {item.target: item.reason for item in report.skipped}


def test_w1_n4_imported_daily_logs_and_heartbeat_are_rows_every_machine_renders(
    tmp_path: Path, pg_url: str, run: Any
) -> None:  # W1 N4 E1 B1
    """`memdir import --from openclaw` (a real process) on machine a."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    done = run("import", "--from", "openclaw", str(workspace(tmp_path)), "--json", env=a)
    assert done.code == 0, done.err
    assert {i["target"] for i in json.loads(done.out)["imported"]} == {
        "daily/2026-01-14.md",
        "daily/2026-01-15.md",
        "heartbeat-state.json",
    }
    stored = rows(pg_url)
    assert stored["daily/2026-01-14.md"] == "# 2026-01-14\n\n## 09:12\nSet up CI.\n"
    assert stored["daily/2026-01-15.md"] == "# 2026-01-15\n\n## 17:40\nShipped 0.9.\n"
    assert json.loads(stored["heartbeat-state.json"] or "") == {"lastChecks": {"email": 1767225600}}
    with Memory(env=b) as two:
        assert two.daily("2026-01-15") == stored["daily/2026-01-15.md"]
        assert {c.name: c.last for c in two.heartbeat_status()}["email"] == 1767225600
        root = Path(two.layout.memory_dir)
        assert (root / "daily" / "2026-01-14.md").read_text("utf-8") == stored[
            "daily/2026-01-14.md"
        ]
    assert conflicts(pg_url) == []


def test_w1_n4_an_import_keeps_what_another_machine_or_a_hand_edit_wrote(
    tmp_path: Path, pg_url: str
) -> None:  # W1 N4
    """Machine b logs 2026-01-14 after machine a last looked; a's hand-made heartbeat state
    was never stored. The import (no --force) finds both as stored and keeps them; with
    --force it replaces them, for every machine."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- machine a")
        root_a = Path(one.layout.memory_dir)
    with Memory(env=b, clock=FixedClock(JAN_14)) as two:
        two.daily_append("b's line of the day")
    assert not (root_a / "daily" / "2026-01-14.md").exists()  # a has not looked since
    hand = '{"lastChecks": {"email": 1700000000}}\n'
    (root_a / "heartbeat-state.json").write_text(hand, "utf-8")
    ws = str(workspace(tmp_path))
    with Memory(env=a) as one:
        report = importers.run(one, "openclaw", ws)
    skipped = reasons(report)
    assert skipped["daily/2026-01-14.md"] == importers.EXISTS
    assert skipped["heartbeat-state.json"] == importers.EXISTS
    stored = rows(pg_url)
    assert "b's line of the day" in (stored["daily/2026-01-14.md"] or "")
    assert stored["heartbeat-state.json"] == hand
    assert (root_a / "daily" / "2026-01-14.md").read_text("utf-8") == stored["daily/2026-01-14.md"]
    assert conflicts(pg_url) == []
    with Memory(env=a) as one:
        forced = importers.run(one, "openclaw", ws, force=True)
    assert "daily/2026-01-14.md" in {i.target for i in forced.imported}
    with Memory(env=b) as two:
        assert two.daily("2026-01-14") == "# 2026-01-14\n\n## 09:12\nSet up CI.\n"
        assert {c.name: c.last for c in two.heartbeat_status()}["email"] == 1767225600
    assert conflicts(pg_url) == []


def local_archive(tmp_path: Path) -> Path:
    """An archive of a local store (memory.db) holding a document of every kind."""
    with Memory(env=machine(tmp_path, "local", None), clock=FixedClock(JAN_14)) as mem:
        mem.hot_append("- from the archive")
        mem.daily_append("archived day")
        mem.write_entry("deploy-notes", "How deploys go", "Deploy on Tuesdays.")
        mem.start_task("t1")
        mem.add_note("t1", "archived note")
        mem.heartbeat_mark("email")
        out = tmp_path / "store.jsonl"
        archive.export_to(mem, str(out))
    return out


def test_w1_n3_an_archive_import_is_rows_every_machine_renders(
    tmp_path: Path, pg_url: str, run: Any
) -> None:  # W1 N3
    """`memdir import ARCHIVE` (a real process) into machine a's empty scope."""
    out = local_archive(tmp_path)
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    done = run("import", str(out), "--json", env=a)
    assert done.code == 0, done.err
    assert json.loads(done.out)["skipped"] == []
    stored = rows(pg_url)
    assert stored["HOT.md"] == "- from the archive\n"
    assert "archived day" in (stored["daily/2026-01-14.md"] or "")
    assert "Deploy on Tuesdays." in (stored["global/deploy-notes.md"] or "")
    assert "archived note" in (stored["tasks/t1.md"] or "")
    assert "email" in (stored["heartbeat-state.json"] or "")
    with Memory(env=b) as two:
        assert two.hot() == "- from the archive\n"
        assert "archived note" in two.notes("t1")[0].content
        assert two.entry("deploy-notes").content == "Deploy on Tuesdays.\n"
        root = Path(two.layout.memory_dir)
        for path, body in stored.items():
            assert (root / path).read_text("utf-8") == body, path
        assert "deploy-notes" in (root / "MEMORY.md").read_text("utf-8")  # derived there
    assert conflicts(pg_url) == []


def test_w1_n3_a_forced_archive_import_keeps_what_it_replaced_and_the_hand_edits(
    tmp_path: Path, pg_url: str
) -> None:  # W1 N3 H4
    """Machine b appends to HOT.md after machine a last looked; a has a hand-written daily
    log of a day the archive does not hold. A forced import into a replaces HOT.md for
    every machine, keeps the stored text it replaced (b's line with it) in a's HOT.md.bak,
    and stores the hand edit."""
    out = local_archive(tmp_path)
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- a's line")
        root_a = Path(one.layout.memory_dir)
    with Memory(env=b) as two:
        two.hot_append("- b's line")
    (root_a / "daily").mkdir()
    (root_a / "daily" / "2026-02-01.md").write_text("# 2026-02-01\n\nby hand on a\n", "utf-8")
    with Memory(env=a) as one:
        archive.import_archive(one, str(out), force=True)
    assert (root_a / "HOT.md.bak").read_text("utf-8") == "- a's line\n- b's line\n"
    stored = rows(pg_url)
    assert stored["HOT.md"] == "- from the archive\n"
    assert stored["daily/2026-02-01.md"] == "# 2026-02-01\n\nby hand on a\n"
    assert "HOT.md.bak" not in stored  # a file of the machine that wrote, not a row
    with Memory(env=b) as two:
        assert two.hot() == "- from the archive\n"
        assert two.daily("2026-02-01") == "# 2026-02-01\n\nby hand on a\n"
    assert conflicts(pg_url) == []


def ended_tasks(env: dict[str, str], clock: FixedClock, *tasks: str) -> Path:
    """Tasks started, noted and ended on one machine; its memory root."""
    with Memory(env=env, clock=clock) as mem:
        for task in tasks:
            mem.start_task(task)
            mem.add_note(task, f"{task} note")
            mem.end_task(task)
        return Path(mem.layout.memory_dir)


def test_w1_t4_pruned_notes_leave_the_rows_and_every_view(tmp_path: Path, pg_url: str) -> None:
    # W1 T4
    """The sweep deletes the stored notes (rows with no body), so every machine drops the
    files, and the machine that swept does not render them back: its view held only those
    notes, and every file gone at once must not read as a wiped view there."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    clock = FixedClock()
    root_a = ended_tasks(a, clock, "t1", "t2")
    with Memory(env=b, clock=clock) as two:
        assert [n.content for n in two.notes("t1")] == ["t1 note"]  # rendered on b
        root_b = Path(two.layout.memory_dir)
    assert (root_b / "tasks" / "t2.md").exists()
    clock.advance(RETENTION + HOUR)
    with Memory(env=a, clock=clock) as one:
        assert sorted(p.task for p in one.prune()) == ["t1", "t2"]
        assert one.notes("t1") == [] and one.notes("t2") == []  # refreshed: not back
        assert sorted(os.listdir(root_a / "tasks")) == []
    stored = rows(pg_url)
    assert stored["tasks/t1.md"] is None and stored["tasks/t2.md"] is None
    with Memory(env=b, clock=clock) as two:
        assert two.notes("t2") == []
        assert sorted(os.listdir(root_b / "tasks")) == []
    assert conflicts(pg_url) == []


def test_w1_t4_the_sweep_keeps_a_note_another_machine_wrote(tmp_path: Path, pg_url: str) -> None:
    # W1 T4
    """Machine b notes a running task after machine a last looked: a's sweep removes only
    the expired notes, and b's note reaches a's view."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    clock = FixedClock()
    root_a = ended_tasks(a, clock, "t1")
    clock.advance(RETENTION + HOUR)
    with Memory(env=b, clock=clock) as two:
        two.start_task("t3")
        two.add_note("t3", "b's note of a running task")
    with Memory(env=a, clock=clock) as one:
        assert [p.task for p in one.prune()] == ["t1"]
        assert [n.content for n in one.notes("t3")] == ["b's note of a running task"]
    assert sorted(os.listdir(root_a / "tasks")) == ["t3.md"]
    stored = rows(pg_url)
    assert stored["tasks/t1.md"] is None and "b's note" in (stored["tasks/t3.md"] or "")
    assert conflicts(pg_url) == []


def test_w1_inside_a_bulk_write_a_hand_edit_goes_in_first(tmp_path: Path, pg_url: str) -> None:
    # W1 H1
    """Documents.bulk (what the imports and the sweep write in) looks at the changed file
    only: a hand edit of that file made inside it is stored before the change is made on
    it, and one of another file is stored when the bulk write ends; no conflict."""
    a, b = machine(tmp_path, "a", pg_url), machine(tmp_path, "b", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- first")
        hot, root = Path(one.layout.hot), Path(one.layout.memory_dir)
        with one.docs.bulk():
            hot.write_text("- first\n- by hand\n", "utf-8")
            (root / "daily").mkdir()
            (root / "daily" / "2026-03-01.md").write_text("# 2026-03-01\n\nhand\n", "utf-8")
            one.docs.change(one.layout.hot, "HOT.md", lambda held: (held or "") + "- in bulk\n")
            assert "daily/2026-03-01.md" not in rows(pg_url)  # not looked at yet
        stored = rows(pg_url)
        assert stored["HOT.md"] == "- first\n- by hand\n- in bulk\n"
        assert stored["daily/2026-03-01.md"] == "# 2026-03-01\n\nhand\n"
        assert hot.read_text("utf-8") == stored["HOT.md"]
    with Memory(env=b) as two:
        assert two.hot() == "- first\n- by hand\n- in bulk\n"
        assert two.daily("2026-03-01") == "# 2026-03-01\n\nhand\n"
    assert conflicts(pg_url) == []


def test_w1_a_hand_edit_before_a_bulk_write_renders_is_kept(tmp_path: Path, pg_url: str) -> None:
    # W1 H1
    """What put() stores inside a bulk write is rendered when it ends; a file saved by hand
    in between is not written over: both are kept (the row's in the file, the hand edit
    beside it as a conflict, which doctor reports)."""
    a = machine(tmp_path, "a", pg_url)
    with Memory(env=a) as one:
        one.hot_append("- first")
        day = Path(one.layout.memory_dir) / "daily" / "2026-03-02.md"
        with one.docs.bulk():
            one.docs.put(str(day), "daily-2026-03-02", lambda _held: "# 2026-03-02\n\nput\n")
            assert not day.exists()  # rendered when the bulk write ends
            day.parent.mkdir(exist_ok=True)
            day.write_text("# 2026-03-02\n\nby hand meanwhile\n", "utf-8")
        assert day.read_text("utf-8") == "# 2026-03-02\n\nput\n"
        [kept] = one.docs.conflicts()
        assert kept.path == "daily/2026-03-02.md" and "by hand meanwhile" in kept.body
        assert "by hand meanwhile" in (day.parent / f"2026-03-02.md.conflict-{kept.id}").read_text()
    assert rows(pg_url)["daily/2026-03-02.md"] == "# 2026-03-02\n\nput\n"
