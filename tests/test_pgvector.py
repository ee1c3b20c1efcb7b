"""Q2 Q3 W1: semantic and hybrid search on PostgreSQL where the server has pgvector: the
server ranks the vectors (storage/postgres/pgvector.py), and the hits are those of the
Python ranking on the same data (memory.db's, the same facts, files and fake model).
Without the extension, or with a role that may not create it, the store ranks in Python
as before, and a store made so is brought into pgvector's form once the server has it.

The server is the PostgreSQL 16 that the pgserver wheel bundles with pgvector
(conftest.pgvector_server); Debian's PostgreSQL 15, which the rest of the suite runs on,
has no pgvector.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.curation import doctor
from memdir.models import CATEGORIES, Hit
from memdir.storage.hashing import text_hash
from memdir.storage.rows import FileState
from memdir.storage.rows_cold import FileChunks, NewChunk, NewVector, VectorFilter
from memdir.testing import FixedClock, HashEmbedder

pytest.importorskip("numpy")

WORDS = (
    "deploy release branch staging canary rollback invoice billing tax audit ledger "
    "kafka queue broker topic offset schema migration index vacuum replica failover "
    "garden tomato basil harvest compost river kayak paddle trail summit glacier "
    "violin concert rehearsal tempo chord recipe oven flour yeast sourdough"
).split()
QUESTIONS = [
    "how do we deploy a canary release",
    "billing invoice tax audit",
    "kafka broker offset replica failover",
    "sourdough flour yeast oven",
    "kayak on the river to the summit",
    "violin rehearsal tempo",
]
# the filters of a search, as the Python ranking applies them after it ranks
FILTERS: list[dict[str, Any]] = [
    {},
    {"kinds": ["fact"]},
    {"category": "decision"},
    {"kinds": ["global", "task"]},
    {"since": "2000-01-01"},
]


def _env(url: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MEMDIR_DATABASE_URL", "MEMDIR_DATABASE_SCOPE")
    }
    return {**env, "MEMDIR_DATABASE_URL": url} if url else env


def _open(root: Path, url: str | None) -> Memory:
    root.mkdir(parents=True, exist_ok=True)
    # one fixed time: a task note's text holds it, and the stores must hold the same text
    return Memory(str(root), env=_env(url), embedder=HashEmbedder(), clock=FixedClock())


def _fill(mem: Memory, seed: int = 7) -> None:
    """The same facts, entries and task notes, in the same order, whatever the store."""
    rng = random.Random(seed)
    for n in range(90):  # with the files, fewer than a search's window (4 x its depth)
        text = " ".join(rng.sample(WORDS, 6)) + f" note{n}"
        mem.add_fact(text, CATEGORIES[n % len(CATEGORIES)])
    for n in range(6):
        body = "\n\n".join(" ".join(rng.sample(WORDS, 8)) for _ in range(3))
        mem.write_entry(f"topic-{n}", f"topic {n}", f"## Topic {n}\n\n{body}\n")
    for n in range(3):
        mem.add_note(f"t-{n}", " ".join(rng.sample(WORDS, 7)))


def _shown(hits: list[Hit]) -> list[tuple[object, ...]]:
    return [(h.kind, h.id, h.path, h.lines, bool(h.lexical_only)) for h in hits]


def _same_hits(a: list[Hit], b: list[Hit]) -> None:
    assert _shown(a) == _shown(b)
    # the server and numpy add float32s in another order: a last digit may differ
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=2e-4)


def _searches(mem: Memory) -> list[list[Hit]]:
    return [
        mem.search(question, mode=mode, limit=8, min_score=-1.0, **filters)
        for question in QUESTIONS
        for mode in ("semantic", "hybrid")
        for filters in FILTERS
    ]


@pytest.fixture
def vec_db(pgvector_server: Any) -> Iterator[str]:
    """A fresh database of the server with pgvector."""
    name = pgvector_server.new_database()
    try:
        yield name
    finally:
        pgvector_server.drop_database(name)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Memory]:
    """The same data on memory.db: the Python ranking to compare with."""
    with _open(tmp_path / "local", None) as mem:
        _fill(mem)
        yield mem


def test_w1_q2_q3_pgvector_ranks_as_the_python_ranking_does(
    pgvector_server: Any, vec_db: str, local: Memory, tmp_path: Path
) -> None:  # W1 Q2 Q3
    with _open(tmp_path / "team", pgvector_server.url(vec_db)) as mem:
        _fill(mem)
        assert mem.store.ranks_vectors()
        assert mem.store.count_unembedded("hash-embedder") == 0
        got, want = _searches(mem), _searches(local)
        # the server ranked: the matrix of the Python ranking was never loaded
        assert mem._vectors.matrix is None
        report = doctor.run(mem)
    assert all(found for found in got[:10])
    for team_hits, local_hits in zip(got, want, strict=True):
        _same_hits(team_hits, local_hits)
    assert report.database["vector_ranking"].startswith("pgvector ")


def test_w1_q2_a_role_that_may_not_create_pgvector_ranks_in_python_until_it_is_there(
    pgvector_server: Any, vec_db: str, local: Memory, tmp_path: Path
) -> None:  # W1 Q2
    url = pgvector_server.tcp_url(vec_db)  # the database's owner, not a superuser
    with _open(tmp_path / "team", url) as mem:
        _fill(mem)
        assert not mem.store.ranks_vectors()
        for team_hits, local_hits in zip(_searches(mem), _searches(local), strict=True):
            _same_hits(team_hits, local_hits)
        assert mem._vectors.matrix is not None  # ranked here, in Python
        ranking = doctor.run(mem).database["vector_ranking"]
    assert ranking.startswith("in Python") and "may not create it" in ranking
    # an administrator creates the extension: the next connection that may write brings
    # the scope's stored vectors into its form, and the server ranks from then on
    pgvector_server.sql("CREATE EXTENSION vector", vec_db)
    with _open(tmp_path / "look", url) as mem:
        with mem.store._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT count(*), count(embedding) FROM vectors")
            total, filled = cur.fetchone()
        assert mem.store.ranks_vectors() and total == filled > 90
        for team_hits, local_hits in zip(_searches(mem), _searches(local), strict=True):
            _same_hits(team_hits, local_hits)
        assert mem._vectors.matrix is None


def test_w1_q2_rows_without_pgvectors_form_are_filled_by_the_next_writer(
    pgvector_server: Any, vec_db: str, tmp_path: Path
) -> None:  # W1 Q2
    url = pgvector_server.url(vec_db)
    with _open(tmp_path / "team", url) as mem:
        _fill(mem)
        found = mem.search(QUESTIONS[0], mode="semantic", min_score=-1.0)
        with mem.store._read() as cur:  # type: ignore[attr-defined]  # as a memdir before this one wrote them
            cur.execute("UPDATE vectors SET embedding = NULL WHERE owner = 'fact'")
    with _open(tmp_path / "doctor", url) as mem:
        report = doctor.run(mem)  # a look (read-only): it counts them, fills nothing
    assert "vectors are not in its form yet" in report.database["vector_ranking"]
    with _open(tmp_path / "again", url) as mem:  # a connection that may write fills them
        # (a chunk's date is its file's, rendered anew on this machine: not compared)
        _same_hits(mem.search(QUESTIONS[0], mode="semantic", min_score=-1.0), found)
        assert doctor.run(mem).database["vector_ranking"].endswith("(ranked by the server, exact)")


def test_w1_q2_migrate_brings_the_vectors_into_pgvectors_form(
    pgvector_server: Any, vec_db: str, local: Memory, tmp_path: Path
) -> None:  # W1 (migrate) Q2
    from memdir.curation.migrate import migrate

    url = pgvector_server.url(vec_db)
    migrate(local, url)  # the facts' vectors come along; chunks are embedded again
    with _open(tmp_path / "team", url) as mem:
        assert mem.store.ranks_vectors()
        mem.embed_pending()
        for team_hits, local_hits in zip(_searches(mem), _searches(local), strict=True):
            _same_hits(team_hits, local_hits)


def test_q2_the_server_ranks_each_model_in_its_own_size_within_the_filters(
    pgvector_server: Any, vec_db: str, tmp_path: Path
) -> None:  # Q2 W1
    import numpy as np

    with _open(tmp_path / "team", pgvector_server.url(vec_db)) as mem:
        store = mem.store
        ids = [store.add_fact(CATEGORIES[n % 2], f"fact {n}", "2026-03-01T00:00:00Z", _by()).id
               for n in range(4)]  # fmt: skip
        state = FileState("global", 1, 1, "h")
        store.replace_chunks(
            [FileChunks("global/x.md", state, [NewChunk(1, 2, None, "a chunk", text_hash("c"))])],
            [],
        )
        (chunk_id,) = [
            c.chunk.id for c in store.search_chunks(_word("chunk"), ("global",), None, 5)
        ]

        def blob(*xs: float) -> bytes:
            v = np.asarray(xs, np.float32)
            return (v / np.linalg.norm(v)).astype("<f4").tobytes()

        store.put_vectors(
            "small",
            [
                NewVector("fact", ids[0], "h0", blob(1, 0, 0, 0)),
                NewVector("fact", ids[1], "h1", blob(1, 1, 0, 0)),
                NewVector("fact", ids[2], "h2", blob(1, 1, 1, 1, 1, 1, 1, 1)),  # another size
                NewVector("fact", ids[3], "h3", np.full(4, np.nan, "<f4").tobytes()),
                NewVector("chunk", chunk_id, text_hash("c"), blob(1, 0, 1, 0)),
            ],
        )
        store.put_vectors("large", [NewVector("fact", ids[2], "h2", blob(*[1] * 8))])
        question = blob(1, 0, 0, 0)
        ranked = store.rank_vectors("small", question, 10)
        assert ranked is not None
        assert [(r.owner, r.owner_id) for r in ranked] == [
            ("fact", ids[0]),
            ("chunk", chunk_id),
            ("fact", ids[1]),
        ]
        assert [r.score for r in ranked] == pytest.approx([1.0, 0.5**0.5, 0.5**0.5])
        # every blob is kept as it came, the NaN one too: only the server's form skips it
        assert len(list(store.iter_vectors("small"))) == 5
        only_facts = VectorFilter(("fact",), None, None)
        assert [r.owner for r in store.rank_vectors("small", question, 10, only_facts) or []] == [
            "fact",
            "fact",
        ]
        odd = VectorFilter(("fact", "global"), CATEGORIES[1], None)  # a category: facts only
        assert [r.owner_id for r in store.rank_vectors("small", question, 10, odd) or []] == [
            ids[1]
        ]
        assert store.rank_vectors("large", blob(*[1] * 8), 10) == [
            (("fact", ids[2], pytest.approx(1.0)))
        ]
        assert store.score_vectors("small", question, [("fact", ids[1]), ("fact", ids[2])]) == {
            ("fact", ids[1]): pytest.approx(0.5**0.5)
        }
        # a file chunked again keeps an unchanged chunk's vector, in the server's form too
        store.replace_chunks(
            [
                FileChunks(
                    "global/x.md",
                    state._replace(mtime_ns=2),
                    [
                        NewChunk(1, 2, None, "a chunk", text_hash("c")),
                        NewChunk(4, 5, None, "b", "b"),
                    ],
                )
            ],
            [],
        )
        kept = store.rank_vectors("small", question, 10)
        assert kept is not None and [r.owner for r in kept] == ["fact", "chunk", "fact"]


def _by() -> Any:
    from memdir.models import Provenance

    return Provenance("s-1", "cli", "agent-a")


def _word(text: str) -> Any:
    from memdir.storage.rows import Word

    return Word(text)


def test_w1_q2_without_pgvector_on_the_server_the_store_ranks_in_python(
    pg_server: Any, pg_url: str, tmp_path: Path
) -> None:  # W1 Q2
    import psycopg

    with psycopg.connect(pg_url) as db:
        if db.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
            pytest.skip("this lane's server has pgvector (the others run this)")
    with _open(tmp_path / "team", pg_url) as mem:
        mem.add_fact("they were there when it was zanzibar", "learning")
        assert not mem.store.ranks_vectors()
        hits = mem.search("zanzibar they were there", mode="semantic", min_score=-1.0)
        assert [h.content for h in hits] == ["they were there when it was zanzibar"]
        ranking = doctor.run(mem).database["vector_ranking"]
    assert ranking == "in Python (numpy): the server has no pgvector (the vector extension)"


OPENER = """
import os, sys, time
from memdir import Memory
from memdir.testing import HashEmbedder

state, url, go, me = sys.argv[1:5]
while not os.path.exists(go):
    time.sleep(0.001)
with Memory(state, env={**os.environ, "MEMDIR_DATABASE_URL": url}, embedder=HashEmbedder()) as mem:
    mem.add_fact(f"writer {me} was here first", "learning")
    print(mem.store.ranks_vectors(), flush=True)
"""


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_w1_q2_processes_opening_a_new_store_at_once_create_pgvectors_form_once(
    pgvector_server: Any, vec_db: str, tmp_path: Path
) -> None:  # W1 Q2 L3
    """Four processes open one new scope on a server whose database has no extension yet,
    all at once: each creates what is missing under its lock, none fails, every vector is
    in pgvector's form."""
    import subprocess
    import sys

    url = pgvector_server.url(vec_db)
    go = tmp_path / "go"
    env = _env(None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(tmp_path / "state"), url, str(go), str(k)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for k in range(4)
    ]  # fmt: skip
    go.touch()
    answers = [proc.communicate(timeout=120) for proc in procs]
    assert [
        (proc.returncode, out.strip()) for proc, (out, _) in zip(procs, answers, strict=True)
    ] == [(0, "True")] * 4, [err for _, err in answers]
    with _open(tmp_path / "look", url) as mem:
        with mem.store._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT count(*), count(embedding) FROM vectors")
            assert cur.fetchone() == (4, 4)
            cur.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
            assert cur.fetchone() == (1,)


def test_w1_q2_doctor_prints_how_semantic_search_ranks(
    pgvector_server: Any, vec_db: str, tmp_path: Path, run: Any
) -> None:  # W1 Q2 C
    url = pgvector_server.url(vec_db)
    res = run("fact", "add", "they were there when it was zanzibar", "--category", "learning",
              env={"MEMDIR_DATABASE_URL": url})  # fmt: skip
    assert res.code == 0, res.err
    res = run("doctor", env={"MEMDIR_DATABASE_URL": url})
    assert "\nsemantic ranking: pgvector 0.6.2 (ranked by the server, exact)\n" in res.out, res.out
