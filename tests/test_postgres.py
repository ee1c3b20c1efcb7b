"""W1: what the PostgreSQL store adds to the Store contract (test_store_contract.py runs the
contract on both backends): the backend chosen by a URL, scopes kept apart (L4), SQLite's
own bm25 scores, the password never shown, doctor's look at the database, and writers on
one scope from many processes, one of them killed mid-transaction. A real server
(tests/pg_server.py), real processes, no mocks.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.errors import ConfigError, StorageError, ValidationError
from memdir.models import Provenance
from memdir.paths import Layout
from memdir.settings import Settings
from memdir.storage import open_store
from memdir.storage.base import Store
from memdir.storage.hashing import text_hash
from memdir.storage.rows import FileState, Node, Op, Word
from memdir.storage.rows_cold import FileChunks, NewChunk, NewFact, NewVector
from memdir.testing import poll

BY = Provenance(None, "cli", "agent-a")
NOW = "2026-03-01T10:00:00Z"


def layout_at(root: Path) -> Layout:
    (root / "memory").mkdir(parents=True, exist_ok=True)
    return Layout(str(root), str(root / "memory"))


def pg(url: str, scope: str = "default", **settings: Any) -> Settings:
    return Settings(storage_url=url, storage_scope=scope, **settings)


# -- the backend is chosen by a URL -----------------------------------------------------------


def test_w1_a_url_in_the_environment_puts_the_store_in_postgres(
    pg_url: str, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # W1
    monkeypatch.setenv("MEMDIR_DATABASE_URL", pg_url)
    with Memory() as mem:
        fact = mem.add_fact("Deploys go out on Tuesdays", "convention")
        assert type(mem.store).__name__ == "PostgresStore"
        assert not os.path.exists(mem.layout.db)  # no memory.db: the rows are in the database
    monkeypatch.setenv("MEMDIR_DATABASE_SCOPE", "other")
    with Memory() as mem:  # another scope of the same database: another store (L4)
        assert mem.store.get_fact(fact.id) is None and mem.store.count_facts() == {}
    monkeypatch.delenv("MEMDIR_DATABASE_SCOPE")
    with Memory() as mem:
        assert mem.get_fact(fact.id) == fact
    monkeypatch.delenv("MEMDIR_DATABASE_URL")
    with Memory() as mem:  # no URL: memory.db, which holds nothing of it
        assert type(mem.store).__name__ == "SQLiteStore" and mem.store.get_fact(fact.id) is None


def test_w1_a_url_in_config_toml_does_the_same(pg_url: str, state_dir: Path) -> None:  # W1
    (state_dir / "config.toml").write_text(
        f'[storage]\nurl = "{pg_url}"\nscope = "team_a"\n', encoding="utf-8"
    )
    with Memory() as mem:
        fact = mem.add_fact("The staging database is refreshed nightly", "learning")
        assert not os.path.exists(mem.layout.db)
    # another machine: another memory root, the same URL and scope -> the same rows
    there = open_store(layout_at(state_dir.parent / "elsewhere"), pg(pg_url, "team_a"))
    default = open_store(layout_at(state_dir.parent / "elsewhere"), pg(pg_url))
    try:
        assert there.get_fact(fact.id) == fact
        assert default.get_fact(fact.id) is None and default.count_facts() == {}
    finally:
        there.close()
        default.close()


def test_w1_bad_storage_settings_are_one_clear_line(state_dir: Path, run: Any) -> None:  # W1 S
    config = state_dir / "config.toml"
    config.write_text('[storage]\nurl = "mysql://root:hunter2@db/x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="storage.url = a value is not valid") as caught:
        Memory()
    assert "hunter2" not in str(caught.value)
    res = run("search", "deploy")
    assert res.code != 0 and res.err.count("\n") == 1 and "hunter2" not in res.err
    assert "Traceback" not in res.err
    config.write_text('[storage]\nscope = "Has Spaces"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="storage.scope"):
        Memory()
    config.write_text('[storage]\nhost = "db"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key storage.host"):
        Memory()
    config.unlink()
    res = run("search", "deploy", env={"MEMDIR_DATABASE_URL": "sqlite:///tmp/x.db"})
    assert res.code != 0 and "MEMDIR_DATABASE_URL must be a PostgreSQL URL" in res.err
    with pytest.raises(ValidationError, match="not a scope name"):
        Memory(env={**os.environ, "MEMDIR_DATABASE_SCOPE": "9lives"})


# -- lexical search: SQLite's bm25, the same scores ----------------------------------------

VOCAB = (
    "deploy staging redis queue postgres backup nightly cache build tests parallel docker "
    "kubernetes helm chart release tuesday friday review merge branch main hotfix rollback "
    "latency p95 dashboard alert pager oncall runbook incident billing invoice customer "
    "europe region failover replica primary vacuum index migration schema json api gateway "
    "token rotate secret vault node.js foo-bar café naïve résumé"
).split()


def corpus(rng: random.Random, n: int) -> list[str]:
    texts = []
    for i in range(n):
        words = [rng.choice(VOCAB) for _ in range(rng.randint(2, 14))]
        if i % 7 == 0:
            words += words[:2]  # repeated words: tf above 1
        texts.append(" ".join(words) + f" item{i}")
    return texts


def both_stores(tmp_path: Path, pg_url: str) -> tuple[Store, Store]:
    lite = open_store(layout_at(tmp_path / "lite"), Settings(), backend="sqlite")
    post = open_store(layout_at(tmp_path / "post"), pg(pg_url), backend="postgres")
    return lite, post


def same_writes(store: Store, texts: list[str]) -> None:
    """The same writes, in the same order, so both stores give the same ids."""
    ids = store.add_facts([NewFact("learning", t) for t in texts[:150]], NOW, BY)
    for i, text in enumerate(texts[150:]):
        by = Provenance(f"s-{i % 5}", "cli", "agent-b")
        store.add_fact("decision", text, f"2026-03-{2 + i % 20:02d}T10:00:00Z", by)
    for fact_id in ids[:40:3]:
        store.supersede_fact(
            fact_id, None, texts[fact_id - 1] + " revised", "2026-03-25T00:00:00Z", BY
        )
    for fact_id in ids[41:60:4]:
        store.remove_fact(fact_id, "2026-03-26T00:00:00Z")
    store.replace_chunks(
        [
            FileChunks(
                f"global/doc{k}.md",
                FileState("global", k, 10, f"h{k}"),
                [
                    NewChunk(1 + 3 * j, 3 + 3 * j, None, texts[(k * 7 + j) % len(texts)],
                             text_hash(texts[(k * 7 + j) % len(texts)]))
                    for j in range(4)
                ],
            )
            for k in range(12)
        ],
        [],
    )  # fmt: skip


def queries() -> list[tuple[Node, bool]]:
    def any_of(*words: str) -> Node:
        node: Node = Word(words[0])
        for word in words[1:]:
            node = Op("OR", node, Word(word))
        return node

    return [
        (Word("deploy"), False),
        (Word("redis"), False),
        (any_of("deploy", "staging", "nightly"), True),
        (any_of("billing", "invoice", "customer", "europe"), True),
        (Op("AND", Word("redis"), Word("queue")), False),
        (Op("NOT", Word("cache"), Word("build")), False),
        (Word("staging nightly", phrase=True), False),
        (Word("rel", prefix=True), False),
        (Word("deploying", prefix=True), False),
        (Word("node.js"), False),
        (Word("foo-bar"), False),
        (Word("cafe"), False),  # remove_diacritics: café
        (Word("revised"), False),
        (Word("!!!"), False),
        (Op("OR", Word("!!!"), Word("vault")), False),
        (Op("AND", any_of("token", "rotate"), Op("NOT", Word("secret"), Word("vault"))), False),
    ]


def scores(found: list[Any]) -> dict[int, float]:
    return {hit[0].id: hit.score for hit in found}


def test_w1_lexical_scores_are_sqlites_bm25(tmp_path: Path, pg_url: str) -> None:  # W1 F4 Q1 Q3
    """The same writes into memory.db and into PostgreSQL: every query finds the same facts,
    chunks and group documents with the same bm25 (FTS5's, to rounding)."""
    texts = corpus(random.Random(17), 260)
    lite, post = both_stores(tmp_path, pg_url)
    try:
        for store in (lite, post):
            same_writes(store, texts)
        assert lite.count_facts() == post.count_facts()
        compared = 0
        for query, question in queries():
            for as_of in (None, "2026-03-10T00:00:00Z", "2026-03-27T00:00:00Z"):
                want = scores(lite.search_facts(query, None, None, 1000, as_of, question=question))
                got = scores(post.search_facts(query, None, None, 1000, as_of, question=question))
                assert got.keys() == want.keys(), (query, as_of)
                for fact_id, score in want.items():
                    assert got[fact_id] == pytest.approx(score, rel=1e-9, abs=1e-12), query
                compared += len(want)
            for kinds in (("global",), ("global", "daily")):
                want = {h.chunk.id: h.score for h in lite.search_chunks(query, kinds, None, 1000)}
                got = {h.chunk.id: h.score for h in post.search_chunks(query, kinds, None, 1000)}
                assert got.keys() == want.keys() and all(
                    got[i] == pytest.approx(s, rel=1e-9, abs=1e-12) for i, s in want.items()
                ), query

            # group documents: compared by what they hold (owner, first member)
            def by_owner(store: Store, query: Node = query) -> dict[tuple[str, int], float]:
                found = store.group_scores(query)
                owners = [f"session:s-{i}" for i in range(5)] + [
                    f"file:global/doc{k}.md" for k in range(12)
                ]
                return {
                    (owner, first): found[page]
                    for owner, pages in store.group_pages(owners).items()
                    for first, _, page in pages
                    if page in found
                }

            want_g, got_g = by_owner(lite), by_owner(post)
            assert got_g.keys() == want_g.keys(), query
            assert all(got_g[k] == pytest.approx(v, rel=1e-9) for k, v in want_g.items())
        assert compared > 500  # the queries found something to compare
        assert post.inspect().problems == ["ok"]
    finally:
        lite.close()
        post.close()


# -- the password is never shown --------------------------------------------------------------


def test_w1_a_password_in_the_url_is_never_shown(
    pg_server: Any, pg_url: str, state_dir: Path, run: Any
) -> None:  # W1 X2
    import pg_server as server_module

    name = pg_url.split("?")[0].rsplit("/", 1)[1]
    secret = server_module.PASSWORD
    good = pg_server.tcp_url(name)  # over TCP: the server asks for the password
    bad = good.replace(secret, "wrong-" + secret[::-1])
    with Memory(env={**os.environ, "MEMDIR_DATABASE_URL": good}) as mem:
        mem.add_fact("Reached with a password", "learning")
    with Memory(env={**os.environ, "MEMDIR_DATABASE_URL": bad}) as mem:
        with pytest.raises(StorageError) as caught:
            mem.add_fact("refused", "learning")
    message = str(caught.value)
    assert "***" in message and secret not in message and secret[::-1] not in message
    assert "\n" not in message
    for env in ({"MEMDIR_DATABASE_URL": bad}, {"MEMDIR_DATABASE_URL": bad.replace("pw-", "")}):
        res = run("fact", "add", "refused too", "--category", "learning", env=env)
        assert res.code != 0 and res.err.count("\n") == 1 and "Traceback" not in res.err
        assert secret not in res.err and secret[::-1] not in res.err and "***" in res.err
        res = run("doctor", "--json", env=env)
        assert secret not in res.out + res.err and secret[::-1] not in res.out + res.err
        found = {f["check"]: f for f in res.json()["findings"]}
        assert found["db.connect"]["severity"] == "error"
    res = run("doctor", "--json", env={"MEMDIR_DATABASE_URL": good})
    assert secret not in res.out + res.err
    database = res.json()["database"]
    assert database["backend"] == "postgres" and database["exists"] is True
    assert not [f for f in res.json()["findings"] if f["check"].startswith("db.")]
    assert database["facts"] == {"active": 1} and "***" in database["path"]


def test_w1_a_short_password_is_masked_where_it_stands_not_inside_words(
    pg_server: Any, pg_url: str
) -> None:  # W1 X2
    """A one-letter password is not cut out of every word that holds its letter (the
    server's "port" became "***ort"): the message stays readable, the password hidden."""
    import pg_server as server_module

    name = pg_url.split("?")[0].rsplit("/", 1)[1]
    bad = pg_server.tcp_url(name).replace(server_module.PASSWORD, "p")
    with Memory(env={**os.environ, "MEMDIR_DATABASE_URL": bad}) as mem:
        with pytest.raises(StorageError) as caught:
            mem.add_fact("refused", "learning")
    message = str(caught.value)
    assert "port" in message and "password" in message and "***ort" not in message
    assert ":p@" not in message and "***" in message


# -- many writers on one scope, one killed mid-transaction (W1, L3) --------------------------

WRITER = """
import json, os, sys, time
from memdir import Memory

me, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Memory(agent=me) as mem:
    mem.store.get_value("warm")  # connected, the scope migrated: then all start at once
    print(json.dumps({"ready": me}), flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    for i in range(n):
        own = mem.add_fact(f"writer {me} fact {i}", "learning")
        print(json.dumps({"own": own.id}), flush=True)  # acknowledged: it returned
        shared = mem.add_fact(f"said by every writer {i}", "learning")
        print(json.dumps({"shared": shared.id, "i": i}), flush=True)
"""

VICTIM = """
import json, sys
from memdir import Memory
from memdir.storage.rows_cold import NewFact
from memdir.models import Provenance

n = int(sys.argv[1])
with Memory(agent="victim") as mem:
    cur = mem.store._require()
    cur.execute("SELECT pg_backend_pid()")
    print(json.dumps({"backend": cur.fetchone()[0]}), flush=True)
    rows = [NewFact("learning", f"victim fact {i} of a batch never committed") for i in range(n)]
    mem.store.add_facts(rows, "2026-03-01T10:00:00Z", Provenance(None, "cli", "victim"))
    print(json.dumps({"committed": n}), flush=True)
"""


def _lines(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_w1_writers_on_one_scope_lose_and_duplicate_nothing_and_a_killed_one_leaves_nothing(
    pg_server: Any, pg_url: str, tmp_path: Path, state_dir: Path
) -> None:  # W1 L3 F1 X5
    """Six processes add facts to one scope at once (each its own, and the same texts as
    every other), while a seventh, SIGKILLed holding the scope's write lock in the middle
    of a 20,000-fact batch, leaves none of it: afterwards every acknowledged fact is there
    exactly once, each shared text once, and the index agrees with the rows."""
    import psycopg

    env = {**os.environ, "MEMDIR_DATABASE_URL": pg_url}
    (tmp_path / "writer.py").write_text(textwrap.dedent(WRITER), encoding="utf-8")
    (tmp_path / "victim.py").write_text(textwrap.dedent(VICTIM), encoding="utf-8")
    with Memory(env=env) as mem:
        mem.store.set_value("warm", "1")  # the scope exists before anyone races for it
    go, writers, n = tmp_path / "go", 6, 25
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), f"w{k}", str(n), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for k in range(writers)
    ]  # fmt: skip
    victim = subprocess.Popen(
        [sys.executable, str(tmp_path / "victim.py"), "20000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert "ready" in json.loads(proc.stdout.readline() or "{}"), proc.stderr
        go.touch()
        assert victim.stdout is not None
        backend = json.loads(victim.stdout.readline())["backend"]
        with psycopg.connect(pg_url, autocommit=True) as look:
            deadline = time.monotonic() + 120  # a bound on a hung run, not a measure
            while True:  # until the victim holds the scope's lock: mid-transaction
                held = look.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND pid = %s",
                    (backend,),
                ).fetchone()
                if held and held[0]:
                    break
                assert victim.poll() is None, victim.communicate()
                assert time.monotonic() < deadline, "the victim never took the write lock"
                time.sleep(0.002)
            victim.send_signal(signal.SIGKILL)
            victim.communicate(timeout=30)
            results = [_lines(proc) for proc in procs]
            while look.execute(  # the server notices the dead client and rolls it back
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
            ).fetchone() != (0,):
                assert time.monotonic() < deadline, "the killed writer's backend stayed"
                time.sleep(0.01)
    finally:
        for proc in [*procs, victim]:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # reaped, its pipes closed
    assert victim.returncode == -signal.SIGKILL
    own = [line["own"] for lines in results for line in lines if "own" in line]
    shared: dict[int, set[int]] = {}
    for lines in results:
        for line in lines:
            if "shared" in line:
                shared.setdefault(line["i"], set()).add(line["shared"])
    assert len(own) == len(set(own)) == writers * n  # every acknowledged write, each its id
    assert all(len(ids) == 1 for ids in shared.values()) and len(shared) == n  # once each
    with Memory(env=env) as mem:
        store = mem.store
        facts = store.facts_by_id(own)
        assert sorted(facts) == sorted(own)
        assert store.count_facts() == {"active": writers * n + n}  # none of the victim's
        assert store.search_facts(Word("victim"), None, None, 10) == []
        assert store.inspect().problems == ["ok"]  # the index agrees with the rows
        after = mem.add_fact("written after the kill", "learning")  # the lock was let go
        assert store.get_fact(after.id) == after


# -- memdir migrate: to the team database and back, verified --------------------------------


def _everything(store: Store) -> dict[str, list[dict[str, Any]]]:
    from memdir.storage.rows import ARCHIVE_KINDS

    return {kind: list(store.archive_rows(kind)) for kind in ARCHIVE_KINDS}


def test_w1_migrate_moves_a_store_to_postgres_and_back_record_for_record(
    pg_url: str, state_dir: Path, tmp_path: Path, run: Any
) -> None:  # W1 (migrate) F3
    with Memory() as mem:
        session = mem.start_session()
        mem.bind_session(session.id)
        first = mem.add_fact("The API lives at v1", "decision")
        mem.supersede_fact(first.id, "The API lives at v2")
        gone = mem.add_fact("A fact removed later", "learning")
        mem.remove_fact(gone.id)
        mem.add_fact("Deploys go out on Tuesdays", "convention")
        mem.supersede_fact(first.id, "The API lives at v3")  # a fork (F3): two successors
        mem.start_task("build")
        mem.store.set_value("distill", "2026-03-01T00:00:00Z")
        mem.store.record_hits({first.id + 1: "2026-03-02T00:00:00Z"})
        active = [f.id for f in mem.store.stale_facts("9999-01-01T00:00:00Z")]
        mem.store.put_vectors(
            "m", [NewVector("fact", i, text_hash(str(i)), bytes([i]) * 16) for i in active]
        )
        before = _everything(mem.store)
        vectors = {m: sorted(mem.store.iter_vectors(m)) for m in mem.store.vector_models()}
    res = run("migrate", "--to", pg_url, "--json")
    assert res.code == 0, res.err
    done = res.json()
    assert done["counts"]["fact"] == 5 and done["counts"]["session"] == 1
    assert len(active) == 3 and "m" in vectors  # and what the write embedded, if it did
    assert done["vectors"] == sum(len(found) for found in vectors.values())
    res = run("migrate", "--to", pg_url)  # a second time: the target holds memory
    assert res.code != 0 and "holds memory already" in res.err and res.err.count("\n") == 1
    env = {**os.environ, "MEMDIR_DATABASE_URL": pg_url}
    with Memory(env=env) as mem:
        assert type(mem.store).__name__ == "PostgresStore"
        assert _everything(mem.store) == before
        assert {m: sorted(mem.store.iter_vectors(m)) for m in vectors} == vectors
        assert mem.store.count_unembedded("m") == 0
        assert mem.store.forked_facts() == [first.id]  # the fork came along
    # and back: a new memory root on the same database, migrated to its own memory.db
    other = tmp_path / "other-state"
    other.mkdir()
    res = run(
        "--state-dir", str(other), "migrate", "--to", "local", env={"MEMDIR_DATABASE_URL": pg_url}
    )
    assert res.code == 0 and "every record verified" in res.out, res.err
    with Memory(str(other)) as back:
        assert type(back.store).__name__ == "SQLiteStore"
        assert _everything(back.store) == before
        assert {m: sorted(back.store.iter_vectors(m)) for m in vectors} == vectors
        assert back.store.forked_facts() == [first.id]
    res = run("migrate", "--to", "local")
    assert res.code != 0 and "local already" in res.err
    with Memory(env=env) as mem:  # the migrated store is searched as any other
        assert [h.id for h in mem.search("tuesdays", mode="lexical")] == [first.id + 3]


def _backend(store: Store) -> int:
    """The server process behind the store's connection (connected first if need be)."""
    with store._read() as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT pg_backend_pid()")
        return int(cur.fetchone()[0])


def _terminate(url: str, backend: int) -> None:
    """What a restart, a failover or an idle timeout does to one connection: ended, and
    gone (it said so on its socket before it went)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone()[0]
        there = "SELECT 1 FROM pg_stat_activity WHERE pid = %s"
        poll(lambda: admin.execute(there, (backend,)).fetchone() is None, 60, "the backend gone")


def test_w1_a_connection_ended_between_two_calls_is_opened_again_by_the_next(
    pg_url: str, tmp_path: Path
) -> None:  # W1
    """The server ends the store's idle connection: the next call, a write or a read,
    runs on a new connection as if nothing happened, and every acknowledged write is
    there once."""
    store = open_store(layout_at(tmp_path / "a"), pg(pg_url))
    try:
        kept = store.add_fact("learning", "written before the cut", NOW, BY)
        first = _backend(store)
        _terminate(pg_url, first)
        after = store.add_fact("learning", "written after the cut", NOW, BY)
        second = _backend(store)
        assert second != first and not after.duplicate
        _terminate(pg_url, second)
        assert store.get_fact(kept.id) == kept  # a read, too
        assert _backend(store) != second
        assert store.count_facts() == {"active": 2}
    finally:
        store.close()


def _blocked_write(
    pg_url: str, store: Store, content: str, hold: tuple[int, int]
) -> tuple[BaseException | None, Any]:
    """store.add_fact(content) made on a thread while a second connection holds the
    advisory lock `hold` it waits for; its backend terminated once it waits: what it
    raised (None: nothing) and what it returned."""
    import threading

    import psycopg

    outcome: list[Any] = [None, None]

    def write() -> None:
        try:
            outcome[1] = store.add_fact("learning", content, NOW, BY)
        except BaseException as exc:  # handed to the test thread, which asserts on it
            outcome[0] = exc

    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s, %s)", hold)
        thread = threading.Thread(target=write)
        thread.start()
        waiting = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() " + (
            "AND application_name = 'memdir' AND wait_event_type = 'Lock'"
        )
        backend = poll(lambda: admin.execute(waiting).fetchone(), 60, "the write waiting")[0]
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        thread.join(60)
        assert not thread.is_alive()
        admin.execute("SELECT pg_advisory_unlock(%s, %s)", hold)
    return outcome[0], outcome[1]


def test_w1_a_write_cut_off_mid_transaction_is_reported_absent_and_a_retry_stores_it(
    pg_url: str, tmp_path: Path
) -> None:  # W1
    """The connection goes while a write waits inside its transaction (here: for the
    scope's write lock, held by another connection): one clear StorageError, the write
    not stored at all (nothing half-written), and the caller's
    retry stores it once."""
    from memdir.storage.postgres.connection import LOCK_CLASS

    store = open_store(layout_at(tmp_path / "a"), pg(pg_url, "cut", busy_timeout_ms=600_000))
    try:
        kept = store.add_fact("learning", "written before the cut", NOW, BY)
        schema_lock = (LOCK_CLASS, _hashtext(pg_url, store.schema))  # type: ignore[attr-defined]
        raised, returned = _blocked_write(pg_url, store, "met the cut", schema_lock)
        assert isinstance(raised, StorageError) and returned is None
        message = str(raised)
        assert "\n" not in message and "nothing was taken as done" in message
        assert store.count_facts() == {"active": 1}
        assert [f.id for f in store.recent_facts(10)] == [kept.id]
        again = store.add_fact("learning", "met the cut", NOW, BY)
        assert not again.duplicate and store.count_facts() == {"active": 2}
    finally:
        store.close()


def test_w1_a_write_cut_off_while_it_commits_is_reported_as_unknown(
    pg_url: str, tmp_path: Path
) -> None:  # W1
    """The connection goes while the server commits a write (here a deferred trigger
    makes COMMIT wait on a lock another connection holds): the answer is lost, so the
    write may be stored or not; the StorageError says that, in one line (never "nothing
    was stored"), and nothing retries it silently. Looking, then writing again, stores
    it once."""
    import psycopg

    store = open_store(layout_at(tmp_path / "a"), pg(pg_url, "commit", busy_timeout_ms=600_000))
    try:
        store.add_fact("learning", "made the scope", NOW, BY)
        schema = store.schema  # type: ignore[attr-defined]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                f'CREATE FUNCTION "{schema}".hold() RETURNS trigger LANGUAGE plpgsql AS '
                "$$ BEGIN PERFORM pg_advisory_xact_lock(7, 7); RETURN NULL; END $$"
            )
            admin.execute(
                f'CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON "{schema}".facts '
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                f'EXECUTE FUNCTION "{schema}".hold()'
            )
        raised, returned = _blocked_write(pg_url, store, "committed or not", (7, 7))
        assert isinstance(raised, StorageError) and returned is None
        message = str(raised)
        assert "\n" not in message and "cannot tell whether the write" in message
        assert "nothing was taken as done" not in message
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP TRIGGER hold ON "{schema}".facts')
        found = [f for f in store.recent_facts(10) if f.content == "committed or not"]
        if not found:  # what the caller does: look, then write again
            store.add_fact("learning", "committed or not", NOW, BY)
        assert [f.content for f in store.recent_facts(10)].count("committed or not") == 1
    finally:
        store.close()


def _hashtext(url: str, text: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        return int(admin.execute("SELECT hashtext(%s)", (text,)).fetchone()[0])
