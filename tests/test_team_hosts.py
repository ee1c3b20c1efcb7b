"""W1 across machines: three hosts of a team, each a Linux network namespace with its own
network stack (tests/netns.py), write one scope of one PostgreSQL at once over a private
subnet, and one host dies mid-run.

On each host, at once: a `memdir` CLI writer per tier (facts, HOT.md appends, daily log
appends, procedures, global entries by memorize blocks, tasks started with a note each), and
an MCP server (`memdir serve --http` on the host's own loopback) driven by the `mcp` SDK's
streamable HTTP client from inside the host (facts, daily log, procedures, entries). Every
writer logs what it tried, what was acknowledged and what was refused as not done
(tests/team_writers.py: the scope's lock busy past memory.busy_timeout_ms on a loaded
machine, "nothing was changed"; the writer moves on, it never retries). Once each writer of
host 1 has had writes acknowledged, every process of host 1 is SIGKILLed (the machine dies);
the others write on, then stop.

What must hold afterwards, read back through Memory:
- the shared rows (facts, the task registry, sessions): every acknowledged write of every
  host is there exactly once, under the id it was acknowledged with; the write a killed
  writer had in flight is there whole or not at all; a refused one is not there; nothing
  else is there; the lexical index agrees with the rows; the dead host's MCP session is
  left open, the others ended.
- the markdown tiers, rows of the scope with each host's memory root a rendered view of
  them (docs/storage.md#files-and-rows): every host's HOT.md, daily logs, procedures, global
  entries and task notes (the dead host's too, rendered again when read) hold every host's
  acknowledged writes exactly once each; an in-flight write is whole or absent there, a
  refused one absent; and the three hosts' views agree.

Needs root and iproute2 (as CI runs `make test`): without them the test fails, saying what is
missing. A server of its own listens on the subnet; it, the namespaces and links are removed
even when the test fails.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import netns
import pg_server
import team_writers as tw
from memdir import Memory
from memdir.storage.rows import ARCHIVE_KINDS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.xdist_group("processes"),
    pytest.mark.timeout(280),
]

HOSTS, VICTIM = 3, 1
SCOPE = "team"
MCP_PORT = 8765  # each host has its own loopback: the same port on every one
BEFORE_KILL = 2  # writes every writer of the victim has acknowledged when it dies
AFTER_KILL = 2  # writes every other writer has acknowledged after it died
LIMIT = 100  # writes a writer makes at most: 100 HOT.md lines stay well inside its cap (H2)
HANG = 240.0  # a bound on a hung run, not a measure


@pytest.fixture
def team() -> Iterator[tuple[netns.Hosts, pg_server.Server]]:
    """Three hosts and a PostgreSQL on the subnet's first address, all removed afterwards."""
    hosts = netns.Hosts(HOSTS)
    server: pg_server.Server | None = None
    try:
        server = pg_server.start(hosts.address, clients=hosts.subnet)
        yield hosts, server
    finally:
        try:
            hosts.close()  # every process of the hosts first: nothing writes to a dead server
        finally:
            if server is not None:
                server.stop()


class Writer:
    def __init__(self, host: int, name: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.host, self.name, self.log, self.proc = host, name, log, proc

    def lines(self) -> list[dict[str, Any]]:
        return tw.read_log(self.log)

    def acked(self) -> int:
        return len(tw.acks(self.lines()))

    def why(self) -> str:
        err = self.log.with_suffix(".err")
        serve = Path(str(self.log) + ".serve")
        text = err.read_text(errors="replace") if err.exists() else ""
        if serve.exists():
            text += "\n[serve] " + serve.read_text(errors="replace")
        return f"host {self.host} {self.name} (exit {self.proc.poll()}): {text[-3000:]}"


def start_writers(
    hosts: netns.Hosts, tmp: Path, url: str, limit: int = 0
) -> tuple[list[Writer], list[Path]]:
    """Every writer of every host, started and let go together once every MCP server
    listens; and each host's stop file."""
    cli, mcp = tw.write_scripts(tmp)
    writers, stops, go = [], [], tmp / "go"
    for k in range(HOSTS):
        env = tw.host_env(tmp, k, url, SCOPE)
        stop = tmp / f"host{k}" / "stop"
        stops.append(stop)
        argvs = {
            kind: [sys.executable, str(cli), kind, f"h{k}", str(tmp / f"host{k}" / f"{kind}.log"),
                   str(stop), str(limit), str(go)]
            for kind in tw.CLI_KINDS
        }  # fmt: skip
        argvs["mcp"] = [sys.executable, str(mcp), f"h{k}", str(tmp / f"host{k}" / "mcp.log"),
                        str(stop), str(MCP_PORT), str(limit), str(go)]  # fmt: skip
        for name, argv in argvs.items():
            log = tmp / f"host{k}" / f"{name}.log"
            with open(log.with_suffix(".err"), "wb") as err:
                proc = subprocess.Popen(
                    hosts.command(k, argv), env=env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=err,
                )  # fmt: skip
            writers.append(Writer(k, name, log, proc))
    servers = [w for w in writers if w.name == "mcp"]
    wait_for(servers, lambda w: any(line.get("op") == "ready" for line in w.lines()), "servers")
    go.touch()
    return writers, stops


def wait_for(writers: list[Writer], done: Any, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not all(done(w) for w in writers):
        for w in writers:
            assert w.proc.poll() is None, f"a writer ended before {what}: {w.why()}"
        assert time.monotonic() < deadline, f"no {what} in {HANG:.0f} s"
        time.sleep(0.05)


def host_memory(tmp: Path, k: int, server: pg_server.Server, database: str) -> Memory:
    """Host k's memory root, on the team's rows (read from here, over the server's socket)."""
    env = {"MEMDIR_DATABASE_URL": server.url(database), "MEMDIR_DATABASE_SCOPE": SCOPE}
    state = tmp / f"host{k}" / "state"
    return Memory(str(state), env=env, cwd=str(state))


def test_w1_three_hosts_write_one_scope_and_a_dead_host_loses_or_halves_nothing(
    team: tuple[netns.Hosts, pg_server.Server], tmp_path: Path
) -> None:  # W1 L3 H1 E1 P1 G2 T1 T3 A2
    hosts, server = team
    database = server.new_database()
    writers, stops = start_writers(hosts, tmp_path, server.tcp_url(database), LIMIT)
    try:
        victims = [w for w in writers if w.host == VICTIM]
        others = [w for w in writers if w.host != VICTIM]
        wait_for(victims, lambda w: w.acked() >= BEFORE_KILL, f"{BEFORE_KILL} writes each")
        killed = hosts.kill(VICTIM)
        assert {w.proc.pid for w in victims} <= set(killed)
        at_kill = {id(w): w.acked() for w in others}
        wait_for(
            others,
            lambda w: w.acked() >= min(at_kill[id(w)] + AFTER_KILL, LIMIT),
            "writes after it",
        )
        for stop in stops:
            stop.touch()
        for w in writers:
            w.proc.wait(timeout=HANG)
    finally:
        for w in writers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
    for w in victims:
        assert w.proc.returncode == -9, w.why()
    for w in others:
        assert w.proc.returncode == 0, w.why()

    logs = {(w.host, w.name): w.lines() for w in writers}
    acked = [line for lines in logs.values() for line in tw.acks(lines)]
    refused = [line for lines in logs.values() for line in tw.refusals(lines)]
    flying = {key: tw.in_flight(lines) for key, lines in logs.items()}
    for (host, _), line in flying.items():
        assert line is None or host == VICTIM, line  # a writer that stopped finished its write
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for line in acked:
        by_kind.setdefault(line["kind"], []).append(line)

    # -- the shared rows ---------------------------------------------------------------------
    with host_memory(tmp_path, 0, server, database) as mem:
        rows = {kind: list(mem.store.archive_rows(kind)) for kind in ARCHIVE_KINDS}
        assert mem.store.inspect().problems == ["ok"]  # the index agrees with the rows
    facts = {row["id"]: row for row in rows["fact"]}
    texts = Counter(row["content"] for row in rows["fact"])
    fact_acks = by_kind["fact"]
    assert len({line["id"] for line in fact_acks}) == len(fact_acks)  # an id each
    for line in fact_acks:
        assert not line["duplicate"]
        assert facts[line["id"]]["content"] == line["text"]
        assert facts[line["id"]]["status"] == "active"
        assert texts[line["text"]] == 1
    flying_facts = {line["text"] for line in flying.values() if line and line["kind"] == "fact"}
    assert all(texts[text] <= 1 for text in flying_facts)  # whole, or not at all
    assert set(texts) <= {line["text"] for line in fact_acks} | flying_facts  # nothing else
    assert not any(texts[line["text"]] for line in refused if line["kind"] == "fact")
    hosts_seen = {line["text"].split()[1] for line in fact_acks}
    assert hosts_seen == {f"h{k}" for k in range(HOSTS)}

    tasks = Counter(row["id"] for row in rows["task"])
    task_acks = {line["name"] for line in by_kind["task"]}
    flying_tasks = {line["name"] for line in flying.values() if line and line["kind"] == "task"}
    assert all(tasks[name] == 1 for name in task_acks)
    assert set(tasks) <= task_acks | flying_tasks
    assert not any(tasks[line["name"]] for line in refused if line["kind"] == "task")

    mcp_sessions = [row for row in rows["session"] if row["surface"] == "mcp"]
    assert len(mcp_sessions) == HOSTS  # one server a host
    assert sum(row["ended"] is not None for row in mcp_sessions) == HOSTS - 1  # the dead one's

    # -- the file tiers: rows too, each host's memory root a rendered view of them --------
    # every host's view (the dead host's too, rendered again on this read) holds every
    # host's acknowledged writes once, an in-flight one whole or absent, a refused one not
    # at all; and the three views agree
    unsure = [line for line in flying.values() if line]
    views = []
    for k in range(HOSTS):
        with host_memory(tmp_path, k, server, database) as mem:
            hot = mem.hot()
            check_lines(hot.splitlines(), "hot", by_kind, unsure, refused)
            days = {day: mem.daily(day) for day in mem.daily_days()}
            check_lines(
                [line for text in days.values() for line in text.splitlines()],
                "daily", by_kind, unsure, refused,
            )  # fmt: skip
            procedures = {p.name: p for p in mem.procedures()}
            assert all(p.error is None for p in procedures.values())
            said = {n: p.content for n, p in procedures.items()}
            check_named(said, "procedure", by_kind, unsure, refused)
            entries = {e.name: mem.entry(e.name) for e in mem.entries()}
            assert all(e.error is None for e in entries.values())
            known = {n: e.content or "" for n, e in entries.items()}
            check_named(known, "entry", by_kind, unsure, refused)
            notes = {}
            for line in by_kind.get("note", []):
                notes[line["name"]] = [n.content for n in mem.notes(line["name"])]
                assert notes[line["name"]] == [line["text"]]
            for line in unsure:
                if line["kind"] == "note":
                    assert [n.content for n in mem.notes(line["name"])] in ([], [line["text"]])
            for line in refused:
                if line["kind"] == "note":
                    assert mem.notes(line["name"]) == [], line
            views.append((hot, days, said, known, notes))
    assert views[0] == views[1] == views[2]  # the views agree


def check_lines(
    lines: list[str],
    kind: str,
    acked: dict[str, list[dict[str, Any]]],
    unsure: list[Any],
    refused: list[Any],
) -> None:
    """Each acknowledged line once, an in-flight one at most once, a refused one not at
    all, none that no writer wrote."""
    found = Counter(line.strip().removeprefix("- ") for line in lines)
    wanted = [line["text"] for line in acked.get(kind, [])]
    assert wanted, f"no {kind} write was acknowledged"
    assert all(found[text] == 1 for text in wanted), (kind, found)
    maybe = {line["text"] for line in unsure if line["kind"] == kind}
    assert all(found[text] <= 1 for text in maybe)
    assert not any(found[line["text"]] for line in refused if line["kind"] == kind)
    ours = {text for text in found if text.startswith(f"{kind} ")}
    assert ours <= set(wanted) | maybe, ours - set(wanted) - maybe


def check_named(
    found: dict[str, str],
    kind: str,
    acked: dict[str, list[dict[str, Any]]],
    unsure: list[Any],
    refused: list[Any],
) -> None:
    """Each acknowledged item whole; an in-flight one whole or absent; a refused one
    absent; none else."""
    wanted = {line["name"]: line["text"] for line in acked.get(kind, [])}
    assert wanted, f"no {kind} write was acknowledged"
    maybe = {line["name"]: line["text"] for line in unsure if line["kind"] == kind}
    for name, text in wanted.items():
        assert found.get(name, "").strip() == text.strip(), (kind, name)
    for name, text in maybe.items():
        assert name not in found or found[name].strip() == text.strip(), (kind, name)
    assert not {line["name"] for line in refused if line["kind"] == kind} & set(found)
    assert set(found) <= set(wanted) | set(maybe), set(found) - set(wanted) - set(maybe)
