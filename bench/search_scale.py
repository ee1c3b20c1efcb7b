"""Search at scale: N facts plus ~10k markdown chunks, lexical, semantic and hybrid.

The store: make_facts(N) added as common.build_store does, plus markdown written through
memdir's own API from the same vocabulary — global entries of a few `## ` sections each,
daily logs of timed entries, task notes and a few procedures (per 10k chunks: 1,000
entries, 125 days x 20 entries, 3,000 notes over 30 tasks, 20 procedures) — then
`Memory.reindex()` chunks and embeds everything (all N facts too, so no search embeds
anything). Built once into the cache dir: embedding 100k facts takes many minutes.

Measured, each against a baseline run alternately with it in the same run:
- indexing: `Memory.reindex()` of a fresh store holding --index-chunks chunks of the same
  corpus (no facts), split into chunking alone and embedding; chunks/s with embeddings is
  the target (≥ 80). The cached store's own (full-size) reindex figures are shown too.
- in-process, one warm Memory: lexical search vs the raw FTS5 queries it runs (facts and
  chunks, the MATCH expression memdir builds, each list read as deep as search reads it),
  the same search with its index sync left out, and the sync alone (a stat of every file);
  hybrid and semantic search, with their parts: embedding the query, the per-search check
  for unembedded items, the vector cache's generation query, the matrix product alone and
  with the top-k selection.
- whole process: `memdir search --mode hybrid` and `--mode lexical` against bare processes
  that do part of the same work (the raw FTS5 queries; loading the model and embedding the
  query; loading every vector into numpy) and `python -c pass`.

Targets (the issue): lexical p95 ≤ 1.2× raw; hybrid p95 ≤ 60 ms warm; a fresh
`memdir search --mode hybrid` process ≤ 1.5 s (p50); indexing ≥ 80 chunks/s with
embeddings. --profile auto (default) prints cProfile of whatever misses its target.

    python bench/search_scale.py [--facts 100000] [--chunks 10000] [--index-chunks 1000]
                                 [--runs 100] [--hybrid-runs 50] [--cli-runs 10]
                                 [--profile auto|always|never]
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import common
from search_inprocess import raw_connection

NAME = "search_scale"
LIMIT = 10
DEPTH = max(3 * LIMIT, 30)  # how deep memdir's search reads each ranked list for a top 10
WARMUP = 3
TARGET_LEXICAL_RATIO = 1.2
TARGET_HYBRID_P95_MS = 60.0
TARGET_CLI_HYBRID_MS = 1500.0
TARGET_CHUNKS_PER_S = 80.0

# Questions as an agent would ask them (memdir ORs their words without stopwords), and two
# in FTS5 syntax (hybrid runs those as lexical: F4).
QUERIES = (
    ("nl-timeout", "how should we handle a socket timeout on the server?"),
    ("nl-cache", "what did we decide about the cache size?"),
    ("nl-unicode", "why do unicode encoding errors happen when reading files?"),
    ("nl-connection", "which database connection settings does the user prefer?"),
    ("nl-path", "where is the default path for temporary files?"),
    ("fts-and", "socket AND timeout"),
    ("fts-or-prefix", '"encoding errors" OR codec*'),
)

# The markdown of 10k chunks; --chunks scales every count but the entries per day.
PER_10K = {"entries": 1000, "days": 125, "notes": 3000, "tasks": 30, "procedures": 20}
PER_DAY = 20
SECTIONS = (3, 6)  # `## ` sections per global entry and procedure
STEPS = ("triage/analyze", "triage/reproduce", "fix/implement", "fix/test", "review/read")


# -- the corpus ------------------------------------------------------------------------


def plan(chunks: int) -> dict[str, int]:
    scale = chunks / 10_000
    return {key: max(1, round(value * scale)) for key, value in PER_10K.items()}


class StepClock:
    """A clock for Memory that the writer sets: one second later on every reading."""

    def __init__(self) -> None:
        self.now = float(common.ENTRY_EPOCH)

    def __call__(self) -> float:
        self.now += 1
        return self.now


def write_markdown(memory: Any, counts: dict[str, int], seed: int) -> None:
    """Global entries, daily logs, task notes and procedures through memdir's API, their
    text drawn from make_facts (other seeds than the facts')."""
    rng = random.Random(seed + 21)
    words = [w for w in common.vocabulary()[40:2500] if w.isalpha()]
    needed = (
        (counts["entries"] + counts["procedures"]) * SECTIONS[1] * 3
        + counts["days"] * PER_DAY * 2
        + counts["notes"]
    )
    sentences = iter([text for text, _ in common.make_facts(needed, seed + 22)])
    clock = memory.clock

    def title() -> str:
        return " ".join(rng.sample(words, rng.randint(2, 4))).capitalize()

    def sections() -> str:
        parts = []
        for _ in range(rng.randint(*SECTIONS)):
            lines = [next(sentences) for _ in range(rng.randint(1, 3))]
            body = "\n".join(f"- {x}" for x in lines) if rng.random() < 0.3 else "\n\n".join(lines)
            parts.append(f"## {title()}\n\n{body}")
        return "\n\n".join(parts) + "\n"

    for name, description, _ in common.make_entries(counts["entries"], seed + 23):
        memory.write_entry(name, description, sections())
    for i in range(counts["procedures"]):
        name = f"{'-'.join(rng.sample(words, 2))}-{i:03d}".lower()
        memory.write_procedure(name, f"# {title()}\n\n{sections()}")
    for day in range(counts["days"]):
        for k in range(PER_DAY):  # 08:00, 08:30, ...: each entry is its own `## HH:MM`
            clock.now = common.ENTRY_EPOCH + day * 86_400 + 8 * 3600 + k * 1800
            text = " ".join(next(sentences) for _ in range(rng.randint(1, 2)))
            memory.daily_append(text)
    tasks = [f"task-{i:03d}" for i in range(counts["tasks"])]
    for task in tasks:
        memory.start_task(task)
    clock.now = common.ENTRY_EPOCH
    for _ in range(counts["notes"]):
        workflow, step = rng.choice(STEPS).split("/")
        memory.add_note(rng.choice(tasks), next(sentences), workflow=workflow, step=step)


# -- indexing ----------------------------------------------------------------------------


class TimedEmbedder:
    """An embedder that times its inner one: (start, seconds, chunks, facts) per call;
    a text is a fact's when it is in `facts`, else a chunk's."""

    def __init__(self, inner: Any, facts: set[str]) -> None:
        self.inner, self.facts = inner, facts
        self.name, self.dim = inner.name, inner.dim
        self.calls: list[tuple[float, float, int, int]] = []

    def embed(self, texts: list[str]) -> Any:
        started = time.perf_counter()
        result = self.inner.embed(texts)
        took = time.perf_counter() - started
        fact_count = sum(1 for text in texts if text in self.facts)
        self.calls.append((started, took, len(texts) - fact_count, fact_count))
        return result


def timed_reindex(state: str, facts: set[str]) -> dict[str, Any]:
    """Memory.reindex() of the store, split into chunking (until the first embed call: it
    includes rebuilding MEMORY.md and the first query for unembedded items) and embedding
    (the model's calls and the queries and writes between them). The model is loaded first,
    outside the timing."""
    from memdir.storage import embeddings

    inner = embeddings.default_embedder()
    inner.embed(["warm up the model"])
    timed = TimedEmbedder(inner, facts)
    with common.open_memory(state, embedder=timed) as memory:
        started = time.perf_counter()
        done = memory.reindex()
        took = time.perf_counter() - started
    db = sqlite3.connect(common.db_path(state))
    try:
        kinds = dict(db.execute("SELECT kind, count(*) FROM chunks GROUP BY kind").fetchall())
        vectors = dict(db.execute("SELECT owner, count(*) FROM vectors GROUP BY owner"))
    finally:
        db.close()
    calls = timed.calls
    chunk_s = (calls[0][0] - started) if calls else took
    embed_s = took - chunk_s
    model_s = sum(c[1] for c in calls)
    chunk_model_s = sum(c[1] * c[2] / (c[2] + c[3]) for c in calls if c[2] + c[3])
    chunks_embedded = sum(c[2] for c in calls)
    facts_embedded = sum(c[3] for c in calls)
    items = chunks_embedded + facts_embedded
    # the queries and writes between model calls, shared out by items
    chunk_embed_s = chunk_model_s + (embed_s - model_s) * common.ratio(chunks_embedded, items)
    chunks = sum(kinds.values())
    return {
        "files": done.files,
        "chunks": chunks,
        "chunks_by_kind": kinds,
        "embedded": done.embedded,
        "chunks_embedded": chunks_embedded,
        "facts_embedded": facts_embedded,
        "vectors": vectors,
        "seconds": took,
        "chunk_s": chunk_s,
        "embed_s": embed_s,
        "model_s": model_s,
        "chunk_embed_s": chunk_embed_s,
        "fact_embed_s": embed_s - chunk_embed_s,
        "chunking_per_s": common.ratio(chunks, chunk_s),
        "embed_items_per_s": common.ratio(items, embed_s),
        "embed_chunks_per_s": common.ratio(chunks_embedded, chunk_embed_s),
        "embed_facts_per_s": common.ratio(facts_embedded, embed_s - chunk_embed_s),
        "model_share": common.ratio(model_s, embed_s),
        "chunks_per_s_with_embeddings": common.ratio(chunks, chunk_s + chunk_embed_s),
        "loadavg": list(os.getloadavg()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def store_key(facts: int, chunks: int, seed: int) -> str:
    from memdir.storage.embeddings import DEFAULT_MODEL

    return f"search-{facts}-chunks-{chunks}-seed{seed}-{common.code_key()}-{DEFAULT_MODEL}"


def build_search_store(
    facts: int, chunks: int, seed: int, cache_dir: str, log: Callable[[str], None]
) -> tuple[str, dict[str, Any]]:
    """(state dir, how it was built): a copy of common.build_store(facts), the markdown of
    plan(chunks) written into it, then Memory.reindex() of everything. Built once."""
    state = os.path.join(os.path.abspath(cache_dir), store_key(facts, chunks, seed))
    done = os.path.join(state, "complete")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as handle:
            return state, {**json.load(handle), "cached": True}
    base = common.build_store(facts, seed, cache_dir, log)
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(base, building)
    os.remove(os.path.join(building, "complete"))
    counts = plan(chunks)
    log(f"writing the markdown of ~{chunks:,} chunks {counts} ...")
    started = time.perf_counter()
    # in bulk, as an import writes: the reindex below embeds everything in one pass
    with common.open_memory(building, clock=StepClock()) as memory, memory.bulk():
        write_markdown(memory, counts, seed)
    write_s = time.perf_counter() - started
    log(f"... in {write_s:.1f} s; reindexing (chunks, then embedding {facts:,} facts too)")
    info = timed_reindex(building, {text for text, _ in common.make_facts(facts, seed)})
    info.update(facts=facts, plan=counts, write_s=write_s)
    common.finish_build(building, state, info)
    log(f"built {state} in {write_s + info['seconds']:.0f} s")
    return state, {**info, "cached": False}


def fresh_indexing(chunks: int, seed: int, cache_dir: str) -> dict[str, Any]:
    """timed_reindex of a new store holding only the markdown of plan(chunks)."""
    scratch = os.path.join(os.path.abspath(cache_dir), f"scratch-{NAME}-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        os.makedirs(scratch)
        counts = plan(chunks)
        with common.open_memory(scratch, clock=StepClock()) as memory:
            write_markdown(memory, counts, seed + 100)
        return {**timed_reindex(scratch, set()), "plan": counts}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- in-process --------------------------------------------------------------------------


def raw_sql() -> tuple[str, str]:
    """The statements memdir's lexical search runs: facts (SQLiteStore.search_facts with no
    filter) and chunks of every kind (search_chunks)."""
    from memdir.search.index import CHUNK_KINDS
    from memdir.storage.sqlite.index import CHUNK_COLUMNS

    columns = ", ".join("c." + c for c in CHUNK_COLUMNS.split(", "))
    kinds = ", ".join("?" * len(CHUNK_KINDS))
    chunk_sql = (
        f"SELECT {columns}, bm25(chunks_fts) FROM chunks_fts JOIN chunks c "
        f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH ? AND c.kind IN ({kinds}) "
        "ORDER BY bm25(chunks_fts) LIMIT ?"
    )
    return common.search_sql(), chunk_sql


def search_match(text: str) -> str:
    from memdir import query
    from memdir.storage.sqlite.index import to_fts5

    node = query.parse_search(text)
    assert node is not None
    return to_fts5(node)


def match_counts(state: str, match: str) -> list[int]:
    """How many facts and chunks the MATCH expression selects: the rows bm25 must rank."""
    db = sqlite3.connect(common.db_path(state))
    try:
        return [
            int(db.execute(f"SELECT count(*) FROM {t} WHERE {t} MATCH ?", (match,)).fetchone()[0])
            for t in ("facts_fts", "chunks_fts")
        ]
    finally:
        db.close()


@contextlib.contextmanager
def no_sync(memory: Any) -> Iterator[None]:
    """The memory's searches without their index sync (the files are unchanged anyway)."""
    memory.sync_index = lambda kinds=None: None
    try:
        yield
    finally:
        del memory.sync_index


def check_lexical(hits: list[Any], facts: list[Any], chunks: list[Any], text: str) -> None:
    """Every fact and chunk memdir returned is one the raw queries found."""
    fact_ids = {row[0] for row in facts}
    chunk_keys = {(row[1], row[3], row[4]) for row in chunks}
    for hit in hits:
        if hit.kind == "fact" and hit.id not in fact_ids:
            raise SystemExit(f"{NAME}: {text!r}: fact #{hit.id} is not in the raw FTS5 top")
        if hit.kind not in ("fact", "procedure") and (hit.path, *hit.lines) not in chunk_keys:
            raise SystemExit(f"{NAME}: {text!r}: {hit.path}:{hit.lines} not in the raw top")


def measure(calls: dict[str, Callable[[], Any]], runs: int) -> dict[str, dict[str, float]]:
    """stats_ms of every side, the sides taking turns going first."""
    times = common.time_sides(calls, runs, WARMUP)
    return {side: common.stats_ms(values) for side, values in times.items()}


def lexical_rows(memory: Any, state: str, runs: int) -> list[dict[str, Any]]:
    from memdir.search.index import CHUNK_KINDS

    fact_sql, chunk_sql = raw_sql()
    raw = raw_connection(state, memory.settings.busy_timeout_ms)
    rows = []
    try:
        for name, text in QUERIES:
            match = search_match(text)

            def ours(text: str = text) -> Any:
                return memory.search(text, limit=LIMIT, mode="lexical")

            def unsynced(text: str = text) -> Any:
                with no_sync(memory):
                    return memory.search(text, limit=LIMIT, mode="lexical")

            def theirs(match: str = match) -> tuple[list[Any], list[Any]]:
                return (
                    raw.execute(fact_sql, (match, DEPTH)).fetchall(),
                    raw.execute(chunk_sql, (match, *CHUNK_KINDS, DEPTH)).fetchall(),
                )

            check_lexical(ours(), *theirs(), text)
            got = measure(
                {"memdir": ours, "no_sync": unsynced, "raw": theirs, "sync": memory.sync_index},
                runs,
            )
            facts, chunks = match_counts(state, match)
            mine, base, bare = got["memdir"], got["raw"], got["no_sync"]
            rows.append(
                {
                    "table": "lexical",
                    "query": name,
                    "text": text,
                    "match": match,
                    "fact_matches": facts,
                    "chunk_matches": chunks,
                    "memdir_p50_ms": mine["p50"],
                    "memdir_p95_ms": mine["p95"],
                    "raw_p50_ms": base["p50"],
                    "raw_p95_ms": base["p95"],
                    "ratio_p50": common.ratio(mine["p50"], base["p50"]),
                    "ratio_p95": common.ratio(mine["p95"], base["p95"]),
                    "no_sync_p50_ms": bare["p50"],
                    "no_sync_p95_ms": bare["p95"],
                    "no_sync_ratio_p95": common.ratio(bare["p95"], base["p95"]),
                    "sync_p50_ms": got["sync"]["p50"],
                    "sync_p95_ms": got["sync"]["p95"],
                }
            )
            rows[-1]["ok"] = rows[-1]["ratio_p95"] <= TARGET_LEXICAL_RATIO
    finally:
        raw.close()
    return rows


def hybrid_rows(memory: Any, runs: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import numpy as np

    from memdir import search

    embedder = memory.embedder()
    started = time.perf_counter()
    keys, matrix, _ = search.VectorCache().load(memory.store, embedder)
    load_s = time.perf_counter() - started
    rows = []
    for name, text in QUERIES:
        vector = embedder.embed([text])[0]

        def top_k(vector: Any = vector, wanted: int = min(len(keys), DEPTH * 4)) -> Any:
            scores = matrix @ vector
            top = np.argpartition(-scores, wanted - 1)[:wanted]
            return top[np.argsort(-scores[top])]

        calls: dict[str, Callable[[], Any]] = {
            "hybrid": lambda text=text: memory.search(text, limit=LIMIT, mode="hybrid"),
            "semantic": lambda text=text: memory.search(text, limit=LIMIT, mode="semantic"),
            "embed": lambda text=text: embedder.embed([text]),
            "pending": lambda: memory.store.count_unembedded(embedder.name),
            "generation": lambda: memory.store.vector_generation(embedder.name),
            "matmul": lambda vector=vector: matrix @ vector,
            "top_k": top_k,
        }
        for call in calls.values():
            call()  # warm: the model and the vector cache are loaded once per process
        got = measure(calls, runs)
        row: dict[str, Any] = {"table": "hybrid", "query": name, "text": text}
        for side, figures in got.items():
            row[f"{side}_p50_ms"], row[f"{side}_p95_ms"] = figures["p50"], figures["p95"]
        row["ok"] = row["hybrid_p95_ms"] <= TARGET_HYBRID_P95_MS
        rows.append(row)
    return rows, {
        "vectors": len(keys),
        "vector_load_ms": load_s * 1000,
        "matrix_mb": matrix.nbytes / 1e6,
    }


# -- whole process -----------------------------------------------------------------------

BARE_LEXICAL = """\
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
queries = (({facts!r}, (sys.argv[2], {depth})),
           ({chunks!r}, (sys.argv[2], *{kinds!r}, {depth})))
for sql, args in queries:
    for row in db.execute(sql, args).fetchall()[:10]:
        print(row[0], row[1], str(row[-2])[:80])
"""
BARE_MODEL = """\
import sys
from memdir.storage.embeddings import default_embedder
print(default_embedder().embed([sys.argv[1]])[0][:3])
"""
BARE_VECTORS = """\
import sqlite3, sys
import numpy as np
db = sqlite3.connect(sys.argv[1])
blobs = [b for (b,) in db.execute("SELECT vec FROM vectors WHERE model = ?", (sys.argv[2],))]
matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1)
print(matrix.shape, (matrix @ matrix[0]).argmax())
"""


def cli_rows(state: str, args: Any) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    from memdir.search.index import CHUNK_KINDS
    from memdir.storage.embeddings import DEFAULT_MODEL

    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")
    env = common.child_env(state, args.cache_dir)
    db = common.db_path(state)
    fact_sql, chunk_sql = raw_sql()
    bare = BARE_LEXICAL.format(facts=fact_sql, chunks=chunk_sql, kinds=CHUNK_KINDS, depth=DEPTH)
    texts = [text for name, text in QUERIES if name.startswith("nl-")]

    def sides(text: str) -> dict[str, list[str]]:
        return {
            "memdir search --mode hybrid": [memdir, "search", "--mode", "hybrid", text],
            "memdir search --mode lexical": [memdir, "search", "--mode", "lexical", text],
            "bare: the raw FTS5 queries": [python, "-c", bare, db, search_match(text)],
            "bare: load MiniLM, embed the query": [python, "-c", BARE_MODEL, text],
            "bare: load every vector into numpy": [python, "-c", BARE_VECTORS, db, DEFAULT_MODEL],
            "python -c pass": [python, "-c", "pass"],
        }

    times: dict[str, list[float]] = {}
    for run_no in range(1 + args.cli_runs):  # one warm-up round: page cache, bytecode
        argvs = sides(texts[run_no % len(texts)])
        for side in common.rotate(run_no, list(argvs)):
            took = run(argvs[side], env)
            if run_no >= 1:
                times.setdefault(side, []).append(took)
    rows = []
    for side, values in times.items():
        figures = common.stats_ms(values)
        row = {
            "table": "cli",
            "side": side,
            "calls": figures["n"],
            "p50_ms": figures["p50"],
            "p95_ms": figures["p95"],
            "min_ms": figures["min"],
        }
        if side == "memdir search --mode hybrid":
            row["ok"] = figures["p50"] <= TARGET_CLI_HYBRID_MS
        rows.append(row)
    return rows, sides(texts[0])


def run(argv: list[str], env: dict[str, str]) -> float:
    import subprocess

    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{NAME}: {argv[:3]} exited {proc.returncode}: {proc.stderr.strip()}")
    return took


# -- profiles ----------------------------------------------------------------------------


def report(title: str, stats: pstats.Stats, count: int = 25) -> str:
    out = []
    for sort in ("cumulative", "tottime"):
        stream = io.StringIO()
        stats.stream = stream  # type: ignore[attr-defined]
        stats.strip_dirs().sort_stats(sort).print_stats(count)
        body = stream.getvalue().strip()
        out.append(f"\n### profile: {title}, by {sort}\n\n```\n{body}\n```\n")
    return "".join(out)


def profile_inprocess(memory: Any, mode: str, calls: int) -> str:
    profiler = cProfile.Profile()
    texts = [text for _, text in QUERIES]
    profiler.enable()
    for i in range(calls):
        memory.search(texts[i % len(texts)], limit=LIMIT, mode=mode)
    profiler.disable()
    return report(f"{calls} warm `Memory.search(mode={mode!r})` calls", pstats.Stats(profiler))


def profile_cli(argv: list[str], env: dict[str, str], scratch: str) -> str:
    out = os.path.join(scratch, "cli.prof")
    python = common.venv_bin("python")
    run([python, "-m", "cProfile", "-o", out, *argv], env)
    return report("one `" + " ".join(argv[1:4]) + " …` process", pstats.Stats(out))


def profile_indexing(chunks: int, seed: int, cache_dir: str) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fresh_indexing(chunks, seed, cache_dir)
    profiler.disable()
    return report(f"writing and reindexing ~{chunks} chunks", pstats.Stats(profiler))


# -- main --------------------------------------------------------------------------------


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts",
        type=common.sizes,
        default=[100_000],
        help="facts in the store, all embedded (default 100k)",
    )
    parser.add_argument(
        "--chunks",
        type=common.sizes,
        default=[10_000],
        help="about how many markdown chunks the store holds (default 10k)",
    )
    parser.add_argument(
        "--index-chunks",
        type=common.sizes,
        default=[1_000],
        help="chunks of the fresh store whose reindex is timed (default 1k)",
    )
    parser.add_argument(
        "--runs", type=int, default=100, help="timed lexical calls per query and side"
    )
    parser.add_argument(
        "--hybrid-runs", type=int, default=50, help="timed hybrid/semantic calls per query and side"
    )
    parser.add_argument("--cli-runs", type=int, default=10, help="timed processes per side")
    parser.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="cProfile what misses its target (auto), everything, or nothing",
    )
    args = parser.parse_args(argv)
    n, chunks, index_chunks = args.facts[0], args.chunks[0], args.index_chunks[0]
    from memdir.storage import embeddings

    if not embeddings.available():
        raise SystemExit(f"{NAME}: needs the embeddings extra: {embeddings.INSTALL}")
    load_start = load()
    log = common._stderr
    state, build = build_search_store(n, chunks, args.seed, args.cache_dir, log)
    log(f"load {load()}: timing the reindex of a fresh {index_chunks:,}-chunk store")
    fresh = fresh_indexing(index_chunks, args.seed, args.cache_dir)
    index_rows = [
        {
            "table": "index",
            "what": f"fresh store, {index_chunks:,} chunks (judged)",
            **fresh,
            "ok": fresh["chunks_per_s_with_embeddings"] >= TARGET_CHUNKS_PER_S,
        },
        {
            "table": "index",
            "what": "the cached store: chunks + all facts"
            + (" (cached)" if build["cached"] else ""),
            **build,
        },
    ]

    log(f"load {load()}: in-process searches")
    started = time.perf_counter()
    embeddings.MiniLM().embed(["load the model"])  # a second instance: the first is loaded
    model_load_ms = (time.perf_counter() - started) * 1000
    with common.open_memory(state) as memory:
        for _, text in QUERIES:
            for mode in ("lexical", "semantic", "hybrid"):
                memory.search(text, limit=LIMIT, mode=mode)  # warm: model, vectors, pages
        lexical = lexical_rows(memory, state, args.runs)
        hybrid, vectors = hybrid_rows(memory, args.hybrid_runs)
        log(f"load {load()}: whole processes")
        cli, profile_argvs = cli_rows(state, args)

        worst_lex = max(lexical, key=lambda r: r["ratio_p95"])
        worst_hybrid = max(hybrid, key=lambda r: r["hybrid_p95_ms"])
        cli_by = {r["side"]: r for r in cli}
        ok = {
            "index": index_rows[0]["ok"],
            "lexical": all(r["ok"] for r in lexical),
            "hybrid": all(r["ok"] for r in hybrid),
            "cli_hybrid": cli_by["memdir search --mode hybrid"]["ok"],
        }
        profiles = ""
        if args.profile != "never":
            every = args.profile == "always"
            if every or not ok["lexical"]:
                profiles += profile_inprocess(memory, "lexical", 5 * len(QUERIES))
            if every or not ok["hybrid"]:
                profiles += profile_inprocess(memory, "hybrid", 5 * len(QUERIES))
            if every or not ok["cli_hybrid"]:
                scratch = os.path.join(os.path.abspath(args.cache_dir), f"scratch-{os.getpid()}")
                os.makedirs(scratch, exist_ok=True)
                try:
                    profiles += profile_cli(
                        profile_argvs["memdir search --mode hybrid"],
                        common.child_env(state, args.cache_dir),
                        scratch,
                    )
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
    if args.profile != "never" and (args.profile == "always" or not ok["index"]):
        profiles += profile_indexing(min(index_chunks, 300), args.seed, args.cache_dir)
    load_end = load()

    summary = {
        "facts": n,
        "chunks": build["chunks"],
        "embedded_facts": build["facts_embedded"],
        "targets": {
            "lexical_ratio_p95": TARGET_LEXICAL_RATIO,
            "hybrid_p95_ms": TARGET_HYBRID_P95_MS,
            "cli_hybrid_p50_ms": TARGET_CLI_HYBRID_MS,
            "chunks_per_s": TARGET_CHUNKS_PER_S,
        },
        "index_chunks_per_s": fresh["chunks_per_s_with_embeddings"],
        "index_chunking_per_s": fresh["chunking_per_s"],
        "index_embed_items_per_s": fresh["embed_items_per_s"],
        "build_chunks_per_s": build["chunks_per_s_with_embeddings"],
        "build_embed_facts_per_s": build["embed_facts_per_s"],
        "lexical_worst_ratio_p95": worst_lex["ratio_p95"],
        "lexical_worst_query": worst_lex["query"],
        "lexical_median_ratio_p95": common.median([r["ratio_p95"] for r in lexical]),
        "lexical_no_sync_worst_ratio_p95": max(r["no_sync_ratio_p95"] for r in lexical),
        "sync_p50_ms": common.median([r["sync_p50_ms"] for r in lexical]),
        "hybrid_worst_p95_ms": worst_hybrid["hybrid_p95_ms"],
        "hybrid_worst_query": worst_hybrid["query"],
        "semantic_worst_p95_ms": max(r["semantic_p95_ms"] for r in hybrid),
        "matmul_p50_ms": common.median([r["matmul_p50_ms"] for r in hybrid]),
        "model_load_ms": model_load_ms,
        **vectors,
        "cli_hybrid_p50_ms": cli_by["memdir search --mode hybrid"]["p50_ms"],
        "cli_lexical_p50_ms": cli_by["memdir search --mode lexical"]["p50_ms"],
        "met": ok,
        "ok": all(ok.values()),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
    }
    print_tables(args, summary, index_rows, lexical, hybrid, cli)
    if profiles:
        print(profiles, flush=True)
    params = {
        "facts": n,
        "chunks": chunks,
        "index_chunks": index_chunks,
        "runs": args.runs,
        "hybrid_runs": args.hybrid_runs,
        "cli_runs": args.cli_runs,
        "limit": LIMIT,
        "depth": DEPTH,
        "warmup": WARMUP,
        "seed": args.seed,
        "queries": dict(QUERIES),
    }
    common.write_result(NAME, args.out_dir, params, [*index_rows, *lexical, *hybrid, *cli], summary)
    return 0


def print_tables(
    args: Any,
    summary: dict[str, Any],
    index_rows: list[dict[str, Any]],
    lexical: list[dict[str, Any]],
    hybrid: list[dict[str, Any]],
    cli: list[dict[str, Any]],
) -> None:
    size = (
        f"{summary['facts']:,} facts ({summary['embedded_facts']:,} embedded by the "
        f"build) + {summary['chunks']:,} chunks"
    )
    loads = f"load {summary['loadavg_start']} → {summary['loadavg_end']}"
    common.print_table(
        f"indexing: Memory.reindex(), chunking alone vs embedding "
        f"(target ≥ {TARGET_CHUNKS_PER_S:g} chunks/s with embeddings; {loads})",
        [
            ("what", "store", ""),
            ("files", "files", ",d"),
            ("chunks", "chunks", ",d"),
            ("chunk_s", "chunking s", ".1f"),
            ("chunking_per_s", "chunks/s chunking", ",.0f"),
            ("chunks_embedded", "chunks emb.", ",d"),
            ("facts_embedded", "facts emb.", ",d"),
            ("embed_s", "embedding s", ",.1f"),
            ("embed_chunks_per_s", "chunks/s emb.", ",.1f"),
            ("embed_facts_per_s", "facts/s emb.", ",.1f"),
            ("model_share", "model share", ".2f"),
            ("chunks_per_s_with_embeddings", "chunks/s with emb.", ",.1f"),
            ("ok", "≥ target", ""),
        ],
        index_rows,
    )
    build = index_rows[1]
    print(
        f"the cached store's reindex ran at {build['time']} under load "
        f"{' '.join(f'{x:.2f}' for x in build['loadavg'])}",
        flush=True,
    )
    common.print_table(
        f"lexical Memory.search vs the raw FTS5 queries it runs (facts + chunks, top "
        f"{DEPTH} each), warm, {args.runs} calls each, {size} (target p95 ≤ "
        f"{TARGET_LEXICAL_RATIO}×; {loads})",
        [
            ("query", "query", ""),
            ("fact_matches", "fact rows", ",d"),
            ("chunk_matches", "chunk rows", ",d"),
            ("memdir_p50_ms", "memdir p50", ".2f"),
            ("memdir_p95_ms", "memdir p95", ".2f"),
            ("raw_p50_ms", "raw p50", ".2f"),
            ("raw_p95_ms", "raw p95", ".2f"),
            ("ratio_p95", "ratio p95", ".2f"),
            ("no_sync_p95_ms", "no-sync p95", ".2f"),
            ("no_sync_ratio_p95", "no-sync ratio", ".2f"),
            ("sync_p50_ms", "sync p50", ".2f"),
            ("ok", "p95 ≤ target", ""),
        ],
        lexical,
    )
    common.print_table(
        f"hybrid and semantic Memory.search and their parts, warm, {args.hybrid_runs} calls "
        f"each, {summary['vectors']:,} vectors ({summary['matrix_mb']:.0f} MB) "
        f"(target hybrid p95 ≤ {TARGET_HYBRID_P95_MS:g} ms; the fts-* queries run lexical in "
        f"hybrid mode, F4; {loads})",
        [
            ("query", "query", ""),
            ("hybrid_p50_ms", "hybrid p50", ".1f"),
            ("hybrid_p95_ms", "hybrid p95", ".1f"),
            ("semantic_p50_ms", "semantic p50", ".1f"),
            ("semantic_p95_ms", "semantic p95", ".1f"),
            ("embed_p50_ms", "embed query", ".1f"),
            ("pending_p50_ms", "unembedded check", ".2f"),
            ("generation_p50_ms", "vector generation", ".2f"),
            ("matmul_p50_ms", "matmul", ".2f"),
            ("top_k_p50_ms", "matmul + top-k", ".2f"),
            ("ok", "p95 ≤ target", ""),
        ],
        hybrid,
    )
    common.print_table(
        f"whole process, {args.cli_runs} runs per side over the natural-language queries "
        f"(target hybrid p50 ≤ {TARGET_CLI_HYBRID_MS:g} ms; {loads})",
        [
            ("side", "side", ""),
            ("calls", "calls", "d"),
            ("p50_ms", "p50 ms", ",.0f"),
            ("p95_ms", "p95 ms", ",.0f"),
            ("min_ms", "min ms", ",.0f"),
            ("ok", "≤ target", ""),
        ],
        cli,
    )
    print(
        f"loading MiniLM and embedding one text in-process {summary['model_load_ms']:.0f} ms; "
        f"loading "
        f"{summary['vectors']:,} vectors into the cache {summary['vector_load_ms']:.0f} ms",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
