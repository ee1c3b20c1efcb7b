"""The warm worker of a store (Q2): started on demand by a CLI search, reused by the next
processes, one per store however many start it, private, gone after its idle time or its
store, whatever happens to its starter; its answers equal in-process semantic ranking.
Real processes throughout; states are polled with a deadline, never timed."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.search import VectorCache, worker
from memdir.storage import embeddings, open_store
from memdir.testing import HashEmbedder, at_once, cli_command, cli_env, poll, worker_pid

needs_model = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")
DEADLINE = 120.0  # seconds a state may take to come on a loaded machine: a bound, not a time

FACTS = (
    "giraffes sleep standing up",
    "the wiki moved to the new nas",
    "kiwi vines like shade in the orchard",
    "the build uses make and a venv",
    "our cat naps on the warm windowsill",
)


def workers_of(state_dir: Path) -> list[int]:
    """The live processes running a worker for this store (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and worker.MODULE.encode() in argv and os.fsencode(state_dir) in argv:
            found.append(int(name))
    return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.fixture
def store(state_dir: Path) -> Path:
    """Five facts with their vectors (the real model, in this process), worker idle 30 s."""
    state_dir.joinpath("config.toml").write_text("[search]\nworker_idle = 30\n")
    with Memory() as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
        mem.embed_pending()
    return state_dir


def status(state_dir: Path) -> dict[str, Any] | None:
    return worker.call(worker.Places(str(state_dir)), {"op": "status"}, 5.0)


# -- needs no model: the vector cache appends what was added -----------------------------


def test_the_vector_cache_appends_added_vectors_and_reloads_after_a_removal(
    state_dir: Path,
) -> None:  # Q2
    embedder = HashEmbedder()
    with Memory(embedder=embedder) as mem:
        ids = [mem.add_fact(text, category="learning").id for text in FACTS[:3]]
        cache = VectorCache()
        keys, _, _ = cache.load(mem.store, embedder)
        assert len(keys) == 3
        matrix_before = cache._buffer
        ids.append(mem.add_fact(FACTS[3], category="learning").id)  # embedded on write
        keys, matrix, _ = cache.load(mem.store, embedder)
        assert cache._buffer is matrix_before  # appended in place, not reloaded
        fresh = VectorCache()
        fresh_keys, fresh_matrix, _ = fresh.load(mem.store, embedder)
        assert keys == fresh_keys and (matrix == fresh_matrix).all()
        mem.supersede_fact(ids[0], "giraffes sleep lying down too")  # a vector goes
        keys, matrix, _ = cache.load(mem.store, embedder)
        fresh_keys, fresh_matrix, _ = VectorCache().load(mem.store, embedder)
        assert sorted(keys) == sorted(fresh_keys) and ("fact", ids[0]) not in keys
        rows = [fresh_keys.index(key) for key in keys]
        assert (matrix == fresh_matrix[rows]).all()


def test_the_vector_cache_sees_the_newest_fact_superseded(state_dir: Path) -> None:  # Q2
    """The newest fact's vector has the top rowid: superseding it removes that row and the
    successor's vector takes the same id, so the count and the top id are as before. The
    warm matrix must still drop the old fact and hold the new one."""
    embedder = HashEmbedder()
    with Memory(embedder=embedder) as mem:
        ids = [mem.add_fact(text, category="learning").id for text in FACTS[:3]]
        cache = VectorCache()
        cache.load(mem.store, embedder)
        new = mem.supersede_fact(ids[-1], "kiwi vines like full sun after all")
        keys, matrix, _ = cache.load(mem.store, embedder)
        assert ("fact", ids[-1]) not in keys and ("fact", new.id) in keys
        fresh_keys, fresh_matrix, _ = VectorCache().load(mem.store, embedder)
        assert keys == fresh_keys and (matrix == fresh_matrix).all()


def test_a_companion_shares_its_owners_matrix_and_both_stay_right_while_one_writes(
    state_dir: Path,
) -> None:  # Q2 A2
    """A server's threads (its reads on a companion, its writes, its background embedder)
    hold one matrix, not one each; searches on one thread while the other adds and
    supersedes facts (appends and a reload of that matrix) all answer, and end as a
    matrix read afresh does."""
    import threading

    embedder = HashEmbedder()
    with Memory(embedder=embedder) as mem:
        for text in FACTS:
            mem.add_fact(text, category="learning")
        reader = mem.companion()
        assert reader._vectors is mem._vectors
        failed: list[BaseException] = []
        done = threading.Event()

        def search() -> None:
            while not done.is_set():
                try:
                    reader.search("kiwi orchard shade", mode="semantic")
                except BaseException as exc:  # the test's report, not a handler
                    failed.append(exc)
                    return

        thread = threading.Thread(target=search)
        thread.start()
        try:
            ids = [
                mem.add_fact(f"orchard row {n} gets kiwi vines", category="learning").id
                for n in range(40)
            ]
            mem.supersede_fact(ids[-1], "orchard row 39 gets apple trees")
            mem.supersede_fact(ids[0], "orchard row 0 stays empty")
        finally:
            done.set()
            thread.join(60)
        assert failed == [] and not thread.is_alive()
        keys, matrix, rows = reader._vectors.load(reader.store, embedder)
        fresh_keys, fresh_matrix, _ = VectorCache().load(reader.store, embedder)
        assert sorted(keys) == sorted(fresh_keys) and len(matrix) == len(fresh_keys)
        assert all((matrix[rows[key]] == fresh_matrix[i]).all() for i, key in enumerate(fresh_keys))


@pytest.mark.sqlite_only
def test_a_store_of_schema_12_gets_its_vectors_counted(state_dir: Path) -> None:  # Q2
    """Migration 13 counts the vectors a store already holds; its triggers count the rest.
    A read-only look at a store not migrated yet counts the rows itself."""
    import sqlite3

    embedder = HashEmbedder()
    with Memory(embedder=embedder) as mem:
        ids = [mem.add_fact(text, category="learning").id for text in FACTS]
        db_path = mem.layout.db
    db = sqlite3.connect(db_path)
    db.executescript(
        "DROP TRIGGER vectors_counted; DROP TRIGGER vectors_replaced; "
        "DROP TRIGGER vectors_removed; DROP TABLE vector_counts; "
        "DELETE FROM schema_migrations WHERE version >= 13; PRAGMA user_version = 12;"
    )
    db.close()
    with Memory(embedder=embedder) as mem:  # a look does not migrate: it counts the rows
        look = open_store(mem.layout, mem.settings, read_only=True)
        try:
            assert look.vector_generation(embedder.name).n == len(FACTS)
            assert look.vector_models() == {embedder.name: len(FACTS)}
            keys, _, _ = VectorCache().load(look, embedder)
            assert len(keys) == len(FACTS)
        finally:
            look.close()
    with Memory(embedder=embedder) as mem:
        assert mem.store.vector_generation(embedder.name).n == len(FACTS)
        mem.remove_fact(ids[0])
        mem.add_fact("the orchard gets a new fence", category="learning")
        generation = mem.store.vector_generation(embedder.name)
        assert generation.n == len(FACTS) and generation.removed == 1
        keys, _, _ = VectorCache().load(mem.store, embedder)
        assert len(keys) == len(FACTS) and ("fact", ids[0]) not in keys


def test_worker_idle_is_checked(state_dir: Path, run: Callable[..., Any]) -> None:  # Q2 S
    state_dir.joinpath("config.toml").write_text("[search]\nworker_idle = -1\n")
    result = run("search", "kiwi")
    assert result.code == 1 and "search.worker_idle" in result.err and "86400" in result.err


def test_a_deep_state_dir_puts_its_socket_in_a_private_short_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:  # Q2
    import shutil
    import tempfile

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    # a short runtime dir of the test's own (a test's tmp_path can itself be too deep for
    # a socket path): the test changes its mode below, never a shared /tmp/memdir-<uid>
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    request.addfinalizer(lambda: shutil.rmtree(runtime, ignore_errors=True))
    places = worker.Places(str(deep))
    assert places.socket.startswith(str(runtime / "memdir") + "/")
    assert len(os.fsencode(places.socket)) <= worker.SUN_PATH_MAX
    places.make_dirs()
    assert stat.S_IMODE(os.stat(places.socket_dir).st_mode) == 0o700
    assert worker.Places(str(deep)).socket == places.socket  # the same store, the same place
    os.chmod(places.socket_dir, 0o755)  # shared with others: refused
    with pytest.raises(Exception, match="not private"):
        places.make_dirs()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("r" * 100)))  # too deep itself
    assert worker.Places(str(deep)).socket.startswith(f"/tmp/memdir-{os.getuid()}/")


# -- with the model: real workers ---------------------------------------------------------


@pytest.mark.embeddings
@needs_model
def test_a_search_starts_the_worker_the_next_ones_reuse_it_and_rank_as_in_process(
    store: Path, run: Callable[..., Any]
) -> None:  # Q2 Q3
    question = "which animal naps on its feet"
    first = run("search", question, "--json")
    # not up yet: this search ranked by words and said so, rather than wait for the model
    assert first.code == 0, first.err
    assert "ranked by words alone: the embedding worker is starting" in first.err
    up = poll(lambda: status(store))
    assert up["model"] == embeddings.DEFAULT_MODEL and up["vectors"] == len(FACTS)
    assert up["rss_mib"] > 0 and up["idle_exit_s"] == 30
    with Memory() as mem:  # this process, its own model: what the worker must equal
        local = {
            mode: [h.to_dict() for h in mem.search(question, mode=mode, min_score=0.0)]
            for mode in ("hybrid", "semantic")
        }
        local["default"] = [h.to_dict() for h in mem.search(question)]
    for mode in ("hybrid", "semantic"):
        result = run("search", question, "--mode", mode, "--min-score", "0.0", "--json")
        assert result.code == 0 and result.err == ""
        assert result.json() == local[mode]
    default = run("search", question, "--json")
    assert default.err == "" and default.json() == local["default"]
    assert "giraffes sleep standing up" in [hit["content"] for hit in default.json()]
    assert (status(store) or {}).get("pid") == up["pid"] == worker_pid(str(store))
    assert workers_of(store) == [up["pid"]]
    # C: a search through the worker imports no numpy, onnxruntime or tokenizers
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from memdir import Memory\n"
            "m = Memory(); m.use_worker = True\n"
            f"assert m.search({question!r}) and m.search_notice() is None\n"
            "print(sorted({'numpy', 'onnxruntime', 'tokenizers'} & set(sys.modules)))",
        ],
        env=cli_env(str(store)),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert (probe.returncode, probe.stdout.strip()) == (0, "[]"), probe.stderr


@pytest.mark.embeddings
@needs_model
def test_a_cli_write_is_embedded_by_the_worker(store: Path, run: Callable[..., Any]) -> None:
    # Q2: with the worker up, the write's vector comes from it, so the next search sees it
    run("search", "warm up", "--json")
    up = poll(lambda: status(store))
    result = run("fact", "add", "zebras graze on the savanna", "--category", "learning")
    assert result.code == 0, result.err
    with Memory() as mem:
        assert mem.store.count_unembedded(embeddings.DEFAULT_MODEL) == 0
    found = run("search", "striped horses eating grass", "--mode", "semantic", "--json")
    assert found.json()[0]["content"] == "zebras graze on the savanna"
    now = status(store) or {}
    assert now.get("vectors") == len(FACTS) + 1 and now.get("pid") == up["pid"]


@pytest.mark.embeddings
@needs_model
def test_the_worker_embeds_what_waits_in_the_background(
    store: Path, run: Callable[..., Any]
) -> None:  # Q2: never on the search path
    with Memory() as mem:
        mem.settings = mem.settings._replace(search_embed_on_write="loaded")
        for n in range(40):
            mem.add_fact(f"imported note number {n} about orchards", category="learning")
        assert mem.store.count_unembedded(embeddings.DEFAULT_MODEL) == 40
    run("search", "orchards", "--json")  # starts it; it embeds what waits
    poll(lambda: (status(store) or {}).get("waiting") == 0)
    result = run("search", "orchards", "--json")
    assert result.err == "" and all("lexical_only" not in h for h in result.json())


@pytest.mark.embeddings
@needs_model
def test_the_socket_is_private(store: Path, run: Callable[..., Any]) -> None:  # Q2
    run("search", "warm up")
    poll(lambda: status(store))
    places = worker.Places(str(store))
    assert stat.S_ISSOCK(os.stat(places.socket).st_mode)
    assert stat.S_IMODE(os.stat(places.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(places.dir).st_mode) == 0o700


@pytest.mark.embeddings
@needs_model
def test_the_worker_exits_after_its_idle_time_leaving_nothing(
    store: Path, run: Callable[..., Any]
) -> None:  # Q2
    store.joinpath("config.toml").write_text("[search]\nworker_idle = 1\n")
    run("search", "warm up")
    pid = poll(lambda: status(store))["pid"]
    poll(lambda: gone(pid))
    assert not os.path.exists(worker.Places(str(store)).socket)
    assert worker_pid(str(store)) is None and workers_of(store) == []
    result = run("search", "which animal naps on its feet", "--json")  # and starts again
    assert "the embedding worker is starting" in result.err
    assert poll(lambda: status(store))["pid"] != pid


@pytest.mark.embeddings
@needs_model
def test_a_killed_starter_does_not_keep_the_worker_past_its_idle_time(
    store: Path,
) -> None:  # Q2: never left behind
    store.joinpath("config.toml").write_text("[search]\nworker_idle = 1\n")
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from memdir import Memory\n"
            "m = Memory(); m.use_worker = True; m.search('giraffes'); time.sleep(600)",
        ],
        env=cli_env(str(store)),
    )
    try:
        pid = poll(lambda: status(store))["pid"]
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=DEADLINE)
        poll(lambda: gone(pid))
    finally:
        starter.kill()
        starter.wait()
    assert not os.path.exists(worker.Places(str(store)).socket) and workers_of(store) == []


@pytest.mark.embeddings
@needs_model
def test_two_starters_at_once_make_one_worker(store: Path) -> None:  # Q2
    results = at_once(cli_command("search", "giraffes"), 2, cli_env(str(store)))
    assert [code for code, _, _ in results] == [0, 0]
    pid = poll(lambda: status(store))["pid"]
    poll(lambda: workers_of(store) == [pid])  # a second one, if started, found the lock
    # and two workers started by hand at the same moment: one serves, one exits at once
    store.joinpath("config.toml").write_text("[search]\nworker_idle = 1\n")
    os.kill(pid, signal.SIGTERM)
    poll(lambda: gone(pid))
    argv = [sys.executable, "-m", worker.MODULE, str(store)]
    both = at_once(argv, 2, cli_env(str(store)))  # each until it exits: at once, or idle
    assert [code for code, _, _ in both] == [0, 0]
    assert sorted(err.count("serving") for _, _, err in both) == [0, 1]


@pytest.mark.embeddings
@needs_model
def test_the_worker_exits_when_its_store_goes_away(
    tmp_path: Path, run: Callable[..., Any]
) -> None:  # Q2
    other = tmp_path / "other"
    other.mkdir()
    with Memory(str(other)) as mem:
        mem.add_fact("giraffes sleep standing up", category="learning")
        mem.embed_pending()
    result = run("--state-dir", str(other), "search", "giraffes")
    assert result.code == 0, result.err
    pid = poll(lambda: status(other))["pid"]
    shutil.rmtree(other)
    # made again at once, as a team view rendering into the removed root did: another folder
    (other / "memory" / ".locks").mkdir(parents=True)
    poll(lambda: gone(pid))


def test_a_worker_whose_store_went_before_it_started_makes_nothing(tmp_path: Path) -> None:  # Q2
    """Started by a search just before its store was deleted, the worker finds its folder
    gone: it says so and exits, and the deleted store is not made again, not even the
    worker's own folder."""
    for removed in ("worker", "state"):
        state = tmp_path / removed
        (state / "worker").mkdir(parents=True)
        shutil.rmtree(state / "worker" if removed == "worker" else state)
        late = subprocess.run(
            [sys.executable, "-m", "memdir.vector_worker", str(state)],
            env=cli_env(str(state)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert late.returncode == 1
        assert f"no store to serve at {state}" in late.stderr
        assert "Traceback" not in late.stderr
        assert not (state / "worker").exists()
        assert state.exists() == (removed == "worker")


@pytest.mark.embeddings
@needs_model
def test_no_worker_when_worker_idle_is_0(store: Path, run: Callable[..., Any]) -> None:  # Q2 S
    store.joinpath("config.toml").write_text("[search]\nworker_idle = 0\n")
    result = run("search", "which animal naps on its feet", "--mode", "semantic", "--json")
    assert result.code == 0 and result.err == ""  # the model in the process, as before
    with Memory() as mem:
        assert result.json() == [
            h.to_dict() for h in mem.search("which animal naps on its feet", mode="semantic")
        ]
    assert worker_pid(str(store)) is None and workers_of(store) == []
