"""Several real processes on one store at once (L3, H4, F1, F3, P1, Z).

Every worker here is a separate Python interpreter started with subprocess (no threads, no
mocks of the storage): each runs a small script written to the test's tmp folder against the
same state dir. Workers meet at a file barrier (each drops `ready-N`, then waits for `go`), so
they start their writes within a millisecond or so of each other.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dbrows import TEAM
from dbrows import rows as db_rows
from memdir import Memory
from memdir.storage.files import TEMP_PREFIX
from memdir.storage.sqlite.migrations import MIGRATIONS
from memdir.testing import cli_env
from storeconfig import write_config

# many real processes at once: process storms take turns (the Makefile's loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

# The start of every worker script: the barrier and an atomic result writer.
PRELUDE = """
import json, os, sys, time

def barrier(sync, idx, name="go"):
    open(os.path.join(sync, f"ready-{idx}"), "w").close()
    wait_for_file(os.path.join(sync, name))

def wait_for_file(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {path}")
        time.sleep(0.0005)

def publish(path, value):
    with open(path + ".part", "w") as out:
        json.dump(value, out)
    os.replace(path + ".part", path)

def error(exc):
    return {"ok": False, "type": type(exc).__name__, "msg": str(exc)}
"""


class Workers:
    """Start worker scripts as real processes; kill whatever is left at the end of a test."""

    def __init__(self, tmp: Path, state: Path) -> None:
        self.tmp, self.state = tmp, state
        self.sync = tmp / "sync"
        self.sync.mkdir()
        self.procs: list[subprocess.Popen[str]] = []
        self._logs: list[Path] = []

    def script(self, name: str, body: str) -> Path:
        path = self.tmp / f"{name}.py"
        path.write_text(PRELUDE + textwrap.dedent(body), encoding="utf-8")
        return path

    def start(self, script: Path, *args: object, stdout: Any = None) -> subprocess.Popen[str]:
        err = self.tmp / f"stderr-{len(self.procs)}.txt"
        self._logs.append(err)
        with err.open("w") as err_file:  # the child keeps its own copy of the handle
            proc = subprocess.Popen(
                [sys.executable, str(script), *map(str, args)],
                env=cli_env(str(self.state)),
                cwd=self.tmp,
                text=True,
                stdout=stdout if stdout is not None else subprocess.DEVNULL,
                stderr=err_file,
            )
        self.procs.append(proc)
        return proc

    def go(self, n: int, name: str = "go", timeout: float = 30.0) -> None:
        """Release the barrier once all `n` workers are ready."""
        wait_until(
            lambda: all((self.sync / f"ready-{i}").exists() for i in range(n)),
            timeout,
            f"{n} workers to be ready",
            self.stderr,
        )
        (self.sync / name).touch()

    def join(self, timeout: float = 45.0) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {proc.pid} still running after {timeout}s\n{self.stderr()}")
        failed = [p.returncode for p in self.procs if p.returncode != 0]
        assert not failed, f"workers exited with {failed}\n{self.stderr()}"

    def stderr(self) -> str:
        return "\n".join(
            f"--- {p.name}:\n{text}"
            for p in self._logs
            if p.exists() and (text := p.read_text(errors="replace").strip())
        )

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def workers(tmp_path: Path, state_dir: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path, state_dir)
    try:
        yield pool
    finally:
        pool.kill_all()


def wait_until(
    ready: Callable[[], bool], timeout: float, what: str, details: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n{details()}")
        time.sleep(0.002)


def read_result(path: Path, timeout: float, details: Callable[[], str]) -> dict[str, Any]:
    wait_until(path.exists, timeout, f"result {path.name}", details)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def leftover_temp_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"{TEMP_PREFIX}*"))


def integrity(db_path: Path) -> tuple[str, str]:
    """(PRAGMA integrity_check, FTS5 integrity-check) of the fact archive."""
    db = sqlite3.connect(db_path)
    try:
        (check,) = db.execute("PRAGMA integrity_check").fetchone()
        try:
            db.execute("INSERT INTO facts_fts(facts_fts) VALUES ('integrity-check')")
            fts = "ok"
        except sqlite3.DatabaseError as exc:
            fts = str(exc)
        return str(check), fts
    finally:
        db.close()


# -- 1. many writers, facts and hot lines mixed --------------------------------------------

MIXED_WRITER = """
import random
from memdir import Memory

idx, ops, sync, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(idx)
barrier(sync, idx)
with open(log, "w") as out:
    for n in range(ops):
        kind = rng.choice(("fact", "hot"))
        token = f"w{idx}n{n}"
        try:
            # A fresh Memory per write, like a CLI call: the open path races too.
            with Memory() as mem:
                if kind == "fact":
                    fact = mem.add_fact(f"concurrency probe {token} written by worker {idx}",
                                        "learning")
                    entry = {"kind": "fact", "token": token, "id": fact.id}
                else:
                    mem.hot_append(f"- {token}")
                    entry = {"kind": "hot", "token": token}
        except Exception as exc:
            entry = {"kind": "error", "op": kind, "token": token,
                     "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(entry) + "\\n")
        out.flush()
"""


def test_concurrent_facts_and_hot_appends_are_never_lost(
    workers: Workers, state_dir: Path
) -> None:  # L3 H4 F1
    n_workers, ops = 5, 40
    with Memory() as mem:  # an existing store: racing on a new one is the test further down
        seed = mem.add_fact("seed fact stored before the workers start", "preference")
        mem.hot_set("# Hot\n")
    script = workers.script("mixed_writer", MIXED_WRITER)
    logs = [workers.tmp / f"log-{i}.jsonl" for i in range(n_workers)]
    for i in range(n_workers):
        workers.start(script, i, ops, workers.sync, logs[i])
    workers.go(n_workers)
    workers.join()

    entries = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert len(entries) == n_workers * ops
    errors = [e for e in entries if e["kind"] == "error"]
    assert not errors, f"{len(errors)} writes failed, e.g. {errors[:3]}"
    acked_facts = {e["token"]: e["id"] for e in entries if e["kind"] == "fact"}
    acked_hot = [e["token"] for e in entries if e["kind"] == "hot"]
    assert acked_facts and acked_hot  # the mix really mixed

    # Every acknowledged fact is in the archive exactly once, under the id it was given.
    memory_dir = state_dir / "memory"
    with Memory() as mem:
        rows = db_rows(mem.store, "SELECT id, content FROM facts WHERE id != ?", (seed.id,))
    by_token: dict[str, list[int]] = {}
    for fact_id, content in rows:
        by_token.setdefault(content.split()[2], []).append(fact_id)
    assert len(rows) == len(acked_facts)
    for token, fact_id in acked_facts.items():
        assert by_token.get(token) == [fact_id], token
    with Memory() as mem:  # and search finds them through the FTS index
        for token in list(acked_facts)[:: max(1, len(acked_facts) // 8)]:
            # lexical: by meaning every probe is like every other (one template, Q2)
            hits = mem.search(token, kinds=("fact",), mode="lexical")
            assert [h.id for h in hits] == [acked_facts[token]], token

    # Every acknowledged hot line is in HOT.md exactly once, and nothing else was added.
    hot = (memory_dir / "HOT.md").read_text(encoding="utf-8")
    assert len(hot) < 5250 * 0.8  # far from the cap: truncation plays no part here
    lines = hot.splitlines()
    assert lines[0] == "# Hot"
    counts = Counter(lines[1:])
    assert sorted(counts) == sorted(f"- {t}" for t in acked_hot)
    assert set(counts.values()) == {1}

    if not TEAM:  # SQLite's own integrity_check
        assert integrity(memory_dir / "memory.db") == ("ok", "ok")
    assert leftover_temp_files(memory_dir) == []


# -- 2. a hot writer killed at random instants ---------------------------------------------

HOT_LINES = 60

HOT_WRITER = """
from memdir import Memory

base, lines = int(sys.argv[1]), int(sys.argv[2])
mem = Memory()
n = 0
ready = False
while True:
    tag = f"v{base + n:07d}"
    body = "".join(f"{tag} line {i:03d} " + "x" * 40 + "\\n" for i in range(lines))
    mem.hot_set(body + f"END {tag}\\n")
    n += 1
    if not ready:  # one write first (its lazy imports take longest): kills land on writes
        print("ready", flush=True)
        ready = True
"""


def hot_version(text: str, what: str) -> int:
    """The version number of a complete HOT.md written by HOT_WRITER; fails on anything else."""
    assert text.endswith("\n"), f"{what} does not end with a line break: {text[-80:]!r}"
    lines = text[:-1].split("\n")
    assert len(lines) == HOT_LINES + 1, f"{what} has {len(lines)} lines: {text[-120:]!r}"
    tags = {line.split(" ", 1)[0] for line in lines[:-1]}
    assert len(tags) == 1, f"{what} mixes versions {sorted(tags)}"
    (tag,) = tags
    assert lines[-1] == f"END {tag}", f"{what} ends with {lines[-1]!r}, not 'END {tag}'"
    assert all(line == f"{tag} line {i:03d} " + "x" * 40 for i, line in enumerate(lines[:-1])), (
        f"{what} has a damaged line"
    )
    return int(tag[1:])


def test_hot_md_survives_sigkill_at_any_instant(workers: Workers, state_dir: Path) -> None:  # H4
    kills, rng = 40, random.Random(20260610)
    hot = state_dir / "memory" / "HOT.md"
    bak = state_dir / "memory" / "HOT.md.bak"
    with Memory() as mem:  # two complete versions first, so HOT.md.bak exists from the start
        for _ in range(2):
            mem.hot_set(
                "".join(f"v0000000 line {i:03d} " + "x" * 40 + "\n" for i in range(HOT_LINES))
                + "END v0000000\n"
            )
    script = workers.script("hot_writer", HOT_WRITER)
    last, advanced = 0, 0
    for k in range(1, kills + 1):
        proc = workers.start(script, k * 100_000, HOT_LINES, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", workers.stderr()
        time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, workers.stderr()  # killed, not crashed
        current = hot_version(hot.read_text(encoding="utf-8"), f"HOT.md after kill {k}")
        backup = hot_version(bak.read_text(encoding="utf-8"), f"HOT.md.bak after kill {k}")
        assert backup <= current, (k, backup, current)
        assert current >= last
        advanced += current > k * 100_000  # a write after "ready" (version base + 0) held
        last = current
    # The writer did write between many kills (so the kills landed on a busy writer; about
    # half of them land mid-write, as the temp files left behind show).
    assert advanced >= kills // 4, f"HOT.md changed in only {advanced} of {kills} runs"
    # A writer killed between creating its temp file and the rename leaves that temp file
    # behind (nothing can remove it at that instant); it is never read as memory, and the
    # next write, holding the lock every writer takes, sweeps it away.
    strays = leftover_temp_files(state_dir / "memory")
    written = (f"{TEMP_PREFIX}HOT.md", f"{TEMP_PREFIX}.view.json")  # the view's record: W1
    assert all(Path(s).name.startswith(written) for s in strays), strays
    Memory(str(state_dir)).hot_append("after the kills")
    assert leftover_temp_files(state_dir / "memory") == []


# -- 3. racing supersedes of one fact ------------------------------------------------------

SUPERSEDER = """
from memdir import Memory

idx, rounds, sync = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
open(os.path.join(sync, f"ready-{idx}"), "w").close()
for r in range(rounds):
    target = os.path.join(sync, f"round-{r}")
    wait_for_file(target)
    fact_id = int(open(target).read())
    try:
        with Memory() as mem:
            new = mem.supersede_fact(fact_id, f"round {r} replacement by worker {idx}")
        result = {"ok": True, "id": new.id, "supersedes": new.supersedes,
                  "forked": list(new.forked), "hint": new.hint}
    except Exception as exc:  # the parent shows it
        result = error(exc)
    publish(os.path.join(sync, f"result-{r}-{idx}"), result)
"""


def test_racing_supersedes_both_kept_as_a_fork_doctor_flags(workers: Workers) -> None:
    """F3 W1 L3: two processes supersede the same fact at once, 20 rounds: neither loses
    its write. Each version is stored exactly once, the one written second is told it
    forked and names the other, and doctor flags every fork until it is settled."""
    from memdir.curation import doctor

    n_workers, rounds = 2, 20
    script = workers.script("superseder", SUPERSEDER)
    for i in range(n_workers):
        workers.start(script, i, rounds, workers.sync)
    workers.go(n_workers, name="unused")  # all started and imported before round 0
    originals = []
    with Memory() as mem:
        for r in range(rounds):
            original = mem.add_fact(f"round {r} original fact", "decision")
            originals.append(original.id)
            target = workers.sync / f"round-{r}"
            (workers.sync / "round.part").write_text(str(original.id))
            os.replace(workers.sync / "round.part", target)
            results = [
                read_result(workers.sync / f"result-{r}-{i}", 20, workers.stderr)
                for i in range(n_workers)
            ]
            assert all(x["ok"] for x in results), f"round {r}: {results}"
            assert all(x["supersedes"] == original.id for x in results)
            ids = sorted(x["id"] for x in results)
            assert len(set(ids)) == 2, results
            first, second = ids
            # the one written second forked the history and says which version holds too
            [late] = [x for x in results if x["id"] == second]
            assert late["forked"] == [first], late
            assert f"fact {original.id} was superseded already by fact {first}" in late["hint"]
            chain = mem.fact_history(original.id)
            assert [f.id for f in chain] == [original.id, first, second]
            assert [f.status for f in chain] == ["superseded", "active", "active"]
            assert chain[0].superseded_by == first
            texts = sorted(f.content for f in chain[1:])
            assert texts == [f"round {r} replacement by worker {i}" for i in range(n_workers)]
        workers.join()
        assert mem.stats().facts_active == 2 * rounds  # nothing more: each version once
        forked = doctor.run(mem).findings
        flagged = [f for f in forked if f.check == "facts.forked"]
        assert sorted(f.where[0] for f in flagged) == originals
        assert all(len(f.where) == 3 and f.severity == "warning" for f in flagged)
        # settling one (removing a version) takes it off the report, and only it
        settled = flagged[0]
        mem.remove_fact(settled.where[2])
        left = [f for f in doctor.run(mem).findings if f.check == "facts.forked"]
        assert sorted(f.where[0] for f in left) == [i for i in originals if i != settled.where[0]]


# -- 4. a database locked longer than the busy timeout -------------------------------------

LOCK_HOLDER = """
import sqlite3

if sys.argv[1].startswith("postgresql:"):  # team mode: the scope's lock every write takes
    import psycopg
    from memdir.storage.postgres.connection import LOCK_CLASS

    db = psycopg.connect(sys.argv[1])  # a transaction from the first statement to rollback
    # set as a store of the scope sets it: its row-level security admits the insert (L4)
    db.execute("SET search_path TO memdir_default; SET memdir.scope TO memdir_default")
    db.execute("SELECT pg_advisory_xact_lock(%s, hashtext('memdir_default'))", (LOCK_CLASS,))
else:
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO facts (id, category, content, created, updated) "
           "VALUES ((SELECT coalesce(max(id), 0) + 1 FROM facts), 'learning', "
           "'uncommitted by the lock holder', 'x', 'x')")
print("locked", flush=True)
wait_for_file(sys.argv[2], timeout=120.0)  # held until the test has tried its write
db.rollback()
db.close()
"""


def test_write_to_a_locked_database_fails_cleanly_and_can_be_retried(
    workers: Workers, state_dir: Path, run: Callable[..., Any]
) -> None:  # Z F1 L3
    write_config(state_dir, "[memory]\nbusy_timeout_ms = 200\n")
    earlier = [f"earlier fact number {i} about lockwatch" for i in range(3)]
    for text in earlier:
        assert run("fact", "add", text, "-c", "learning").code == 0

    db_path = state_dir / "memory" / "memory.db"
    release = workers.sync / "release"
    holder = workers.start(
        # held until released, not for a time: on a loaded machine (a parallel run) a
        # search that loads the model and a CLI start can outlast any fixed hold
        workers.script("lock_holder", LOCK_HOLDER),
        os.environ["MEMDIR_DATABASE_URL"] if TEAM else db_path,
        release,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "locked\n", workers.stderr()

    # Readers are not blocked by a writer (WAL).
    found = run("--json", "search", "lockwatch")
    assert found.code == 0, found.err
    assert len(found.json()) == len(earlier)

    started = time.monotonic()
    blocked = run("fact", "add", "the write that meets the lock", "-c", "learning")
    waited = time.monotonic() - started
    assert holder.poll() is None, "the lock was released before the write was tried"
    assert blocked.code == 1
    assert blocked.out == ""
    assert "Traceback" not in blocked.err
    assert blocked.err.endswith("\n") and blocked.err.count("\n") == 1, blocked.err
    assert blocked.err.startswith("memdir: error: ")
    store_named = "(scope default)" if TEAM else "memory.db"
    assert "locked" in blocked.err and store_named in blocked.err, blocked.err
    # it gave up while the lock was still held (the holder waits for `release`), after
    # at least the 200 ms busy timeout
    assert waited >= 0.2, f"waited {waited:.2f}s: less than the 200 ms busy timeout"

    release.touch()
    holder.wait(30)
    assert holder.returncode == 0, workers.stderr()
    retried = run("fact", "add", "the write that meets the lock", "-c", "learning")
    assert retried.code == 0, retried.err
    with Memory() as mem:
        contents = [h.content for h in mem.search("lockwatch OR meets", kinds=("fact",))]
    assert sorted(contents) == sorted([*earlier, "the write that meets the lock"])
    if not TEAM:  # SQLite's own integrity_check
        assert integrity(db_path) == ("ok", "ok")


# -- 5. a brand-new store opened by several processes at once ------------------------------

FRESH_OPENER = """
from memdir import Memory

idx, rounds, sync, base = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
open(os.path.join(sync, f"ready-{idx}"), "w").close()
for r in range(rounds):
    wait_for_file(os.path.join(sync, f"go-{r}"))
    try:
        # The first use of a new state dir creates memory.db and runs the migrations.
        with Memory(os.path.join(base, f"store-{r}"), create=True) as mem:
            fact = mem.add_fact(f"fresh store {r} worker {idx}", "decision")
        result = {"ok": True, "id": fact.id}
    except Exception as exc:
        result = error(exc)
    publish(os.path.join(sync, f"result-{r}-{idx}"), result)
"""


@pytest.mark.sqlite_only  # memory.db made and migrated once, its WAL mode and integrity_check
def test_new_store_opened_by_many_processes_at_once(
    workers: Workers, tmp_path: Path
) -> None:  # L3 F1: the first use creates memory.db and migrates it exactly once
    # 30 rounds: before the fix in SQLiteStore._enable_wal, about one round in 10 lost a
    # process to "database is locked" (the switch to WAL does not wait for the busy timeout).
    n_workers, rounds = 6, 30
    base = tmp_path / "stores"
    base.mkdir()
    script = workers.script("fresh_opener", FRESH_OPENER)
    for i in range(n_workers):
        workers.start(script, i, rounds, workers.sync, base)
    workers.go(n_workers, name="unused")
    versions = [(v, name) for v, name, _ in MIGRATIONS]
    for r in range(rounds):
        (workers.sync / f"go-{r}").touch()
        results = [
            read_result(workers.sync / f"result-{r}-{i}", 20, workers.stderr)
            for i in range(n_workers)
        ]
        assert all(x["ok"] for x in results), f"round {r}: {results}"
        db_path = base / f"store-{r}" / "memory" / "memory.db"
        db = sqlite3.connect(db_path)
        applied = db.execute(
            "SELECT version, name FROM schema_migrations ORDER BY rowid"
        ).fetchall()
        (user_version,) = db.execute("PRAGMA user_version").fetchone()
        (journal,) = db.execute("PRAGMA journal_mode").fetchone()
        stored = sorted(c for (c,) in db.execute("SELECT content FROM facts"))
        db.close()
        assert applied == versions, f"round {r}"
        assert user_version == versions[-1][0]
        assert journal == "wal"
        assert stored == sorted(f"fresh store {r} worker {i}" for i in range(n_workers))
        assert integrity(db_path) == ("ok", "ok")
    workers.join()


# -- 6. one procedure written by several processes at once ---------------------------------

PROC_LINES = 150

PROCEDURE_WRITER = """
from memdir import Memory

idx, writes, sync, lines = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
barrier(sync, idx)
with Memory() as mem:
    for n in range(writes):
        tag = f"w{idx}-{n:03d}"
        steps = "".join(f"{i}. step {i:03d} of {tag} " + "y" * 30 + "\\n" for i in range(lines))
        mem.write_procedure(
            "deploy-staging",
            f"---\\ndescription: deploy version {tag}\\n---\\n# Deploy {tag}\\n{steps}END {tag}\\n",
        )
"""


def procedure_version(text: str, what: str) -> str:
    """The writer tag of a complete procedure file; fails on a torn or mixed one."""
    lines = text.split("\n")
    assert lines[0] == "---" and lines[2] == "---", f"{what}: bad frontmatter {text[:80]!r}"
    tag = lines[1].removeprefix("description: deploy version ")
    expected = (
        f"---\ndescription: deploy version {tag}\n---\n# Deploy {tag}\n"
        + "".join(f"{i}. step {i:03d} of {tag} " + "y" * 30 + "\n" for i in range(PROC_LINES))
        + f"END {tag}\n"
    )
    assert text == expected, f"{what} is not one complete version (tag {tag!r})"
    return tag


def test_procedure_written_by_many_processes_is_one_complete_version(
    workers: Workers, state_dir: Path
) -> None:  # P1 L3 H4
    n_workers, writes = 4, 30
    script = workers.script("procedure_writer", PROCEDURE_WRITER)
    for i in range(n_workers):
        workers.start(script, i, writes, workers.sync, PROC_LINES)
    workers.go(n_workers)
    path = state_dir / "memory" / "procedures" / "deploy-staging.md"
    seen: set[str] = set()
    reads = 0
    with Memory() as mem:  # read it over and over while the writers race
        while any(p.poll() is None for p in workers.procs):
            if path.exists():
                seen.add(procedure_version(path.read_text(encoding="utf-8"), "the file"))
                proc = mem.procedure("deploy-staging")
                procedure_version(proc.content, "Memory.procedure()")
                assert proc.error is None
                reads += 1
    workers.join()
    final = procedure_version(path.read_text(encoding="utf-8"), "the final file")
    assert final.endswith(f"-{writes - 1:03d}")  # some writer's last version won
    assert reads > 0 and len(seen) > 1, (reads, seen)
    with Memory() as mem:
        assert [p.name for p in mem.procedures()] == ["deploy-staging"]
    assert leftover_temp_files(state_dir / "memory") == []


# -- 7. distinct names, one body, many processes (X5) --------------------------------------

SAME_BODY_WRITER = """
from memdir import Memory

idx, count, sync, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
barrier(sync, idx)
applied = []
for n in range(count):
    block = json.dumps({"scope": "global", "name": f"w{idx}-e{n:02d}",
                        "description": f"entry {n} of worker {idx}", "content": "c"})
    with Memory() as mem:  # a fresh Memory per block, like a hook's `memdir memorize`
        result = mem.ingest(f"MEMDIR_MEMORIZE_BEGIN\\n{block}\\nMEMDIR_MEMORIZE_END\\n")
    applied += [[a.target, a.action] for a in result.applied]
    applied += [["warning", w] for w in result.warnings]
publish(log, applied)
"""


def test_six_processes_writing_72_names_with_one_body_keep_all_72(
    workers: Workers, state_dir: Path
) -> None:  # X5 G2 L3: the name is the identity, whatever the body
    n_workers, count = 6, 12
    Memory().write_entry("warm-up", "the store exists", "warm-up")
    script = workers.script("same_body_writer", SAME_BODY_WRITER)
    logs = [workers.tmp / f"applied-{i}.json" for i in range(n_workers)]
    for i in range(n_workers):
        workers.start(script, i, count, workers.sync, logs[i])
    workers.go(n_workers)
    workers.join()
    names = {f"w{i}-e{n:02d}" for i in range(n_workers) for n in range(count)}
    applied = [tuple(a) for log in logs for a in read_result(log, 5, workers.stderr)]
    assert sorted(applied) == sorted((name, "created") for name in names)
    with Memory() as mem:
        listed = {e.name for e in mem.entries()} - {"warm-up"}
        assert listed == names
        assert all(mem.entry(name).content == "c\n" for name in names)
    index = (state_dir / "memory" / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert len(index) == len(names) + 1
    assert leftover_temp_files(state_dir / "memory") == []
