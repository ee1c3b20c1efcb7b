"""Distillation (D1) and stats (D2): what is gathered since the watermark, within the budget,
oldest first; --done moves the watermark so nothing is handed out twice or lost; and the
numbers of `memdir stats` checked against what the test wrote. Real files, a real SQLite
store, the CLI as a real process. Daily logs are dated by their mtime (set with os.utime),
task notes by when the task ended (a FixedClock)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory, advice
from memdir.distill import instruction
from memdir.errors import ConfigError, ReadOnlyError, ValidationError
from memdir.testing import FixedClock
from storeconfig import write_config

T0 = 1_780_000_000  # 2026-05-28T20:26:40Z


def iso(moment: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def write_log(mem: Memory, day: str, body: str, mtime: float) -> str:
    path = Path(mem.path, "daily", f"{day}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {day}\n\n## 09:00\n{body}\n", encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return f"daily/{day}.md"


def finish_task(
    mem: Memory, clock: FixedClock, task: str, note: str, at: float, state: str = "done"
) -> str:
    clock.now = at - 60
    mem.start_task(task)
    mem.add_note(task, note)
    clock.now = at
    mem.end_task(task, state)
    return f"tasks/{task}.md"


def handed(gathered: Any) -> list[str]:
    return [item.path for item in gathered.items]


# -- what is gathered --------------------------------------------------------------------


def test_gathers_daily_logs_and_ended_tasks_oldest_first(
    state_dir: Path, run: Callable[..., Any]
) -> None:  # D1
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        day1 = write_log(mem, "2026-05-26", "Met Bob about the launch.", T0 + 100)
        build = finish_task(mem, clock, "build", "The build needs make 4.3", T0 + 200)
        day2 = write_log(mem, "2026-05-27", "Shipped v2.", T0 + 300)
        failed = finish_task(mem, clock, "deploy", "Deploy failed: disk full", T0 + 400, "failed")
        day3 = write_log(mem, "2026-05-28", "Quiet day.", T0 + 500)
        clock.now = T0 + 450
        mem.start_task("running")
        mem.add_note("running", "still working on it")
        mem.start_task("silent")  # ended without notes: nothing to distill
        mem.end_task("silent")

        gathered = mem.distill(max_chars=8000)
        assert handed(gathered) == [day1, build, day2, failed, day3]
        assert [i.kind for i in gathered.items] == ["daily", "task", "daily", "task", "daily"]
        assert (gathered.since, gathered.until, gathered.left) == (None, iso(T0 + 500), 0)
        assert gathered.text.startswith(instruction())
        blocks = gathered.text[len(instruction()) :].split("\n\n### ")[1:]
        assert [b.split("\n", 1)[0] for b in blocks] == handed(gathered)
        for item, block in zip(gathered.items, blocks, strict=True):
            on_disk = Path(mem.path, item.path).read_text(encoding="utf-8")
            assert block.split("\n", 1)[1] == on_disk.strip()
        assert "still working on it" not in gathered.text
        assert "tasks/silent.md" not in gathered.text

    res = run("distill", "--json")
    assert res.code == 0, res.err
    data = res.json()
    assert [(i["kind"], i["path"]) for i in data["items"]] == [
        (i.kind, i.path) for i in gathered.items
    ]
    assert data["items"][1]["time"] == iso(T0 + 200)
    assert data["items"][1]["chars"] == len(gathered.items[1].text)
    # the same material; the instruction names the calls of the caller's surface (D1, C)
    token = advice.use("cli")
    try:
        on_the_command_line = instruction()
    finally:
        advice.reset(token)
    assert "`memdir distill --done`" in on_the_command_line
    assert data["text"] == on_the_command_line + gathered.text[len(instruction()) :]
    assert data["left"] == 0
    text = run("distill")
    assert text.code == 0 and text.out.startswith(on_the_command_line)
    assert "### tasks/build.md" in text.out


def test_done_moves_the_watermark_nothing_lost_nothing_twice(
    state_dir: Path, run: Callable[..., Any]
) -> None:
    # D1
    clock = FixedClock(T0)
    made: list[tuple[float, str]] = []
    with Memory(clock=clock) as mem:
        for n in range(6):
            at = T0 + 1000 * n
            made.append(
                (at, write_log(mem, f"2026-05-{10 + n:02d}", f"day {n} " + "word " * 100, at))
            )
        # three tasks that end in the same second, and one later
        for task in ("gamma", "alpha", "beta"):
            note = f"{task} " + "note " * 90
            made.append((T0 + 2500, finish_task(mem, clock, task, note, T0 + 2500)))
        made.append(
            (T0 + 9000, finish_task(mem, clock, "delta", "delta " + "note " * 90, T0 + 9000))
        )
        everything = [path for _, path in sorted(made)]

        budget = 1500
        rounds: list[list[str]] = []
        while True:
            first = mem.distill(max_chars=budget)
            if not first.items:
                break
            assert len(first.text) <= budget
            again = mem.distill(max_chars=budget)  # without --done nothing moves
            assert handed(again) == handed(first)
            rounds.append(handed(first))
            if len(rounds) == 1:
                assert first.left > 0  # what did not fit comes next time
            assert mem.distill_done() == first.until
            assert len(rounds) < 20
        seen = [path for batch in rounds for path in batch]
        assert Counter(seen) == Counter(everything)  # each exactly once
        assert seen == everything  # oldest first, across rounds
        assert len(rounds) > 2
        assert mem.distill(max_chars=budget).since == iso(T0 + 9000)

        # new material after the watermark: only it comes next
        new_log = write_log(mem, "2026-05-20", "a new day", T0 + 20000)
        new_task = finish_task(mem, clock, "epsilon", "fresh note", T0 + 20100)
        assert handed(mem.distill(max_chars=budget)) == [new_log, new_task]

    # the same through the CLI
    assert run("distill", "--max-chars", "8000", "--json").json()["items"][0]["path"] == new_log
    done = run("distill", "--done", "--json")
    assert done.code == 0 and done.json() == {"watermark": iso(T0 + 20100)}
    assert run("distill", "--done").out == f"distilled up to {iso(T0 + 20100)}\n"
    nothing = run("distill")
    assert nothing.code == 0 and nothing.out == f"nothing new to distill since {iso(T0 + 20100)}\n"
    assert run("distill", "--json").json()["items"] == []


def test_a_log_written_after_the_watermark_is_handed_out_again(state_dir: Path) -> None:  # D1
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        log = write_log(mem, "2026-05-28", "morning", T0)
        assert handed(mem.distill()) == [log]
        mem.distill_done()
        assert mem.distill().items == []
        path = Path(mem.path, log)
        path.write_text(
            path.read_text(encoding="utf-8") + "\n## 18:00\nevening\n", encoding="utf-8"
        )
        os.utime(path, (T0 + 3600, T0 + 3600))
        again = mem.distill()
        assert handed(again) == [log] and "evening" in again.text


def test_an_item_bigger_than_the_budget_is_cut_with_a_pointer(
    state_dir: Path, run: Callable[..., Any]
) -> None:
    # D1
    clock = FixedClock(T0)
    long_id = "t" * 128
    with Memory(clock=clock) as mem:
        body = "\n".join(f"step {n}: " + "detail " * 8 for n in range(80))
        big = finish_task(mem, clock, long_id, body, T0 + 100)
        small = write_log(mem, "2026-05-29", "after the big task", T0 + 200)
        full = Path(mem.path, big).read_text(encoding="utf-8")
        for budget in (1000, 3000):
            gathered = mem.distill(max_chars=budget)
            assert handed(gathered) == [big] and gathered.left == 1
            assert len(gathered.text) <= budget
            [item] = gathered.items
            head, pointer = item.text.rsplit("\n", 1)
            assert full.startswith(head)
            read = re.escape(advice.get(big))
            more = int(
                re.fullmatch(rf"\(… ([\d,]+) chars more: read them with {read}\)", pointer)[
                    1
                ].replace(",", "")
            )  # type: ignore[index]
            assert len(head) + more == len(full)
        mem.distill_done()
        assert handed(mem.distill(max_chars=1000)) == [small]  # the rest of the queue follows
    # the rest of the cut item is there to read
    res = run("get", big, "--json")
    assert res.code == 0 and "\n".join(x["text"] for x in res.json()["lines"]) + "\n" == full


@pytest.mark.parametrize("budget", [0, -1, 499, True, "8000", 2.5])
def test_bad_budget(state_dir: Path, budget: Any) -> None:  # D1 Z
    with Memory() as mem, pytest.raises(ValidationError, match="bad distill budget"):
        mem.distill(max_chars=budget)


def test_bad_budget_on_the_cli_and_in_config(
    state_dir: Path, run: Callable[..., Any]
) -> None:  # D1 Z S
    for value in ("0", "-5", "100"):
        res = run("distill", "--max-chars", value)
        assert res.code == 1 and res.out == "" and res.err.count("\n") == 1
        assert res.err.startswith("memdir: error: bad distill budget")
    config = state_dir / "config.toml"
    write_config(state_dir, "[distill]\nmax_chars = 100\n")
    with pytest.raises(ConfigError, match="distill.max_chars"):
        Memory()
    res = run("distill")
    assert res.code == 1 and f"{config}:2" in res.err and res.err.count("\n") == 1
    write_config(state_dir, "[distill]\nmax_chars = 600\n")
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        write_log(mem, "2026-05-28", "x " * 400, T0)
        assert len(mem.distill().text) <= 600


def test_a_subagent_may_look_but_not_move_the_watermark(state_dir: Path) -> None:  # D1 U2
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        log = write_log(mem, "2026-05-28", "something", T0)
        parent = mem.start_session()
        child = mem.start_session(parent=parent.id)
    with Memory(session=child.id, clock=clock) as sub:
        assert handed(sub.distill()) == [log]
        with pytest.raises(ReadOnlyError):
            sub.distill_done()
    with Memory(clock=clock) as mem:
        assert handed(mem.distill()) == [log]


# -- stats -------------------------------------------------------------------------------


def folder_size(folder: Path) -> tuple[int, int]:
    found = [p for p in folder.glob("*.md") if p.is_file()] if folder.is_dir() else []
    return len(found), sum(p.stat().st_size for p in found)


def test_stats_empty_store(state_dir: Path, run: Callable[..., Any]) -> None:  # D2
    with Memory() as mem:
        found = mem.stats()
    assert found.to_dict() == {
        "daily_files": 0,
        "daily_bytes": 0,
        "entries": 0,
        "entry_bytes": 0,
        "facts_active": 0,
        "facts_superseded": 0,
        "facts_removed": 0,
        "fact_chars": 0,
        "procedures": 0,
        "procedure_bytes": 0,
        "task_note_files": 0,
        "task_note_bytes": 0,
        "hot_chars": 0,
        "hot_cap": 5250,
        "distill_ratio": None,
    }
    res = run("stats")
    assert res.code == 0 and "hot memory    0/5,250 chars (0%)" in res.out
    assert "distilled     n/a" in res.out


def test_stats_counts_and_sizes(state_dir: Path, run: Callable[..., Any]) -> None:  # D2
    write_config(state_dir, "[memory]\nhot_cap_chars = 2000\n")
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        mem.daily_append("Café with Bob — décidé")  # non-ASCII: bytes, not characters
        clock.advance(86400)
        mem.daily_append("Second day")
        mem.write_entry("ci-duration", "CI takes about 12 minutes", "The pipeline: 12 min.")
        mem.write_entry("deploy-window", "Deploy on Tuesdays", "Never on Fridays.")
        tea = mem.add_fact("The user drinks black tea", "preference")
        rsync = mem.add_fact("Backups use rsync", "convention")
        mem.add_fact("The build uses make", "convention")
        mem.supersede_fact(tea.id, "The user drinks green tea")
        mem.remove_fact(rsync.id)
        mem.write_procedure("deploy-staging", "---\ndescription: ship\n---\n1. make deploy\n")
        mem.write_procedure("rotate-keys", "1. rotate\n")
        finish_task(mem, clock, "build", "needs make 4.3", T0 + 90000)
        mem.hot_set("User: Ada. Short answers. Ünïcode.")
        hot_text = mem.hot()
        found = mem.stats()

    root = state_dir / "memory"
    daily_n, daily_b = folder_size(root / "daily")
    entries_n, entries_b = folder_size(root / "global")
    procs_n, procs_b = folder_size(root / "procedures")
    notes_n, notes_b = folder_size(root / "tasks")
    assert (daily_n, entries_n, procs_n, notes_n) == (2, 2, 2, 1)
    fact_chars = len("The user drinks green tea") + len("The build uses make")
    assert found.to_dict() == {
        "daily_files": 2,
        "daily_bytes": daily_b,
        "entries": 2,
        "entry_bytes": entries_b,
        "facts_active": 2,
        "facts_superseded": 1,
        "facts_removed": 1,
        "fact_chars": fact_chars,
        "procedures": 2,
        "procedure_bytes": procs_b,
        "task_note_files": 1,
        "task_note_bytes": notes_b,
        "hot_chars": len(hot_text),
        "hot_cap": 2000,
        "distill_ratio": round((entries_b + fact_chars) / (daily_b + notes_b), 3),
    }
    assert daily_b > sum(len(p.read_text(encoding="utf-8")) for p in (root / "daily").iterdir())

    res = run("stats", "--json")
    assert res.code == 0 and res.json() == found.to_dict()
    out = run("stats").out
    assert f"hot memory    {len(hot_text)}/2,000 chars ({100 * len(hot_text) // 2000}%)" in out
    assert "facts         2 active, 1 superseded, 1 removed" in out
    assert f"global        2 entries, {entries_b:,} bytes" in out
    assert f"procedures    2, {procs_b:,} bytes" in out
    assert f"task notes    1 files, {notes_b:,} bytes" in out
    assert f"daily logs    2 files, {daily_b:,} bytes" in out
    assert f"distilled     {found.distill_ratio:.2f}" in out
