"""Corrupt and hand-edited files (Z): a clear error naming the file, the file
left in place, the rest of memory working."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdir import Memory


@pytest.mark.sqlite_only  # memory.db overwritten with garbage; a team store has no file
def test_garbage_database_is_named_and_files_still_work(run, state_dir: Path) -> None:  # Z
    mem = Memory()
    mem.hot_set("Name: Ada\n")
    mem.write_entry("good", "a good entry", "body")
    mem.add_note("t1", "note one")
    mem.add_fact("a fact", "learning")
    mem.close()
    db = state_dir / "memory" / "memory.db"
    garbage = bytes(range(256)) * 8
    db.write_bytes(garbage)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    assert "good — a good entry" in run("list").out
    assert run("show", "good").out == "body\n"
    assert run("hot", "show").out == "Name: Ada\n"
    recalled = run("recall", "--task", "t1").out
    assert "- good — a good entry" in recalled and "note one" in recalled
    failed = run("fact", "add", "more", "-c", "learning")
    assert failed.code == 1 and str(db) in failed.err and failed.err.count("\n") == 1
    assert db.read_bytes() == garbage  # left in place


def test_binary_junk_in_hot_md_is_refused_not_rewritten(run, state_dir: Path) -> None:  # H4, Z
    hot = state_dir / "memory" / "HOT.md"
    hot.parent.mkdir(parents=True)
    junk = b"Name: Ada\n\xff\xfe\x00binary\n"
    hot.write_bytes(junk)
    result = run("hot", "append", "more")
    assert result.code == 1 and "HOT.md is not UTF-8" in result.err
    assert hot.read_bytes() == junk
    assert run("hot", "show").code == 0  # still readable, with replacement characters


def test_non_utf8_task_notes_and_daily_log_are_left_alone(memory: Memory) -> None:  # Z
    from memdir import StorageError

    notes = Path(memory.path) / "tasks" / "t.md"
    notes.parent.mkdir(parents=True)
    notes.write_bytes(b"- 2026-01-01T00:00:00Z caf\xe9\n")
    try:
        memory.add_note("t", "new")
    except StorageError as exc:
        assert "tasks/t.md is not UTF-8" in str(exc)
    else:
        raise AssertionError("a latin-1 notes file was rewritten")
    assert notes.read_bytes() == b"- 2026-01-01T00:00:00Z caf\xe9\n"
