"""Heartbeat (B1, B2, Z): the state file, thresholds (defaults and config.toml), when a check
is due, the CLI, and a corrupt state file that is reported and never overwritten."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.errors import StorageError, ValidationError
from memdir.testing import FixedClock
from storeconfig import write_config

DEFAULT_HOURS = {"email": 4.0, "calendar": 6.0, "hn": 8.0, "twitter": 2.0, "weather": 12.0}
T0 = 1_780_000_000


def state_file(state_dir: Path) -> Path:
    return state_dir / "memory" / "heartbeat-state.json"


def by_name(mem: Memory) -> dict[str, Any]:
    return {c.name: c for c in mem.heartbeat_status()}


def test_state_file_format(state_dir: Path) -> None:  # B1
    clock = FixedClock(T0 + 0.75)
    with Memory(clock=clock) as mem:
        assert not state_file(state_dir).exists()
        mem.heartbeat_mark("email")
        assert json.loads(state_file(state_dir).read_text()) == {"lastChecks": {"email": T0}}
        clock.advance(100)
        mem.heartbeat_mark("calendar")
        data = json.loads(state_file(state_dir).read_text())
        assert data == {"lastChecks": {"email": T0, "calendar": T0 + 100}}
        assert all(type(v) is int for v in data["lastChecks"].values())

        # a hand-written null (never done) and other keys survive the next mark
        data["lastChecks"]["weather"] = None
        data["note"] = "kept"
        state_file(state_dir).write_text(json.dumps(data))
        clock.advance(100)
        mem.heartbeat_mark("email")
        assert json.loads(state_file(state_dir).read_text()) == {
            "lastChecks": {"email": T0 + 200, "calendar": T0 + 100, "weather": None},
            "note": "kept",
        }


def test_default_thresholds_and_never_done_checks_are_due(state_dir: Path) -> None:  # B2
    with Memory(clock=FixedClock(T0)) as mem:
        checks = mem.heartbeat_status()
        assert checks == mem.heartbeat_due()  # nothing done yet: every check is due
        assert {c.name: c.hours for c in checks} == DEFAULT_HOURS
        assert all(c.due and c.last is None and c.next_due is None for c in checks)
        # anything else: 4 hours
        mark = mem.heartbeat_mark("backup")
        assert (mark.hours, mark.due, mark.next_due) == (4.0, False, T0 + 4 * 3600)
        assert by_name(mem)["backup"].hours == 4.0


@pytest.mark.parametrize("check, hours", [*DEFAULT_HOURS.items(), ("backup", 4.0)])
def test_due_exactly_when_the_threshold_has_passed(
    state_dir: Path, check: str, hours: float
) -> None:  # B2
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        mem.heartbeat_mark(check)
        found = by_name(mem)[check]
        assert (found.due, found.last, found.next_due) == (False, T0, T0 + hours * 3600)
        clock.now = T0 + hours * 3600 - 1
        assert by_name(mem)[check].due is False
        clock.now = T0 + hours * 3600
        assert by_name(mem)[check].due is True
        clock.now = T0 + 10 * hours * 3600
        assert by_name(mem)[check].due is True
        # due checks come first
        assert [c.due for c in mem.heartbeat_status()] == sorted(
            (c.due for c in mem.heartbeat_status()), reverse=True
        )


def test_null_means_never_done(state_dir: Path) -> None:  # B1 B2
    path = state_file(state_dir)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"lastChecks": {"email": None, "backup": None, "hn": T0}}))
    with Memory(clock=FixedClock(T0 + 60)) as mem:
        found = by_name(mem)
        assert found["email"].due and found["email"].last is None
        assert found["backup"].due and found["backup"].hours == 4.0
        assert not found["hn"].due
        assert [c.name for c in mem.heartbeat_status()][-1] == "hn"
        assert "hn" not in {c.name for c in mem.heartbeat_due()}


def test_thresholds_from_config(state_dir: Path) -> None:  # B2 S
    write_config(state_dir, "[heartbeat]\nemail = 1\nbackup = 0.5\ndefault = 10\n")
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        hours = {c.name: c.hours for c in mem.heartbeat_status()}
        assert hours == {**DEFAULT_HOURS, "email": 1.0, "backup": 0.5}
        for check in ("email", "backup", "other", "weather"):
            mem.heartbeat_mark(check)
        clock.advance(1800)
        assert {c.name for c in mem.heartbeat_due() if c.due} == {
            "backup",
            "calendar",
            "hn",
            "twitter",
        }
        clock.advance(1800)
        assert {c.name for c in mem.heartbeat_due() if c.due} == {
            "backup",
            "calendar",
            "hn",
            "twitter",
            "email",
        }
        assert by_name(mem)["other"].hours == 10.0
        clock.now = T0 + 10 * 3600
        assert by_name(mem)["other"].due and not by_name(mem)["weather"].due


def test_bad_check_names(state_dir: Path, run: Callable[..., Any]) -> None:  # B2 Z
    with Memory() as mem:
        for bad in ("Email", "e mail", "1email", "x" * 33, "", "../email", "mail!"):
            with pytest.raises(ValidationError, match="bad check name"):
                mem.heartbeat_mark(bad)
    assert not state_file(state_dir).exists()
    res = run("heartbeat", "mark", "E-Mail")
    assert res.code == 1 and res.out == "" and res.err.count("\n") == 1
    assert res.err.startswith("memdir: error: bad check name")
    assert not state_file(state_dir).exists()


def test_due_lists_only_what_is_due(state_dir: Path) -> None:  # B2
    clock = FixedClock(T0)
    with Memory(clock=clock) as mem:
        mem.heartbeat_mark("email")
        mem.heartbeat_mark("backup")
        assert {c.name for c in mem.heartbeat_due()} == {"calendar", "hn", "twitter", "weather"}
        assert all(c.due for c in mem.heartbeat_due())
        clock.advance(4 * 3600)  # email and backup fall due together
        assert {c.name for c in mem.heartbeat_due()} >= {"email", "backup"}
        for check in [*DEFAULT_HOURS, "backup"]:
            mem.heartbeat_mark(check)
        assert mem.heartbeat_due() == []
        assert len(mem.heartbeat_status()) == 6 and not any(c.due for c in mem.heartbeat_status())


def test_cli_due_status_and_mark(state_dir: Path, run: Callable[..., Any]) -> None:
    # B1 B2 C: `due` lists what is due, `status` every check
    for command in ("due", "status"):
        res = run("heartbeat", command, "--json")
        assert res.code == 0, res.err
        assert {c["name"]: (c["due"], c["hours"], c["last"]) for c in res.json()} == {
            name: (True, hours, None) for name, hours in DEFAULT_HOURS.items()
        }
    text = run("heartbeat", "due")
    assert text.code == 0 and len(text.out.splitlines()) == 5
    assert all("last never" in line for line in text.out.splitlines())
    status = run("heartbeat", "status")
    assert all(
        " DUE " in line and "last never, next now" in line for line in status.out.splitlines()
    )

    mark = run("heartbeat", "mark", "email")
    assert mark.code == 0 and mark.out.startswith("email done; next due ")
    marked = run("heartbeat", "mark", "twitter", "--json").json()
    assert marked["name"] == "twitter" and marked["due"] is False and marked["hours"] == 2.0
    assert marked["next_due"] == marked["last"] + 2 * 3600

    checks = run("heartbeat", "status", "--json").json()
    due = {c["name"]: c["due"] for c in checks}
    assert due == {"email": False, "twitter": False, "calendar": True, "hn": True, "weather": True}
    assert [c["due"] for c in checks] == [True, True, True, False, False]  # due ones first
    by = {c["name"]: c for c in checks}
    assert by["twitter"]["next_due"] == marked["next_due"] and by["hn"]["next_due"] is None
    assert [c["name"] for c in run("heartbeat", "due", "--json").json()] == [
        "calendar",
        "hn",
        "weather",
    ]
    lines = run("heartbeat", "due").out.splitlines()
    assert [line.split()[0] for line in lines] == ["calendar", "hn", "weather"]
    shown = {line.split()[0]: line for line in run("heartbeat", "status").out.splitlines()}
    assert set(shown) == set(DEFAULT_HOURS)
    assert " ok " in shown["email"] and "next 20" in shown["email"]  # when it is next due
    assert " DUE " in shown["hn"] and "next now" in shown["hn"]
    state = json.loads(state_file(state_dir).read_text())
    assert set(state["lastChecks"]) == {"email", "twitter"}
    assert state["lastChecks"]["twitter"] == marked["last"]

    for check in DEFAULT_HOURS:
        run("heartbeat", "mark", check)
    assert run("heartbeat", "due", "--json").json() == []
    assert run("heartbeat", "due").out.startswith("nothing is due")
    assert len(run("heartbeat", "status", "--json").json()) == 5


CORRUPT = [
    b"not json at all",
    b'{"lastChecks": {"email": 1780000000',
    b"[]",
    b'{"lastChecks": []}',
    b'{"lastChecks": null}',
    b'{"lastChecks": {"email": "yesterday"}}',
    b'{"lastChecks": {"email": true}}',
    b'{"checks": {"email": 1780000000}}',
    b"\xff\xfe\x00binary",
]


@pytest.mark.parametrize("content", CORRUPT)
def test_a_corrupt_state_file_is_reported_and_left_alone(
    state_dir: Path,
    run: Callable[..., Any],
    content: bytes,
) -> None:  # B1 Z
    path = state_file(state_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with Memory() as mem:
        for look in (mem.heartbeat_due, mem.heartbeat_status):
            with pytest.raises(StorageError, match="heartbeat-state.json"):
                look()
        with pytest.raises(StorageError, match="heartbeat-state.json"):
            mem.heartbeat_mark("email")
    for args in (["heartbeat", "due"], ["heartbeat", "status"], ["heartbeat", "mark", "email"]):
        res = run(*args)
        assert res.code == 1 and res.out == "", (args, res.out)
        assert res.err.startswith("memdir: error: ") and res.err.count("\n") == 1, res.err
        assert str(path) in res.err and "Traceback" not in res.err
        res = run(*args, "--json")  # Z: with --json the error is JSON, on stdout
        assert res.code == 1 and res.err == "", (args, res.err)
        assert res.json()["kind"] == "StorageError" and str(path) in res.json()["error"]
    assert path.read_bytes() == content  # byte for byte
    assert [p.name for p in path.parent.iterdir() if p.name.startswith("heartbeat")] == [
        "heartbeat-state.json"
    ]
    # the rest of memory keeps working
    assert run("daily", "append", "still fine").code == 0
