"""Daily logs (E1): `## HH:MM` and named sections, the Evolution Log always last, local
dates (midnight, DST), the CLI and the daily_append tool, and two real processes appending
at once. Every test works on real files in its own state dir; time comes from a FixedClock
and the time zone from TZ (restored after each test)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memdir import Memory
from memdir.errors import NotFoundError, ReadOnlyError, ValidationError
from memdir.testing import FixedClock, cli_env
from memdir.tools import call_tool

EVOLUTION = "Evolution Log"


@pytest.fixture
def set_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Switch this process's local time zone; the original one is back after the test."""
    original = os.environ.get("TZ")

    def apply(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield apply
    if original is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = original
    time.tzset()


def local(y: int, mo: int, d: int, h: int = 12, mi: int = 0, s: int = 0) -> float:
    """Unix time of a local wall-clock moment in the current TZ."""
    return time.mktime((y, mo, d, h, mi, s, 0, 0, -1))


def daily_file(mem: Memory, day: str) -> Path:
    return Path(mem.path, "daily", f"{day}.md")


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, non-blank body lines) of every `## ` section, in file order."""
    found: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith("## "):
            found.append((line[3:], []))
        elif found and line.strip():
            found[-1][1].append(line)
    return found


# -- layout of one day's file ------------------------------------------------------------


def test_appends_land_under_hh_mm_and_the_same_minute_joins(
    set_tz: Callable[[str], None], state_dir: Path
) -> None:  # E1
    set_tz("UTC")
    clock = FixedClock(local(2026, 6, 10, 9, 14, 5))
    with Memory(clock=clock) as mem:
        first = mem.daily_append("Met Bob about the launch.")
        assert first.to_dict() == {
            "date": "2026-06-10",
            "path": "daily/2026-06-10.md",
            "section": "09:14",
        }
        clock.advance(20)
        mem.daily_append("Learned to check the calendar first", section="Evolution Log")
        clock.advance(20)  # 09:14:45: same minute, and the Evolution Log in between
        mem.daily_append("Bob agreed.\nSecond line of the same entry.")
        clock.advance(60)  # 09:15:45
        mem.daily_append("Lunch.")
        text = daily_file(mem, "2026-06-10").read_text(encoding="utf-8")
    assert text == textwrap.dedent("""\
        # 2026-06-10

        ## 09:14
        Met Bob about the launch.

        Bob agreed.
        Second line of the same entry.

        ## 09:15
        Lunch.

        ## Evolution Log
        - 09:14 Learned to check the calendar first
        """)


def test_named_sections_get_timestamped_lines(
    set_tz: Callable[[str], None], state_dir: Path
) -> None:  # E1
    set_tz("UTC")
    clock = FixedClock(local(2026, 6, 10, 11, 30))
    with Memory(clock=clock) as mem:
        assert mem.daily_append("Ship on Tuesday", section="Decisions").section == "Decisions"
        clock.advance(3600)
        mem.daily_append("12:30 entry")
        clock.advance(600)
        # the same section again (a heading-ish name is normalised), multi-line text indented
        assert (
            mem.daily_append("Freeze on Monday\nno exceptions", section="## Decisions").section
            == "Decisions"
        )
        # any spelling of the Evolution Log is the one Evolution Log
        assert mem.daily_append("Ask before deleting", section="evolution LOG").section == EVOLUTION
        text = daily_file(mem, "2026-06-10").read_text(encoding="utf-8")
        for bad in ("", "   ", "x" * 81):
            with pytest.raises(ValidationError, match="bad section name"):
                mem.daily_append("text", section=bad)
        for empty in ("", "  \n "):
            with pytest.raises(ValidationError, match="empty"):
                mem.daily_append(empty)
        assert daily_file(mem, "2026-06-10").read_text(encoding="utf-8") == text
    assert sections(text) == [
        ("Decisions", ["- 11:30 Ship on Tuesday", "- 12:40 Freeze on Monday", "  no exceptions"]),
        ("12:30", ["12:30 entry"]),
        (EVOLUTION, ["- 12:40 Ask before deleting"]),
    ]


def test_evolution_log_stays_last_after_any_interleaving(
    set_tz: Callable[[str], None], state_dir: Path
) -> None:  # E1
    set_tz("UTC")
    for seed in range(4):
        clock = FixedClock(local(2026, 6, 1 + seed, 8, 0))
        day = time.strftime("%Y-%m-%d", time.localtime(clock()))
        rng = random.Random(seed)
        evolution: list[str] = []
        written: list[str] = []
        with Memory(clock=clock) as mem:
            for n in range(30):
                kind = rng.choice(("timed", "timed", "named", "evolution"))
                token = f"s{seed}-{kind}-{n:02d}"
                section = {
                    "timed": None,
                    "named": rng.choice(("Decisions", "People")),
                    "evolution": EVOLUTION,
                }[kind]
                mem.daily_append(token, section=section)
                written.append(token)
                if kind == "evolution":
                    evolution.append(f"- {time.strftime('%H:%M', time.localtime(clock()))} {token}")
                clock.advance(rng.choice((0, 5, 61, 600)))
                text = daily_file(mem, day).read_text(encoding="utf-8")
                found = sections(text)
                if evolution:
                    assert found[-1] == (EVOLUTION, evolution), (seed, n, text)
                    assert [h for h, _ in found].count(EVOLUTION) == 1
                assert all(text.count(t + "\n") == 1 for t in written), (seed, n, text)


def test_hand_edits_are_kept_and_the_next_write_moves_the_evolution_log_back(
    set_tz: Callable[[str], None],
    state_dir: Path,
) -> None:  # E1
    set_tz("UTC")
    clock = FixedClock(local(2026, 6, 10, 9, 0))
    with Memory(clock=clock) as mem:
        mem.daily_append("first entry")
        mem.daily_append("grew a habit", section=EVOLUTION)
        path = daily_file(mem, "2026-06-10")
        # a person adds a line under the title, edits an entry and puts a section at the end
        hand = (
            path.read_text(encoding="utf-8")
            .replace("# 2026-06-10\n", "# 2026-06-10\nA quiet day, written by hand.\n")
            .replace("first entry", "first entry (corrected by hand)")
        )
        hand += "\n## Hand notes\nremember the milk\n\nand the eggs\n"
        path.write_text(hand, encoding="utf-8")
        assert sections(hand)[-1][0] == "Hand notes"

        clock.advance(120)
        mem.daily_append("second entry")
        text = path.read_text(encoding="utf-8")
    assert text == textwrap.dedent("""\
        # 2026-06-10
        A quiet day, written by hand.

        ## 09:00
        first entry (corrected by hand)

        ## Hand notes
        remember the milk

        and the eggs

        ## 09:02
        second entry

        ## Evolution Log
        - 09:00 grew a habit
        """)


def test_a_hand_typed_evolution_log_heading_in_other_case_is_the_evolution_log(
    set_tz: Callable[[str], None],
    state_dir: Path,
) -> None:  # E1
    set_tz("UTC")
    clock = FixedClock(local(2026, 6, 10, 9, 0))
    with Memory(clock=clock) as mem:
        path = daily_file(mem, "2026-06-10")
        path.parent.mkdir(parents=True)
        path.write_text(
            "# 2026-06-10\n\n## evolution log\n- 08:00 by hand\n\n## Later\nx\n", encoding="utf-8"
        )
        mem.daily_append("learned more", section=EVOLUTION)
        mem.daily_append("a timed entry")
        found = sections(path.read_text(encoding="utf-8"))
    assert [h for h, _ in found] == ["Later", "09:00", "evolution log"]
    assert found[-1][1] == ["- 08:00 by hand", "- 09:00 learned more"]


# -- local dates -------------------------------------------------------------------------


def test_local_midnight_starts_a_new_file(
    set_tz: Callable[[str], None], state_dir: Path
) -> None:  # E1
    set_tz("America/New_York")  # UTC-5 in January: both moments are the same UTC day
    clock = FixedClock(local(2026, 1, 14, 23, 59, 30))
    assert time.gmtime(clock()).tm_mday == time.gmtime(clock() + 60).tm_mday == 15
    with Memory(clock=clock) as mem:
        assert mem.daily_append("before midnight").date == "2026-01-14"
        clock.advance(60)
        assert mem.daily_append("after midnight").date == "2026-01-15"
        before = daily_file(mem, "2026-01-14").read_text(encoding="utf-8")
        after = daily_file(mem, "2026-01-15").read_text(encoding="utf-8")
        assert sections(before) == [("23:59", ["before midnight"])]
        assert sections(after) == [("00:00", ["after midnight"])]
        assert mem.daily() == mem.daily("today") == after
        assert mem.daily("yesterday") == before
        assert mem.daily("2026-01-14") == before
        clock.advance(86400)
        with pytest.raises(NotFoundError, match="no daily log for 2026-01-16"):
            mem.daily()
        assert mem.daily("yesterday") == after


def test_dst_change_days(set_tz: Callable[[str], None], state_dir: Path) -> None:  # E1
    set_tz("Europe/Berlin")
    # 2026-03-29: clocks jump from 02:00 to 03:00, a 23-hour day
    clock = FixedClock(local(2026, 3, 29, 1, 59))
    with Memory(clock=clock) as mem:
        mem.daily_append("just before the jump")
        clock.advance(60)  # 03:00 CEST
        mem.daily_append("just after the jump")
        spring = daily_file(mem, "2026-03-29").read_text(encoding="utf-8")
        assert [h for h, _ in sections(spring)] == ["01:59", "03:00"]
        clock.now = local(2026, 3, 30, 0, 30)  # 24 h back would be 2026-03-28 23:30
        mem.daily_append("the day after")
        assert mem.daily("yesterday") == spring
        assert mem.daily("today") == daily_file(mem, "2026-03-30").read_text(encoding="utf-8")

        # 2026-10-25: 03:00 CEST falls back to 02:00 CET, a 25-hour day
        clock.now = local(2026, 10, 24, 12, 0)
        mem.daily_append("the day before")
        clock.now = local(2026, 10, 25, 23, 30)  # 24 h back is still 2026-10-25 00:30
        assert time.localtime(clock() - 86400).tm_mday == 25
        mem.daily_append("late on the long day")
        assert "late on the long day" in mem.daily("today")
        assert "the day before" in mem.daily("yesterday")
    assert sorted(p.name for p in Path(mem.path, "daily").iterdir()) == [
        "2026-03-29.md",
        "2026-03-30.md",
        "2026-10-24.md",
        "2026-10-25.md",
    ]


# -- the command line --------------------------------------------------------------------


def today_in(tz: str, days_back: int = 0) -> str:
    return (datetime.now(ZoneInfo(tz)).date() - timedelta(days=days_back)).isoformat()


def test_cli_daily_append_and_show(run: Callable[..., Any], state_dir: Path) -> None:  # E1
    tz = {"TZ": "UTC"}
    day = today_in("UTC")
    res = run("daily", "append", "Met Bob", env=tz)
    assert res.code == 0, res.err
    assert re.fullmatch(rf"daily/{day}\.md: under ## \d\d:\d\d\n", res.out)
    res = run("daily", "append", "Be brief", "--section", "Evolution Log", "--json", env=tz)
    assert res.json() == {"date": day, "path": f"daily/{day}.md", "section": EVOLUTION}
    res = run("daily", "append", "-", "--section", "Decisions", input="From stdin\n", env=tz)
    assert res.code == 0, res.err

    if today_in("UTC") != day:
        pytest.skip("crossed midnight during the test")
    shown = run("daily", "show", env=tz)
    assert shown.code == 0
    text = (state_dir / "memory" / "daily" / f"{day}.md").read_text(encoding="utf-8")
    assert shown.out == text
    assert [h for h, _ in sections(text)][1:] == ["Decisions", EVOLUTION]
    assert "Met Bob" in text and "- " in sections(text)[1][1][0]
    assert run("daily", "show", "today", env=tz).out == text
    assert run("daily", "show", day, "--json", env=tz).json() == {"date": day, "content": text}


@pytest.mark.parametrize("bad", ["2026-13-01", "2026-02-30", "yesterday-ish", "2026-1-5"])
def test_cli_daily_show_bad_date_is_a_one_line_error(
    run: Callable[..., Any], bad: str
) -> None:  # E1 Z
    res = run("daily", "show", bad)
    assert res.code == 1 and res.out == ""
    assert res.err.count("\n") == 1 and "bad date" in res.err
    assert "Traceback" not in res.err


def test_cli_daily_show_without_a_log_is_an_error(run: Callable[..., Any]) -> None:  # E1 Z
    for day in ("today", "yesterday", "1999-01-01"):
        res = run("daily", "show", day)
        assert res.code == 1 and res.out == ""
        assert res.err.startswith("memdir: error: no daily log for")
        assert res.err.count("\n") == 1


def test_cli_today_and_yesterday_are_local_dates(
    run: Callable[..., Any], state_dir: Path
) -> None:  # E1
    # 26 hours apart: whatever the hour, these two zones never share today's date
    zones = ("Pacific/Kiritimati", "Etc/GMT+12")
    before = {tz: (today_in(tz), today_in(tz, 1)) for tz in zones}
    assert before[zones[0]][0] != before[zones[1]][0]
    folder = state_dir / "memory" / "daily"
    folder.mkdir(parents=True)
    for day in {d for pair in before.values() for d in pair}:
        (folder / f"{day}.md").write_text(f"# {day}\n\nlog of {day}\n", encoding="utf-8")
    for tz in zones:
        env = {"TZ": tz}
        today = run("daily", "show", "today", env=env).out
        yesterday = run("daily", "show", "yesterday", env=env).out
        if (today_in(tz), today_in(tz, 1)) != before[tz]:
            pytest.skip("crossed midnight during the test")
        assert today == f"# {before[tz][0]}\n\nlog of {before[tz][0]}\n"
        assert yesterday == f"# {before[tz][1]}\n\nlog of {before[tz][1]}\n"

    res = run("daily", "append", "far east", "--json", env={"TZ": zones[0]})
    assert res.json()["date"] in {before[zones[0]][0], today_in(zones[0])}


# -- the daily_append tool ---------------------------------------------------------------


def test_daily_append_tool(set_tz: Callable[[str], None], state_dir: Path) -> None:  # E1 A1 A3
    set_tz("UTC")
    clock = FixedClock(local(2026, 6, 10, 18, 2))
    with Memory(clock=clock) as mem:
        assert call_tool(mem, "daily_append", {"text": "Deployed v2"}) == {
            "date": "2026-06-10",
            "path": "daily/2026-06-10.md",
            "section": "18:02",
        }
        assert (
            call_tool(mem, "daily_append", {"text": "Check first", "section": "Evolution Log"})[
                "section"
            ]
            == EVOLUTION
        )
        with pytest.raises(ValidationError):
            call_tool(mem, "daily_append", {"section": "Decisions"})
        with pytest.raises(ValidationError):
            call_tool(mem, "daily_append", {"text": 42})
        assert sections(mem.daily()) == [
            ("18:02", ["Deployed v2"]),
            (EVOLUTION, ["- 18:02 Check first"]),
        ]
        parent = mem.start_session()
        child = mem.start_session(parent=parent.id)
    with Memory(session=child.id, clock=clock) as sub:
        with pytest.raises(ReadOnlyError):
            call_tool(sub, "daily_append", {"text": "from a subagent"})
        assert "from a subagent" not in sub.daily()


# -- two processes at once ---------------------------------------------------------------

WRITER = """
import json, os, sys, time
from memdir import Memory

sync, idx, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
acked = []
with Memory() as mem:
    open(os.path.join(sync, f"ready-{idx}"), "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(sync, "go")):
        if time.monotonic() > deadline:
            sys.exit("timed out waiting for go")
        time.sleep(0.0005)
    for n in range(count):
        evolution = n % 3 == 1
        token = f"w{idx}-{'evo' if evolution else 'log'}-{n:03d}"
        mem.daily_append(token, section="Evolution Log" if evolution else None)
        acked.append(token)
with open(os.path.join(sync, f"acked-{idx}.json"), "w") as out:
    json.dump(acked, out)
"""


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_two_processes_appending_at_once_lose_nothing(
    tmp_path: Path, state_dir: Path
) -> None:  # E1 L3
    sync = tmp_path / "sync"
    sync.mkdir()
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(sync), str(i), "40"],
            env=cli_env(str(state_dir)),
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        deadline = time.monotonic() + 30
        while not all((sync / f"ready-{i}").exists() for i in range(2)):
            assert time.monotonic() < deadline, "workers never got ready"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.002)
        (sync / "go").touch()
        errors = [p.communicate(timeout=45)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errors
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()

    acked = [t for i in range(2) for t in json.loads((sync / f"acked-{i}.json").read_text())]
    assert len(acked) == 80
    evolution = {t for t in acked if "-evo-" in t}
    timed = set(acked) - evolution
    files = sorted((state_dir / "memory" / "daily").glob("*.md"))
    assert 1 <= len(files) <= 2  # two only if the test ran across local midnight
    seen: Counter[str] = Counter()
    in_evolution: set[str] = set()
    for path in files:
        found = sections(path.read_text(encoding="utf-8"))
        headings = [h for h, _ in found]
        assert headings.count(EVOLUTION) <= 1
        if EVOLUTION in headings:
            assert headings[-1] == EVOLUTION, headings
            in_evolution |= {line.split(" ", 2)[2] for line in found[-1][1]}
            assert all(re.fullmatch(r"- \d\d:\d\d w\d-evo-\d{3}", x) for x in found[-1][1])
        for heading, body in found:
            if heading != EVOLUTION:
                assert re.fullmatch(r"\d\d:\d\d", heading)
            seen.update(body if heading != EVOLUTION else [x.split(" ", 2)[2] for x in body])
    assert seen == Counter(acked)  # every acknowledged entry exactly once, nothing else
    assert in_evolution == evolution
    assert not timed & in_evolution
    assert not list((state_dir / "memory" / "daily").glob(".tmp-*"))
    assert date.fromisoformat(files[0].stem)
