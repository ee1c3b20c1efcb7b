"""The scale curve: lexical, semantic and hybrid search, db size and server memory, as the
store grows from 10k to 1M facts and from 1k to 100k markdown chunks.

The grid: facts {10k, 100k, 1M} with ~10k chunks, and chunks {1k, 10k} with 100k facts;
`--chunks 1k,10k,100k` adds the 100k-chunk store, whose markdown takes about an hour to
write here (once: it is cached); --facts / --chunks / --grid full change the grid. Each
store is built once into the cache dir, through memdir's public API, and its build time is
reported:
- the markdown of ~n chunks (search_scale.write_markdown: global entries, daily logs, task
  notes, procedures) written inside `Memory.bulk()`, then `Memory.sync_index()` chunks it;
  one such store per chunk count, copied for every fact count;
- make_facts(n) added with `Memory.add_facts` in batches of 10k (common.add_all, the import
  path), inside `Memory.bulk()`;
- a vector for every fact and chunk, stored through the Store protocol (`Store.unembedded`
  pages, `Store.put_vectors`) under the default model's name. Embedding 1.1M texts with the
  real model takes hours here (~100 items/s), and search latency depends on how many vectors
  there are and their dimension, not on what they say; so POOL distinct corpus texts are
  embedded with the real model (the default MiniLM, int8; cached) and every item's vector is
  normalise(pool[a] + 0.5 * pool[b]), a and b taken from a hash of its text's hash: real
  MiniLM geometry, a distinct vector per text, deterministic. The query is embedded with the
  real model on every search.

Measured on each store, the queries alternating and the modes rotating every round:
- in-process, one warm Memory: `Memory.search(mode=lexical|semantic|hybrid)` p50/p95 over
  natural-language questions and over keyword queries (FTS5 syntax: hybrid runs those as
  lexical, F4);
- a real `memdir serve` process, through the MCP SDK's stdio client: `memory_search` in each
  mode in turn (its first call timed apart: it loads what the mode needs), then VmRSS and
  VmHWM from /proc, of the server and of any other process serving the store (one that
  carries its MEMDIR_STATE_DIR or holds one of its files open, e.g. an embedding worker);
- memory.db + memory.db-wal on disk, and the markdown's bytes.

    python bench/scale.py [--facts 10k,100k,1m] [--chunks 1k,10k[,100k]] [--grid cross|full]
                          [--runs 20] [--mcp-runs 3] [--pool 2048]
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from typing import Any

import common
import search_scale

NAME = "scale"
LIMIT = 10
POOL = 2048  # distinct texts embedded with the real model; every vector is made from two
VECTOR_PAGE = 20_000  # items read and stored per round while filling the vectors
FACT_SIZES = [10_000, 100_000, 1_000_000]
# 100k chunks is left to --chunks 1k,10k,100k: writing their markdown through the API takes
# about an hour here (each write_entry looks at every global entry), once per cache dir
CHUNK_SIZES = [1_000, 10_000]
FIXED_FACTS = 100_000  # the fact count of the chunk axis
FIXED_CHUNKS = 10_000  # the chunk count of the fact axis

# What an agent asks (memdir ORs the non-stopwords) and what a person types.
QUESTIONS = [text for name, text in search_scale.QUERIES if name.startswith("nl-")] + [
    text for name, text in common.QUERIES if name == "question"
]
KEYWORDS = [text for name, text in common.QUERIES if name != "question"] + [
    text for name, text in search_scale.QUERIES if name.startswith("fts-")
]
MODES = ("lexical", "semantic", "hybrid")


def log(message: str) -> None:
    common._stderr(f"[{time.strftime('%H:%M:%S')} load {load()}] {message}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- vectors ---------------------------------------------------------------------------


def model_name() -> str:
    from memdir.storage import embeddings

    return embeddings.DEFAULT_MODEL


def pool_vectors(size: int, seed: int, cache_dir: str) -> Any:
    """Real model vectors of `size` distinct corpus texts (facts and markdown sentences of
    other seeds than the stores'), cached as .npy."""
    import numpy as np

    path = os.path.join(
        os.path.abspath(cache_dir), f"scale-pool-{size}-seed{seed}-{model_name()}.npy"
    )
    if os.path.exists(path):
        return np.load(path)
    from memdir.storage import embeddings

    texts = [text for text, _ in common.make_facts(size, seed + 31)]
    embedder = embeddings.default_embedder()
    log(f"embedding the {size:,} pool texts with {embedder.name} ...")
    started = time.perf_counter()
    parts = [embedder.embed(texts[i : i + 8]) for i in range(0, len(texts), 8)]
    matrix = np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
    log(f"... {size / (time.perf_counter() - started):.0f} texts/s")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path + ".tmp.npy", matrix)
    os.replace(path + ".tmp.npy", path)
    return matrix


def derived_vectors(pool: Any, hashes: list[str]) -> Any:
    """normalise(pool[a] + 0.5 * pool[b]) for each text hash, a and b from a hash of it."""
    import numpy as np

    picks = np.array(
        [
            (
                int.from_bytes(d[:8], "little") % len(pool),
                int.from_bytes(d[8:], "little") % len(pool),
            )
            for d in (hashlib.blake2b(h.encode(), digest_size=16).digest() for h in hashes)
        ],
        dtype=np.int64,
    ).reshape(-1, 2)
    mixed = pool[picks[:, 0]] + 0.5 * pool[picks[:, 1]]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return mixed.astype("<f4")


def fill_vectors(memory: Any, pool: Any) -> int:
    """A vector for every fact and chunk that has none, through the Store protocol."""
    from memdir.storage.rows_cold import NewVector

    store, model, done = memory.store, model_name(), 0
    while True:
        rows = store.unembedded(model, VECTOR_PAGE)
        if not rows:
            break
        vectors = derived_vectors(pool, [row[3] for row in rows])
        store.put_vectors(
            model,
            [
                NewVector(o, i, h, v.tobytes())
                for (o, i, _, h), v in zip(rows, vectors, strict=True)
            ],
        )
        done += len(rows)
    left = store.count_unembedded(model)
    if left:
        raise SystemExit(f"{NAME}: {left:,} items still have no vector after filling")
    return done


# -- stores ----------------------------------------------------------------------------


def markdown_store(chunks: int, seed: int, cache_dir: str) -> tuple[str, dict[str, Any]]:
    """A store holding only the markdown of ~`chunks` chunks, indexed, no vectors."""
    key = f"scale-md-{chunks}-seed{seed}-{common.code_key()}"
    state = os.path.join(os.path.abspath(cache_dir), key)
    done = os.path.join(state, "complete")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as handle:
            return state, json.load(handle)
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    counts = search_scale.plan(chunks)
    log(f"writing the markdown of ~{chunks:,} chunks {counts} ...")
    started = time.perf_counter()
    with common.open_memory(building, clock=search_scale.StepClock()) as memory:
        with memory.bulk():
            search_scale.write_markdown(memory, counts, seed)
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        memory.sync_index()
        index_s = time.perf_counter() - started
    info = {"chunks_planned": chunks, "plan": counts, "markdown_s": write_s, "chunking_s": index_s}
    common.finish_build(building, state, info)
    log(f"... markdown {write_s:.0f} s, chunking {index_s:.1f} s")
    return state, info


def scale_store(
    facts: int, chunks: int, seed: int, pool: Any, cache_dir: str
) -> tuple[str, dict[str, Any]]:
    """A copy of markdown_store(chunks) with make_facts(facts) added and every item given a
    vector (fill_vectors); built once, with its build times."""
    key = f"scale-{facts}-md-{chunks}-seed{seed}-{common.code_key()}-{model_name()}-pool{len(pool)}"
    state = os.path.join(os.path.abspath(cache_dir), key)
    done = os.path.join(state, "complete")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as handle:
            return state, {**json.load(handle), "cached": True}
    base, info = markdown_store(chunks, seed, cache_dir)
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(base, building)  # keeps the files' mtimes: the index stays current
    os.remove(os.path.join(building, "complete"))
    log(f"adding {facts:,} facts to a copy of the {chunks:,}-chunk store ...")
    corpus = common.make_facts(facts, seed)
    with common.open_memory(building) as memory:
        started = time.perf_counter()
        with memory.bulk():
            common.add_all(memory, corpus)
        facts_s = time.perf_counter() - started
        log(f"... {facts / facts_s:,.0f} facts/s; storing the vectors")
        started = time.perf_counter()
        vectors = fill_vectors(memory, pool)
        vectors_s = time.perf_counter() - started
    info = {
        **info,
        "facts": facts,
        "facts_s": facts_s,
        "facts_per_s": common.ratio(facts, facts_s),
        "vectors": vectors,
        "vectors_s": vectors_s,
        "pool": len(pool),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_loadavg": list(os.getloadavg()),
    }
    common.finish_build(building, state, info)
    log(f"... {vectors:,} vectors in {vectors_s:.0f} s: {state}")
    return state, {**info, "cached": False}


def disk(state: str) -> dict[str, Any]:
    """Bytes of memory.db, its -wal, and of the markdown beside them."""
    db = common.db_path(state)
    sizes = {
        "db_bytes": os.path.getsize(db),
        "wal_bytes": os.path.getsize(db + "-wal") if os.path.exists(db + "-wal") else 0,
    }
    markdown = 0
    for root, _, files in os.walk(os.path.dirname(db)):
        markdown += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".md"))
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        counts = {
            table: int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("facts", "chunks", "vectors")
        }
    finally:
        connection.close()
    return {**sizes, "markdown_bytes": markdown, **counts}


# -- in-process --------------------------------------------------------------------------


def inprocess(state: str, runs: int) -> dict[str, Any]:
    """Per query kind and mode, the durations of `runs` rounds of warm Memory.search over
    the kind's queries, the modes taking turns going first."""
    kinds = {"questions": QUESTIONS, "keywords": KEYWORDS}
    times: dict[tuple[str, str], list[float]] = {(k, m): [] for k in kinds for m in MODES}
    with common.open_memory(state) as memory:
        for texts in kinds.values():
            for text in texts:
                for mode in MODES:
                    memory.search(text, limit=LIMIT, mode=mode)  # warm pages and caches
        for run_no in range(runs):
            for kind, texts in kinds.items():
                for text in common.rotate(run_no, texts):
                    for mode in common.rotate(run_no, list(MODES)):
                        started = time.perf_counter()
                        memory.search(text, limit=LIMIT, mode=mode)
                        took = time.perf_counter() - started
                        times[(kind, mode)].append(took)
        unembedded = memory.unembedded
    return {"times": times, "unembedded": unembedded}


# -- the server ------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes (empty when it is gone)."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found


def server_pids(state: str) -> tuple[int | None, list[int]]:
    """The `memdir serve` child of this process, and the other processes that serve this
    store beside it: any that carries its MEMDIR_STATE_DIR in its environment (started by
    the server) or holds one of its files open (e.g. an embedding worker, whoever started
    it)."""
    marker = f"MEMDIR_STATE_DIR={state}".encode()
    inside = os.path.join(state, "")
    server, helpers = None, []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"serve" in argv:
            server = pid
        elif marker in environ or holds_open(pid, inside):
            helpers.append(pid)
    return server, helpers


def holds_open(pid: int, prefix: str) -> bool:
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith(prefix) for link in links)


def memory_now(state: str) -> dict[str, Any]:
    server, helpers = server_pids(state)
    if server is None:
        raise SystemExit(f"{NAME}: no `memdir serve` process found for {state}")
    mine = proc_status(server)
    others = [proc_status(pid) for pid in helpers]
    return {
        "rss": mine.get("VmRSS", 0),
        "hwm": mine.get("VmHWM", 0),
        "helpers": len(helpers),
        "helpers_rss": sum(o.get("VmRSS", 0) for o in others),
        "helpers_hwm": sum(o.get("VmHWM", 0) for o in others),
    }


def server(state: str, runs: int, cache_dir: str) -> dict[str, Any]:
    """A real `memdir serve` over stdio, through the MCP SDK's client: memory_search in
    each mode over every query, `runs` rounds after a first one (timed apart: the first call
    of a mode loads what it needs); its memory after start and after each mode's searches
    (the modes run in turn, lexical first, so each step shows what it adds)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=common.venv_bin("memdir"), args=["serve"], env=common.child_env(state, cache_dir)
    )
    texts = QUESTIONS + KEYWORDS
    out: dict[str, Any] = {"times": {}, "memory": {}, "first": {}}

    async def main() -> None:
        async with Client(params, read_timeout_seconds=600) as client:
            await client.list_tools()
            out["memory"]["started"] = memory_now(state)
            for mode in MODES:
                took: list[float] = []
                for run_no in range(1 + runs):
                    for text in common.rotate(run_no, texts):
                        started = time.perf_counter()
                        result = await client.call_tool(
                            "memory_search", {"query": text, "mode": mode, "limit": LIMIT}
                        )
                        if result.is_error:
                            raise SystemExit(f"{NAME}: memory_search failed: {result.content}")
                        if run_no:  # the first round warms the server (its model, vectors)
                            took.append(time.perf_counter() - started)
                        elif mode not in out["first"]:
                            out["first"][mode] = (time.perf_counter() - started) * 1000
                out["times"][mode] = took
                out["memory"][mode] = memory_now(state)

    anyio.run(main)
    return out


# -- main --------------------------------------------------------------------------------


def grid(facts: list[int], chunks: list[int], full: bool) -> list[tuple[int, int]]:
    """(facts, chunks) of every store: the full grid, or each axis through the other's
    middle size (10k chunks on the fact axis, 100k facts on the chunk axis by default)."""
    if full:
        pairs = [(f, c) for f in facts for c in chunks]
    else:
        middle_chunks = sorted(chunks)[len(chunks) // 2]
        middle_facts = sorted(facts)[len(facts) // 2]
        pairs = [(f, middle_chunks) for f in facts] + [(middle_facts, c) for c in chunks]
    return sorted(set(pairs), key=lambda p: (p[0], p[1]))


def mib(n: float) -> float:
    return n / 2**20


def measure(
    facts: int, chunks: int, pool: Any, args: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The table rows of one store (one per query kind) and its detail row."""
    state, build = scale_store(facts, chunks, args.seed, pool, args.cache_dir)
    log(f"{facts:,} facts + {chunks:,} chunks: in-process searches")
    started_load = load()
    got = inprocess(state, args.runs)
    log(f"{facts:,} facts + {chunks:,} chunks: a memdir serve process")
    served = server(state, args.mcp_runs, args.cache_dir)
    sizes = disk(state)
    memory = served["memory"]
    last = memory[MODES[-1]]
    detail: dict[str, Any] = {
        "table": "detail",
        "facts": facts,
        "chunks_planned": chunks,
        **sizes,
        **{
            k: build[k] for k in ("markdown_s", "chunking_s", "facts_s", "facts_per_s", "vectors_s")
        },
        "build_cached": build["cached"],
        **{f"mcp_first_{mode}_ms": served["first"][mode] for mode in MODES},
        "unembedded": got["unembedded"],
        "rss_started": memory["started"]["rss"],
        **{f"rss_after_{mode}": memory[mode]["rss"] for mode in MODES},
        "hwm": last["hwm"],
        "helpers": last["helpers"],
        "helpers_rss": last["helpers_rss"],
        "helpers_hwm": last["helpers_hwm"],
        "loadavg": f"{started_load} → {load()}",
    }
    for mode in MODES:
        figures = common.stats_ms(served["times"][mode])
        detail[f"mcp_{mode}_p50_ms"], detail[f"mcp_{mode}_p95_ms"] = figures["p50"], figures["p95"]
    rows = []
    for kind in ("questions", "keywords"):
        row: dict[str, Any] = {"table": "curve", "facts": facts, "chunks": sizes["chunks"]}
        row["queries"] = kind
        for mode in MODES:
            figures = common.stats_ms(got["times"][(kind, mode)])
            row[f"{mode}_p50_ms"], row[f"{mode}_p95_ms"] = figures["p50"], figures["p95"]
            row["calls"] = figures["n"]
        if kind == "questions":  # the store's own figures, once
            row["db_mib"] = mib(sizes["db_bytes"] + sizes["wal_bytes"])
            row["rss_mib"] = mib(last["rss"] + last["helpers_rss"])
            row["hwm_mib"] = mib(last["hwm"] + last["helpers_hwm"])
            row["build_s"] = build["markdown_s"] + build["chunking_s"] + build["facts_s"]
            row["build_s"] += build["vectors_s"]
        rows.append(row)
    return rows, detail


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts", type=common.sizes, default=FACT_SIZES, help="fact counts (default 10k,100k,1m)"
    )
    parser.add_argument(
        "--chunks",
        type=common.sizes,
        default=CHUNK_SIZES,
        help="about how many markdown chunks (default 1k,10k; 100k takes ~1 h to build once)",
    )
    parser.add_argument(
        "--grid",
        choices=("cross", "full"),
        default="cross",
        help="cross: each axis through the other's middle size; full: every pair",
    )
    parser.add_argument(
        "--runs", type=int, default=20, help="in-process rounds over every query and mode"
    )
    parser.add_argument(
        "--mcp-runs", type=int, default=3, help="rounds over every query per mode, MCP server"
    )
    parser.add_argument(
        "--pool", type=int, default=POOL, help="texts embedded with the real model (vectors)"
    )
    args = parser.parse_args(argv)
    from memdir.storage import embeddings

    if not embeddings.available():
        raise SystemExit(f"{NAME}: needs the embeddings extra: {embeddings.INSTALL}")
    load_start = load()
    pool = pool_vectors(args.pool, args.seed, args.cache_dir)
    rows: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    for facts, chunks in grid(args.facts, args.chunks, args.grid == "full"):
        got, detail = measure(facts, chunks, pool, args)
        rows += got
        details.append(detail)
    load_end = load()
    loads = f"load {load_start} → {load_end}"
    how = (
        f"vectors: {args.pool:,} texts embedded with {embeddings.DEFAULT_MODEL}, every item's "
        "vector a normalised mix of two of them; the query embedded with the real model"
    )
    print_tables(args, rows, details, how, loads)
    summary = {
        "stores": [[d["facts"], d["chunks"]] for d in details],
        # no target: a curve, not a judgement; ok says every figure stands for what it says
        # (every item had a vector, so semantic ranked them all; the server was measured)
        "ok": all(
            d["unembedded"] == 0 and d["vectors"] == d["facts"] + d["chunks"] for d in details
        )
        and all(d["rss_started"] > 0 for d in details),
        "curve": [
            {k: v for k, v in row.items() if k != "table"}
            for row in rows
            if row["queries"] == "questions"
        ],
        "vectors": how,
        "loadavg_start": load_start,
        "loadavg_end": load_end,
    }
    params = {
        "facts": args.facts,
        "chunks": args.chunks,
        "grid": args.grid,
        "runs": args.runs,
        "mcp_runs": args.mcp_runs,
        "pool": args.pool,
        "limit": LIMIT,
        "seed": args.seed,
        "questions": QUESTIONS,
        "keywords": KEYWORDS,
    }
    common.write_result(NAME, args.out_dir, params, [*rows, *details], summary)
    return 0


def print_tables(
    args: Any, rows: list[dict[str, Any]], details: list[dict[str, Any]], how: str, loads: str
) -> None:
    latency = [(f"{mode}_{q}_ms", f"{mode} {q}", ".1f") for mode in MODES for q in ("p50", "p95")]
    common.print_table(
        f"the scale curve: warm in-process Memory.search, ms ({args.runs} rounds over "
        f"{len(QUESTIONS)} questions / {len(KEYWORDS)} keyword queries; keyword queries in FTS5 "
        f"syntax run lexical in hybrid mode, F4); db = memory.db + -wal; server = a "
        f"`memdir serve` process after {args.mcp_runs} rounds of memory_search in each mode "
        f"(VmRSS, peak VmHWM); {how}; {loads}",
        [
            ("facts", "facts", ",d"),
            ("chunks", "chunks", ",d"),
            ("queries", "queries", ""),
            *latency,
            ("db_mib", "db MiB", ",.0f"),
            ("rss_mib", "server RSS MiB", ",.0f"),
            ("hwm_mib", "server peak MiB", ",.0f"),
            ("build_s", "build s", ",.0f"),
        ],
        rows,
    )
    common.print_table(
        "per store: build (markdown written, chunked, facts added, vectors stored); "
        "memory_search through MCP, ms (a fresh server's first call in each mode, the modes "
        "in turn, then p50); the server's memory (MiB) as it served each mode in turn",
        [
            ("facts", "facts", ",d"),
            ("chunks", "chunks", ",d"),
            ("vectors", "vectors", ",d"),
            ("markdown_s", "markdown s", ",.0f"),
            ("chunking_s", "chunking s", ",.1f"),
            ("facts_per_s", "facts/s added", ",.0f"),
            ("vectors_s", "vectors s", ",.0f"),
            *[(f"mcp_first_{mode}_ms", f"MCP first {mode}", ",.0f") for mode in MODES],
            *[(f"mcp_{mode}_p50_ms", f"MCP {mode} p50", ",.1f") for mode in MODES],
            ("rss_started", "RSS started", ",d"),
            *[(f"rss_after_{mode}", f"RSS after {mode}", ",d") for mode in MODES],
            ("hwm", "peak", ",d"),
            ("helpers", "helper procs", "d"),
            ("helpers_rss", "helpers RSS", ",d"),
        ],
        [
            {
                **d,
                **{
                    k: round(mib(d[k]))
                    for k in (
                        "rss_started",
                        "hwm",
                        "helpers_rss",
                        *[f"rss_after_{m}" for m in MODES],
                    )
                },
            }
            for d in details
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
