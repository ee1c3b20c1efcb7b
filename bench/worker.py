"""The warm embedding worker (Q2), side by side in one run:

1. `memdir search QUERY` in the default mode (hybrid, embeddings installed) with the
   store's worker up, against a bare FTS5 process (the same query, the same db), against
   the same call with [search] worker_idle = 0 (each process loads the model and reads
   every vector, as before the worker), and against `--mode lexical` (what the worker
   adds to the lexical part); whole processes, alternating.
2. MCP `memory_update` (tools.call_tool, as the server runs it, its background embedder
   comparing the fact by meaning after the answer) with the model loaded, against the
   same call without vectors ([search] mode lexical: what a store without the extra
   does), the comparison before the answer (as before) and with the vector cache rebuilt
   after each write (as before that); in-process, alternating.
3. Memory: the worker's RSS after the searches, and a server-like process (the model
   loaded, writes and hybrid searches, then a batch of long texts embedded) with this
   build's model settings (the integer graph, a text a run, two runs at once, no
   onnxruntime arena) and the former ones (the package's float32 graph, batches of 8 on
   two threads; batches of 32 with the arena before that): RSS at the end and its peak.
4. Indexing with embeddings: chunks/s for ~100-word sections under each of those, and
   the cosine between this build's vectors and the float32 graph's (min and mean).

The store's facts get random unit vectors (the timing depends on the matrix's size, not
on what the vectors say), so no bench run waits hours for 100k embeddings.

    python bench/worker.py [--facts 100000] [--runs 15] [--chunks 300]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import common

NAME = "worker"
SEARCH_TARGET = 2.0  # memdir search, worker up, <= 2x a bare FTS5 process
UPDATE_TARGET = 2.0  # memory_update with the model <= 2x without vectors
CHUNKS_TARGET = 80.0  # chunks/s
WARMUP = 2

BARE = """\
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute({sql!r}, (sys.argv[2], 10)).fetchall():
    print(f"fact #{{row[0]}} [{{row[1]}}] {{row[4]}}  score {{-row[-1]:g}}\\n  {{row[2]}}")
"""

# a child that loads the model the way this build does, or the former way, and reports
CHILD = """\
import json, os, sys, time
sys.path.insert(0, {src!r})
from memdir.storage import embeddings
mode, setting = sys.argv[1], sys.argv[2]
if setting != "now":  # the package's float32 graph, one run at a time on two threads
    embeddings.INTEGER, embeddings.CALLERS, embeddings.THREADS = False, 1, 2
    embeddings.BATCH, embeddings.ARENA = (8, False) if setting == "float32" else (32, True)
texts = json.loads(sys.stdin.read())
model = embeddings.MiniLM()
model.embed(texts[:8])
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return round(int(line.split()[1]) / 1024, 1)
if mode == "embed":
    started = time.perf_counter()
    vectors = model.embed(texts)
    took = time.perf_counter() - started
    out = {{"chunks_per_s": len(texts) / took, "vectors": vectors.tolist()}}
else:
    from memdir import Memory
    from memdir.tools import call_tool
    state = sys.argv[3]
    model.name = embeddings.DEFAULT_MODEL  # the store's vectors, whichever graph runs
    with Memory(state, embedder=model) as memory:
        memory.embed_later = lambda: None
        for n in range(10):
            call_tool(memory, "memory_update", {{"content": f"server note {{n}} " + texts[n][:80],
                                                 "category": "learning"}})
            memory.search(texts[n][:60])
        model.embed(texts)
    out = {{}}
out.update(rss_mib=status("VmRSS:"), peak_mib=status("VmHWM:"))
print(json.dumps(out))
"""


def run(argv: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, input=stdin, capture_output=True, text=True)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{NAME}: {argv[:3]} exited {proc.returncode}: {proc.stderr.strip()}")
    return took, proc.stdout


def add_vectors(state: str, seed: int) -> int:
    """A random unit vector of the default model for every active fact."""
    import numpy as np

    from memdir.storage import embeddings
    from memdir.storage.rows_cold import NewVector

    with common.open_memory(state) as memory:
        ids = [
            row[0]
            for row in memory.store._conn().execute("SELECT id FROM facts WHERE status = 'active'")
        ]
        rng = np.random.default_rng(seed)
        for start in range(0, len(ids), 10_000):
            part = ids[start : start + 10_000]
            vectors = rng.standard_normal((len(part), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            memory.store.put_vectors(
                embeddings.DEFAULT_MODEL,
                [
                    NewVector("fact", i, f"bench-{i}", embeddings.to_blob(v))
                    for i, v in zip(part, vectors, strict=True)
                ],
            )
    return len(ids)


def chunk_texts(n: int, seed: int) -> list[str]:
    facts = [text for text, _ in common.make_facts(n * 3, seed)]
    return [" ".join(facts[i : i + 3]) for i in range(0, 3 * n, 3)]


def search_side(args: Any, state: str, env: dict[str, str]) -> list[dict[str, Any]]:
    from memdir.search import worker

    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")
    db = common.db_path(state)
    bare_script = BARE.format(sql=common.search_sql())
    query = dict(common.QUERIES)["question"]  # plain words: hybrid (AND would be lexical)
    config = os.path.join(state, "config.toml")
    cold_state = state + "-cold"
    shutil.copytree(state, cold_state, ignore=shutil.ignore_patterns("worker"))
    with open(os.path.join(cold_state, "config.toml"), "w") as handle:
        handle.write("[search]\nworker_idle = 0\n")
    cold_env = {**env, "MEMDIR_STATE_DIR": cold_state}
    with open(config, "w") as handle:
        handle.write("[search]\nworker_idle = 600\n")
    run([memdir, "search", query], env)  # starts the worker
    places = worker.Places(state)
    if worker.wait_up(places, time.monotonic() + 300) is None:
        with open(places.log, encoding="utf-8", errors="replace") as log:
            raise SystemExit(f"{NAME}: the worker did not come up: {log.read()[-2000:]}")
    sides = {
        "memdir (worker up)": ([memdir, "search", query], env),
        "bare FTS5": ([python, "-c", bare_script, db, common.fts_match(query)], env),
        "memdir (worker_idle 0)": ([memdir, "search", query], cold_env),
        "memdir --mode lexical": ([memdir, "search", "--mode", "lexical", query], env),
    }
    _, out = run(*sides["memdir (worker up)"])
    times: dict[str, list[float]] = {side: [] for side in sides}
    for run_no in range(WARMUP + args.runs):
        for side in common.rotate(run_no, list(sides)):
            if side == "memdir (worker_idle 0)" and run_no >= WARMUP + args.cold_runs:
                continue
            took, _ = run(*sides[side])
            if run_no >= WARMUP:
                times[side].append(took)
    status = worker.call(places, {"op": "status"}, 10) or {}
    worker.call(places, {"op": "status"}, 10)
    pid = status.get("pid")
    if pid:
        os.kill(pid, 15)
    stats = {side: common.stats_ms(t) for side, t in times.items()}
    rows = [
        common.side_row(side, stats, "bare FTS5" if side != "bare FTS5" else None) for side in sides
    ]
    rows[0]["worker_rss_mib"] = status.get("rss_mib")
    rows[0]["query"] = query
    rows[0]["hits_lines"] = len(out.splitlines())
    return rows


def update_side(args: Any, state: str) -> list[dict[str, Any]]:
    """memory_update as the server runs it: its background embedder (EmbedWorker) gives the
    fact its vector and compares it by meaning after the answer (N1); the bench waits for
    that between calls, untimed, so no call pays for the last one's, and reports it apart.
    Beside: the same call without vectors, and the call comparing before it answers (as
    before), with the matrix read again after each write (as before that)."""
    from memdir.embed_worker import EmbedWorker
    from memdir.storage import embeddings
    from memdir.tools import call_tool

    model = embeddings.default_embedder()
    served = common.open_memory(state, embedder=model)
    background = EmbedWorker(served)
    served.embed_later, served.compare_later = background.poke, background.compare
    background.start()
    inline = common.open_memory(state, embedder=model)
    inline.embed_later = lambda: None  # a poke: nothing embeds after the answer
    rebuilt = common.open_memory(state, embedder=model)
    rebuilt.embed_later = lambda: None
    lexical = common.open_memory(state)
    lexical.settings = lexical.settings._replace(search_mode="lexical")
    for memory in (served, inline, rebuilt):
        memory.search("warm up the vectors")
    background.wait_idle(600)
    counter = iter(range(10**9))
    after: list[float] = []

    def update(memory: Any) -> None:
        n = next(counter)
        call_tool(
            memory,
            "memory_update",
            {
                "content": f"bench update {n}: the deploy window moved to slot {n}",
                "category": "learning",
            },
        )

    def served_update() -> None:
        update(served)

    def rebuild_then_update() -> None:
        rebuilt._vector_cache = None  # as before: the matrix read again after each write
        update(rebuilt)

    calls = {
        "with the model (compared after the answer)": served_update,
        "without vectors": lambda: update(lexical),
        "with the model, compared before the answer (before)": lambda: update(inline),
        "the same, cache rebuilt (before that)": rebuild_then_update,
    }

    times: dict[str, list[float]] = {side: [] for side in calls}
    for run_no in range(WARMUP + args.runs):
        for side in common.rotate(run_no, list(calls)):
            took, _ = common.timed(calls[side])
            started = time.perf_counter()
            background.wait_idle(600)  # untimed for the call: the server's background work
            if run_no >= WARMUP:
                times[side].append(took)
                if side == "with the model (compared after the answer)":
                    after.append(time.perf_counter() - started)
    background.stop(60)
    for memory in (served, inline, rebuilt, lexical):
        memory.close()
    stats = {side: common.stats_ms(t) for side, t in times.items()}
    rows = [
        common.side_row(side, stats, "without vectors" if side != "without vectors" else None)
        for side in calls
    ]
    rows[0]["compared_after_p50_ms"] = common.stats_ms(after)["p50"]
    return rows


def model_side(args: Any, state: str, env: dict[str, str]) -> list[dict[str, Any]]:
    import numpy as np

    python = common.venv_bin("python")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    script = CHILD.format(src=src)
    texts = json.dumps(chunk_texts(args.chunks, args.seed))
    configs = [
        ("now: integer graph, a text a run, 2 at once", "now"),
        ("before: float32 graph, batches of 8, 2 threads", "float32"),
        ("before that: float32, batches of 32, the arena", "float32-32"),
    ]
    rows: dict[str, dict[str, Any]] = {label: {"what": label, "speeds": []} for label, _ in configs}
    vectors: dict[str, Any] = {}
    for run_no in range(args.model_runs):
        for label, setting in common.rotate(run_no, configs):
            _, out = run([python, "-c", script, "embed", setting], env, texts)
            answer = json.loads(out)
            rows[label]["speeds"].append(answer["chunks_per_s"])
            vectors[setting] = np.array(answer["vectors"], dtype=np.float32)
    cosines = (vectors["now"] * vectors["float32"]).sum(axis=1)
    for label, setting in configs:
        _, out = run([python, "-c", script, "server", setting, state], env, texts)
        server = json.loads(out)
        rows[label].update(
            chunks_per_s=common.median(rows[label]["speeds"]),
            server_rss_mib=server["rss_mib"],
            server_peak_mib=server["peak_mib"],
        )
    rows[configs[0][0]].update(
        cos_to_float32_min=float(cosines.min()), cos_to_float32_mean=float(cosines.mean())
    )
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=common.sizes, default=[100_000])
    parser.add_argument("--runs", type=int, default=15, help="timed calls per side")
    parser.add_argument("--cold-runs", type=int, default=5, help="timed calls, worker_idle 0")
    parser.add_argument("--chunks", type=int, default=300, help="sections embedded per run")
    parser.add_argument("--model-runs", type=int, default=3, help="embedding runs per setting")
    args = parser.parse_args(argv)
    n = args.facts[0]
    built = common.build_store(n, args.seed, args.cache_dir)
    with tempfile.TemporaryDirectory(dir=args.cache_dir) as tmp:
        state = os.path.join(tmp, "state")
        shutil.copytree(built, state)
        vectors = add_vectors(state, args.seed)
        env = common.child_env(state, args.cache_dir)
        search_rows = search_side(args, state, env)
        update_rows = update_side(args, state)
        model_rows = model_side(args, state, env)
    columns = [
        ("side", "side", ""),
        ("calls", "calls", ",d"),
        ("p50_ms", "p50 ms", ".1f"),
        ("p95_ms", "p95 ms", ".1f"),
        ("floor", "against", ""),
        ("ratio_p50", "ratio p50", ".2f"),
    ]
    common.print_table(
        f"`memdir search` default mode, {n:,} facts with vectors (target ≤ {SEARCH_TARGET}×)",
        columns,
        search_rows,
    )
    common.print_table(
        f"MCP memory_update, {n:,} facts with vectors (target ≤ {UPDATE_TARGET}×)",
        columns,
        update_rows,
    )
    common.print_table(
        f"the model: indexing speed ({args.chunks} sections) and a server's memory",
        [
            ("what", "settings", ""),
            ("chunks_per_s", "chunks/s", ".1f"),
            ("server_rss_mib", "server RSS MiB", ".0f"),
            ("server_peak_mib", "server peak MiB", ".0f"),
        ],
        model_rows,
    )
    print(
        "\nthis build's vectors against the float32 graph's: cosine min"
        f" {model_rows[0]['cos_to_float32_min']:.4f},"
        f" mean {model_rows[0]['cos_to_float32_mean']:.4f}"
    )
    print(
        "\nafter each answer, the server's background embedder compared the fact by meaning"
        f" in {update_rows[0]['compared_after_p50_ms']:.1f} ms (p50)"
    )
    worker_rss = search_rows[0].get("worker_rss_mib")
    print(f"\nthe worker's RSS after the searches: {worker_rss} MiB ({vectors:,} vectors)")
    summary = {
        "search_ratio": search_rows[0]["ratio_p50"],
        "search_cold_ratio": search_rows[2]["ratio_p50"],
        "update_ratio": update_rows[0]["ratio_p50"],
        "update_compared_before_ratio": update_rows[2]["ratio_p50"],
        "update_before_ratio": update_rows[3]["ratio_p50"],
        "update_compared_after_ms": update_rows[0]["compared_after_p50_ms"],
        "chunks_per_s": model_rows[0]["chunks_per_s"],
        "chunks_per_s_before": model_rows[1]["chunks_per_s"],
        "chunks_ratio": model_rows[0]["chunks_per_s"] / model_rows[1]["chunks_per_s"],
        "cos_to_float32_min": model_rows[0]["cos_to_float32_min"],
        "worker_rss_mib": worker_rss,
        "server_rss_mib": model_rows[0]["server_rss_mib"],
        "server_rss_mib_before": model_rows[1]["server_rss_mib"],
        "ok": search_rows[0]["ratio_p50"] <= SEARCH_TARGET
        and update_rows[0]["ratio_p50"] <= UPDATE_TARGET
        and model_rows[0]["chunks_per_s"] >= CHUNKS_TARGET,
    }
    for table, rows in (("search", search_rows), ("update", update_rows), ("model", model_rows)):
        for row in rows:
            row["table"] = table
    common.write_result(
        NAME,
        args.out_dir,
        {"facts": n, "vectors": vectors, "runs": args.runs, "chunks": args.chunks},
        search_rows + update_rows + model_rows,
        summary,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
