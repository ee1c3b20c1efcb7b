"""Team memory on PostgreSQL (W1) beside memory.db: lexical, semantic and hybrid search
p50/p95 on the same store, and the migration that made it.

One store of --facts make_facts texts (common.build_store, cached), every fact given a
vector the way scale.py gives them (a mix of --pool texts embedded with the real model).
A throwaway PostgreSQL (tests/pg_server.py: initdb + pg_ctl of the installed server, on a
unix socket, fsync off as in the suite) gets the same store by `memdir migrate --to URL`
(curation/migrate.py: the rows, the lexical index built on the way, the vectors; verified
record for record), timed. Then one warm Memory on each side answers every question and
keyword query (scale.QUESTIONS, scale.KEYWORDS) in each mode, --runs rounds, the sides and
the queries taking turns going first; reported per mode and side: p50/p95/min/max, and the
ratio PostgreSQL / SQLite (the baseline, measured beside it in the same run). With
--pgvector (the default where the pgserver wheel is installed), a second server, the
PostgreSQL 16 with pgvector that wheel bundles, gets the store too (side `pgvector`: the
server ranks the vectors, storage/postgres/pgvector.py), beside Debian's PostgreSQL 15
(side `postgres`: no pgvector, the vectors ranked in Python as on memory.db).

Then acknowledged writes per second: --writers processes on this one host (the same
writers on 3 hosts, network namespaces over TCP, are bench/team_hosts.py), each adding
distinct facts through Memory.add_fact for --seconds, into one fresh store on each side
(embedding left to later: `[search] embed_on_write = "loaded"`); every fact a writer was
told was stored is counted, and the store's count must match.

Not measured here: connection latency over a network (the server is on a local socket).

    python bench/postgres.py [--facts 100k] [--runs 10] [--pool 512] [--writers 12]
                             [--seconds 10] [--no-pgvector] [--no-writes]
"""

from __future__ import annotations

import os
import shutil
import sys
from functools import partial
from typing import Any

import common
import scale

sys.path.insert(0, os.path.join(os.path.dirname(common.BENCH_DIR), "tests"))

import pg_server  # noqa: E402  (the suite's throwaway server, tests/pg_server.py)

NAME = "postgres"
LIMIT = 10
MODES = ("lexical", "semantic", "hybrid")
SIDES = ("sqlite", "postgres")
WRITE_SIDES = ("sqlite", "postgres")
KINDS = {"questions": scale.QUESTIONS, "keywords": scale.KEYWORDS}


def log(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def build(n: int, seed: int, pool_size: int, cache_dir: str, work: str) -> str:
    """A copy of the cached n-fact store, every fact with a vector."""
    source = common.build_store(n, seed, cache_dir, log)
    state = os.path.join(work, "state")
    shutil.copytree(source, state)
    pool = scale.pool_vectors(pool_size, seed, cache_dir)
    with common.open_memory(state) as memory:
        filled = scale.fill_vectors(memory, pool)
    log(f"{filled:,} vectors stored")
    return state


def migrate(state: str, url: str) -> dict[str, Any]:
    from memdir.curation.migrate import migrate as run

    with common.open_memory(state) as memory:
        took, done = common.timed(run, memory, url)
    facts = done.counts["fact"]
    log(f"migrated {facts:,} facts and {done.vectors:,} vectors in {took:.1f} s")
    return {"seconds": took, "facts": facts, "vectors": done.vectors, "facts_per_s": facts / took}


answers: dict[tuple[str, str, str], list[tuple[str, int | None, str | None]]] = {}
scores: dict[tuple[str, str, str], list[float]] = {}  # of those hits, to tell ties apart


def search(state: str, urls: dict[str, str], runs: int) -> dict[tuple[str, str, str], list[float]]:
    """(side, kind, mode) -> the durations of every search of that kind and mode; `urls`:
    the database of each PostgreSQL side. The hits of each side's first search of each
    query and mode are kept in `answers` (agreement: the same hits as memory.db's)."""
    sides = ("sqlite", *urls)
    memories = {
        "sqlite": common.open_memory(state),
        **{
            side: common.open_memory(state, env={"MEMDIR_DATABASE_URL": url})
            for side, url in urls.items()
        },
    }
    times: dict[tuple[str, str, str], list[float]] = {
        (s, k, m): [] for s in sides for k in KINDS for m in MODES
    }
    answers.clear()
    scores.clear()
    try:
        for side, memory in memories.items():  # warm: the model, the vector matrix, the pages
            for texts in KINDS.values():
                for text in texts:
                    for mode in MODES:
                        hits = memory.search(text, limit=LIMIT, mode=mode)
                        answers[(side, text, mode)] = [(h.kind, h.id, h.path) for h in hits]
                        scores[(side, text, mode)] = [round(h.score, 3) for h in hits]
        for run_no in range(runs):
            for kind, texts in KINDS.items():
                for text in common.rotate(run_no, list(texts)):
                    for mode in common.rotate(run_no, list(MODES)):
                        for side in common.rotate(run_no, list(sides)):
                            query = partial(memories[side].search, text, limit=LIMIT, mode=mode)
                            took, _ = common.timed(query)
                            times[(side, kind, mode)].append(took)
            log(f"round {run_no + 1}/{runs} (load {scale.load()})")
    finally:
        for memory in memories.values():
            memory.close()
    return times


WRITER = """
import os, sys, time
from memdir import Memory
state, go, seconds, me = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
with Memory(state, agent=me) as memory:
    memory.store.get_value("warm")
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        memory.add_fact(f"writer {me} wrote fact number {done} of its run", "learning")
        done += 1
    print(done, flush=True)
"""


def writes(
    work: str, side: str, url: str, writers: int, seconds: float, cache_dir: str
) -> dict[str, Any]:
    """Acknowledged writes per second of `writers` processes on one fresh store."""
    import subprocess

    state = os.path.join(work, f"writes-{side}")
    os.makedirs(state)
    with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
        handle.write('[search]\nembed_on_write = "loaded"\n')
    env = common.child_env(state, cache_dir)
    if side == "postgres":
        env["MEMDIR_DATABASE_URL"] = url
        env["MEMDIR_DATABASE_SCOPE"] = "writes"
    go = os.path.join(state, "go")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, state, go, str(seconds), f"w{k}"],
            stdout=subprocess.PIPE, text=True, env=env,
        )
        for k in range(writers)
    ]  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    open(go, "w").close()
    acked = sum(int(proc.communicate()[0].strip()) for proc in procs)
    with common.open_memory(state, env=env) as memory:
        stored = memory.store.count_facts().get("active", 0)
    if stored != acked:
        raise SystemExit(f"{NAME}: {side}: {acked} writes acknowledged, {stored} stored")
    log(f"{side}: {writers} writers, {acked:,} facts in {seconds:.0f} s")
    return {"side": side, "writers": writers, "acked": acked, "per_s": acked / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--facts", default="100k", help="facts in the store (default 100k)")
    parser.add_argument("--runs", type=int, default=10, help="rounds of every query")
    parser.add_argument("--pool", type=int, default=512, help="texts embedded for real")
    parser.add_argument("--writers", type=int, default=12, help="writer processes")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long they write")
    parser.add_argument("--no-pgvector", action="store_true", help="no second server with pgvector")
    parser.add_argument("--no-writes", action="store_true", help="searches only")
    args = parser.parse_args(argv)
    from importlib.util import find_spec

    with_pgvector = not args.no_pgvector and find_spec("pgserver") is not None
    (n,) = common.sizes(args.facts)
    work = os.path.join(os.path.abspath(args.cache_dir), f"postgres-work-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    servers = {"postgres": pg_server.start()}
    try:
        if with_pgvector:
            servers["pgvector"] = pg_server.start(bindir=pg_server.pgvector_bin_dir())
        state = build(n, args.seed, args.pool, args.cache_dir, work)
        urls = {side: server.url(server.new_database()) for side, server in servers.items()}
        moved = migrate(state, urls["postgres"])
        if with_pgvector:
            migrate(state, urls["pgvector"])
        times = search(state, urls, args.runs)
        written = (
            []
            if args.no_writes
            else [
                writes(work, side, urls["postgres"], args.writers, args.seconds, args.cache_dir)
                for side in WRITE_SIDES
            ]
        )
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    sides = ("sqlite", *servers)
    agreement = []
    for side in sides[1:]:
        for mode in MODES[1:]:
            keys = [(t, m) for (s, t, m) in answers if s == side and m == mode]
            same = sum(answers[(side, t, m)] == answers[("sqlite", t, m)] for t, m in keys)
            # the bench's vectors come from --pool texts, each shared by many facts: equal
            # cosines, which each side orders its own way
            tied = sum(scores[(side, t, m)] == scores[("sqlite", t, m)] for t, m in keys)
            shared = sum(
                len(set(answers[(side, t, m)]) & set(answers[("sqlite", t, m)])) for t, m in keys
            )
            wanted = sum(len(answers[("sqlite", t, m)]) for t, m in keys) or 1
            agreement.append(
                {"side": side, "mode": mode, "queries": len(keys), "same": same,
                 "same_scores": tied, "overlap": shared / wanted}
            )  # fmt: skip
    rows = []
    for kind in KINDS:
        for mode in MODES:
            stats = {side: common.stats_ms(times[(side, kind, mode)]) for side in sides}
            for side in sides:
                rows.append({"kind": kind, "mode": mode, **common.side_row(side, stats, "sqlite")})
    columns = [("kind", "queries", ""), ("mode", "mode", ""), *common.SIDE_COLUMNS]
    common.print_table(f"search at {n:,} facts: PostgreSQL beside memory.db", columns, rows)
    common.print_table(
        f"memdir migrate --to URL of {n:,} facts",
        [("facts", "facts", ",d"), ("vectors", "vectors", ",d"), ("seconds", "s", ".1f"),
         ("facts_per_s", "facts/s", ",.0f")],
        [moved],
    )  # fmt: skip
    common.print_table(
        f"the same hits as memory.db (top {LIMIT}, every query)",
        [("side", "store", ""), ("mode", "mode", ""), ("queries", "queries", ",d"),
         ("same", "same list", ",d"), ("same_scores", "same scores", ",d"),
         ("overlap", "overlap", ".3f")],
        agreement,
    )  # fmt: skip
    for row in written:
        row["ratio"] = common.ratio(row["per_s"], written[0]["per_s"])
    if written:
        common.print_table(
            f"acknowledged writes: {args.writers} processes on one store, {args.seconds:.0f} s",
            [("side", "store", ""), ("writers", "writers", ",d"), ("acked", "facts", ",d"),
             ("per_s", "facts/s", ",.0f"), ("ratio", "/ sqlite", ".2f")],
            written,
        )  # fmt: skip
    common.write_result(
        NAME,
        args.out_dir,
        {
            "facts": n,
            "runs": args.runs,
            "pool": args.pool,
            "seed": args.seed,
            "writers": args.writers,
            "seconds": args.seconds,
            "pgvector": with_pgvector,
        },
        rows,
        {"migrate": moved, "writes": written, "agreement": agreement},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
