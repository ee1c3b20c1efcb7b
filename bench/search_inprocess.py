"""In-process `Memory.search` (lexical) against the raw FTS5 query it runs.

The raw side is a second sqlite3 connection to the same database with the connection
settings SQLiteStore uses, running the statement SQLiteStore.search_facts runs with the
MATCH expression memdir builds (parsing it is memdir's cost, not the raw side's). A third
side, SQLiteStore.search_facts alone, splits memdir's overhead into its storage layer and
the layers above. The sides take turns going first; before timing, each query's hits are
checked to be the same ids.

Target (docs/spec.md, Performance): at 100k facts, memdir p95 ≤ 1.2× the raw query's p95.

    python bench/search_inprocess.py [--sizes 10k,100k] [--runs 200]
"""

from __future__ import annotations

import sqlite3
import sys
from typing import Any

import common

NAME = "search_inprocess"
TARGET = 1.2
WARMUP = 5
LIMIT = 10


def raw_connection(state_dir: str, busy_timeout_ms: int) -> sqlite3.Connection:
    """Opened as SQLiteStore._conn opens its connection."""
    db = sqlite3.connect(
        common.db_path(state_dir),
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
    )
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    return db


def bench_size(n: int, args: Any) -> list[dict[str, Any]]:
    from memdir import query as memdir_query

    state = common.build_store(n, args.seed, args.cache_dir)
    sql = common.search_sql()
    rows = []
    with common.open_memory(state) as memory:
        raw = raw_connection(state, memory.settings.busy_timeout_ms)
        try:
            for name, query in common.QUERIES:
                match = common.fts_match(query)
                node = memdir_query.parse_search(query)
                assert node is not None, query

                def ours(query: str = query) -> list[Any]:
                    return memory.search(query, limit=LIMIT, mode="lexical")

                def theirs(match: str = match) -> list[Any]:
                    return raw.execute(sql, (match, LIMIT)).fetchall()

                def store(node: Any = node) -> list[Any]:
                    # the store takes the parsed query and renders it as FTS5 itself
                    return memory.store.search_facts(node, None, None, LIMIT)

                if [hit.id for hit in ours()] != [row[0] for row in theirs()]:
                    raise SystemExit(f"{NAME}: {query!r}: memdir and the raw query disagree")
                calls = {"memdir": ours, "raw": theirs, "store": store}
                times = common.time_sides(calls, args.runs, WARMUP)
                mine, base = common.stats_ms(times["memdir"]), common.stats_ms(times["raw"])
                storage = common.stats_ms(times["store"])
                rows.append(
                    {
                        "facts": n,
                        "query": name,
                        "text": query,
                        "matches": common.match_count(state, match),
                        "memdir_p50_ms": mine["p50"],
                        "memdir_p95_ms": mine["p95"],
                        "raw_p50_ms": base["p50"],
                        "raw_p95_ms": base["p95"],
                        "ratio_p50": common.ratio(mine["p50"], base["p50"]),
                        "ratio_p95": common.ratio(mine["p95"], base["p95"]),
                        "overhead_p50_us": (mine["p50"] - base["p50"]) * 1000,
                        "store_p50_ms": storage["p50"],
                        "store_p95_ms": storage["p95"],
                        "store_overhead_p50_us": (storage["p50"] - base["p50"]) * 1000,
                    }
                )
                rows[-1]["ok"] = rows[-1]["ratio_p95"] <= TARGET
        finally:
            raw.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=common.sizes,
        default=[10_000, 100_000],
        help="store sizes, comma-separated (default 10k,100k)",
    )
    parser.add_argument("--runs", type=int, default=200, help="timed calls per query and side")
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        rows += bench_size(n, args)

    largest = max(args.sizes)
    at_largest = [r for r in rows if r["facts"] == largest]
    worst = max(at_largest, key=lambda r: r["ratio_p95"])
    summary: dict[str, Any] = {
        "target_ratio_p95": TARGET,
        "facts": largest,
        "worst_ratio_p95": worst["ratio_p95"],
        "worst_query": worst["query"],
        "median_ratio_p95": common.median([r["ratio_p95"] for r in at_largest]),
        "ok": all(r["ok"] for r in at_largest),
        "by_size": {
            str(n): {
                "worst_ratio_p95": max(r["ratio_p95"] for r in rows if r["facts"] == n),
                "median_overhead_p50_us": common.median(
                    [r["overhead_p50_us"] for r in rows if r["facts"] == n]
                ),
            }
            for n in args.sizes
        },
    }
    common.print_table(
        f"Memory.search vs the raw FTS5 query, in-process, {args.runs} calls each "
        f"(target p95 ≤ {TARGET}× at {largest:,})",
        [
            ("facts", "facts", ",d"),
            ("query", "query", ""),
            ("matches", "matches", ",d"),
            ("memdir_p50_ms", "memdir p50 ms", ".3f"),
            ("memdir_p95_ms", "memdir p95 ms", ".3f"),
            ("raw_p50_ms", "raw p50 ms", ".3f"),
            ("raw_p95_ms", "raw p95 ms", ".3f"),
            ("ratio_p50", "ratio p50", ".2f"),
            ("ratio_p95", "ratio p95", ".2f"),
            ("overhead_p50_us", "+µs p50", ".0f"),
            ("store_overhead_p50_us", "of which store +µs", ".0f"),
            ("ok", "p95 ≤ target", ""),
        ],
        rows,
    )
    params = {
        "sizes": args.sizes,
        "runs": args.runs,
        "warmup": WARMUP,
        "limit": LIMIT,
        "seed": args.seed,
    }
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
