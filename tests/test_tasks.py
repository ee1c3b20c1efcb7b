"""Task notes, the task registry, lineage and the retention sweep (T1-T4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memdir import ConflictError, Memory, NotFoundError, ValidationError
from memdir.testing import FixedClock

HOUR = 3600.0
RETENTION = 720 * HOUR  # the default memory.task_retention


def test_notes_are_timestamped_and_provenance_stamped(state_dir: Path) -> None:  # T1
    mem = Memory(agent="triage", clock=FixedClock())
    mem.start_task("bug-12")
    mem.add_note("bug-12", "Root cause is in the renderer", workflow="triage", step="analyze")
    mem.add_note("bug-12", "Fix needs\ntwo lines")
    text = (Path(mem.path) / "tasks" / "bug-12.md").read_text()
    assert text == (
        "- 2026-05-28T20:26:40Z [triage/analyze] (triage) Root cause is in the renderer\n"
        "- 2026-05-28T20:26:40Z (triage) Fix needs\n  two lines\n"
    )
    notes = mem.notes("bug-12")
    assert [(n.workflow, n.step, n.agent) for n in notes] == [
        ("triage", "analyze", "triage"),
        (None, None, "triage"),
    ]
    assert notes[1].content == "Fix needs\ntwo lines"


def test_notes_are_append_only(memory: Memory) -> None:  # T1
    memory.add_note("t", "first")
    path = Path(memory.path) / "tasks" / "t.md"
    before = path.read_text()
    memory.add_note("t", "second")
    assert path.read_text().startswith(before)


def test_identical_retry_is_not_written_twice(memory: Memory) -> None:  # T2
    assert memory.add_note("t", "Deployed build 41") is True
    assert memory.add_note("t", "Deployed   build 41\n") is False  # same content, retried
    assert memory.add_note("other", "Deployed build 41") is True  # another task is separate
    assert [n.content for n in memory.notes("t")] == ["Deployed build 41"]


def test_registry_states(memory: Memory) -> None:  # T3
    task = memory.start_task("job-1")
    assert (task.state, task.parent_id, task.ended) == ("running", None, None)
    assert memory.start_task("job-1") == task  # a retried start is harmless
    ended = memory.end_task("job-1", "failed")
    assert ended.state == "failed" and ended.ended is not None
    with pytest.raises(ConflictError, match="already ended"):
        memory.end_task("job-1")
    with pytest.raises(ConflictError, match="already ended"):
        memory.start_task("job-1")
    with pytest.raises(ValidationError, match="task state"):
        memory.end_task("job-2", "exploded")
    with pytest.raises(NotFoundError):
        memory.end_task("job-2")
    with pytest.raises(NotFoundError, match="parent"):
        memory.start_task("job-3", parent="missing")
    with pytest.raises(ValidationError, match="task id"):
        memory.start_task("../etc")


def test_lineage_three_levels_deep(memory: Memory) -> None:  # T3
    memory.start_task("epic")
    memory.start_task("story", parent="epic")
    memory.start_task("subtask", parent="story")
    memory.add_note("epic", "epic note")
    memory.add_note("story", "story note")
    memory.add_note("subtask", "own note")
    chain = memory.notes("subtask", lineage=True)
    assert [(n.task, n.content) for n in chain] == [
        ("subtask", "own note"),
        ("story", "story note"),
        ("epic", "epic note"),
    ]
    recalled = memory.recall(task="subtask").text
    assert recalled.index("own note") < recalled.index("story note") < recalled.index("epic")


def test_prune_after_retention_with_an_injected_clock(state_dir: Path) -> None:  # T4
    clock = FixedClock()
    mem = Memory(clock=clock)
    mem.start_task("done-early")
    mem.add_note("done-early", "x")
    mem.end_task("done-early")
    mem.start_task("still-running")
    mem.add_note("still-running", "y")
    clock.advance(RETENTION - HOUR)
    assert mem.prune() == []  # not yet
    clock.advance(2 * HOUR)
    dry = mem.prune(dry_run=True)
    assert [p.task for p in dry] == ["done-early"]
    assert (Path(mem.path) / "tasks" / "done-early.md").exists()  # a dry run deletes nothing
    assert [p.task for p in mem.prune()] == ["done-early"]
    assert not (Path(mem.path) / "tasks" / "done-early.md").exists()
    assert (Path(mem.path) / "tasks" / "still-running.md").exists()
    assert mem.task("done-early").state == "done"  # the registry keeps the task


def test_running_grandchild_protects_its_ancestors(state_dir: Path) -> None:  # T4
    clock = FixedClock()
    mem = Memory(clock=clock)
    for task, parent in (("root", None), ("child", "root"), ("grandchild", "child")):
        mem.start_task(task, parent=parent)
        mem.add_note(task, f"{task} note")
    mem.end_task("child")
    mem.end_task("root")
    clock.advance(RETENTION * 2)
    assert mem.prune() == []  # the grandchild still runs: its ancestors' notes stay
    mem.end_task("grandchild", "cancelled")
    clock.advance(RETENTION + HOUR)
    assert sorted(p.task for p in mem.prune()) == ["child", "grandchild", "root"]


def test_unknown_task_notes_go_by_file_age(state_dir: Path) -> None:  # T4
    clock = FixedClock()
    mem = Memory(clock=clock)
    mem.add_note("orphan", "from before a database reset")
    path = Path(mem.path) / "tasks" / "orphan.md"
    os.utime(path, (clock.now, clock.now))
    clock.advance(RETENTION - HOUR)
    assert mem.prune() == []
    clock.advance(2 * HOUR)
    [pruned] = mem.prune()
    assert pruned.task == "orphan" and "unknown task" in pruned.reason
    assert not path.exists()


def test_prune_cli_and_dry_run(run, state_dir: Path) -> None:  # T4
    clock = FixedClock(start=1_000_000_000)  # 2001: long past any retention
    mem = Memory(clock=clock)
    mem.start_task("old")
    mem.add_note("old", "ancient")
    mem.end_task("old")
    dry = run("prune", "--dry-run")
    assert dry.code == 0 and "would remove tasks/old.md" in dry.out
    assert (state_dir / "memory" / "tasks" / "old.md").exists()
    assert "removed tasks/old.md" in run("prune").out
    assert run("prune").out.strip() == "nothing to prune"


def test_task_cli(run) -> None:  # T3
    assert run("task", "start", "a").out.strip() == "task a running"
    assert run("task", "start", "b", "--parent", "a", "--json").json()["parent_id"] == "a"
    assert run("task", "end", "b", "--state", "cancelled").out.strip() == "task b cancelled"
    bad = run("task", "end", "b", "--state", "weird")
    assert bad.code == 1 and bad.err.count("\n") == 1
