"""One `memdir search QUERY` CLI call (the whole process, lexical) against a bare Python
process that opens the same database, runs the same FTS5 query and prints the rows.

Target (docs/spec.md, Performance): memdir ≤ 1.5× the bare process. Both run from this
venv's bin/ (never a pyenv shim), alternately, so machine load hits both sides alike; the
figure is the ratio of the median wall times. Before timing, each query's hits are checked
to be the same fact ids on both sides.

Bytecode is cached, as it is for an installed memdir: the children get PYTHONPYCACHEPREFIX
(under the cache dir) and never PYTHONDONTWRITEBYTECODE, which some environments set and
which would make every memdir call compile its modules from source again.

    python bench/search_cli.py [--facts 100000] [--runs 15]
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import Any

import common

NAME = "search_cli"
TARGET = 1.5
WARMUP = 2

BARE = """\
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute({sql!r}, (sys.argv[2], 10)).fetchall():
    print(f"fact #{{row[0]}} [{{row[1]}}] {{row[4]}}  score {{-row[-1]:g}}\\n  {{row[2]}}")
"""


def run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{NAME}: {argv[0]} exited {proc.returncode}: {proc.stderr.strip()}")
    return took, proc.stdout


def fact_ids(output: str) -> list[int]:
    return [int(m) for m in re.findall(r"^fact #(\d+) ", output, re.MULTILINE)]


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts", type=common.sizes, default=[100_000], help="facts in the store (default 100k)"
    )
    parser.add_argument("--runs", type=int, default=15, help="timed calls per query and side")
    args = parser.parse_args(argv)
    n = args.facts[0]
    state = common.build_store(n, args.seed, args.cache_dir)
    db = common.db_path(state)
    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")
    env = common.child_env(state, args.cache_dir)
    bare_script = BARE.format(sql=common.search_sql())

    sides: dict[str, dict[str, list[str]]] = {}
    rows: list[dict[str, Any]] = []
    for name, query in common.QUERIES:
        match = common.fts_match(query)
        sides[name] = {
            "memdir": [memdir, "search", "--mode", "lexical", query],
            "bare": [python, "-c", bare_script, db, match],
        }
        _, ours = run(sides[name]["memdir"], env)
        _, theirs = run(sides[name]["bare"], env)
        if fact_ids(ours) != fact_ids(theirs):
            raise SystemExit(
                f"{NAME}: {query!r}: memdir found {fact_ids(ours)}, "
                f"the bare query {fact_ids(theirs)}"
            )
        rows.append(
            {
                "query": name,
                "text": query,
                "match": match,
                "matches": common.match_count(state, match),
            }
        )
    floors = {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import sqlite3'": [python, "-c", "import sqlite3"],
    }

    times: dict[tuple[str, str], list[float]] = {}
    for run_no in range(WARMUP + args.runs):
        for name, argvs in sides.items():
            for side in common.alternate(run_no, ("memdir", "bare")):
                took, _ = run(argvs[side], env)
                if run_no >= WARMUP:
                    times.setdefault((name, side), []).append(took)
        for label, floor in floors.items():
            took, _ = run(floor, env)
            if run_no >= WARMUP:
                times.setdefault((label, "floor"), []).append(took)

    for row in rows:
        ours, bare = (common.stats_ms(times[(row["query"], s)]) for s in ("memdir", "bare"))
        row.update(
            memdir_ms=ours["p50"],
            bare_ms=bare["p50"],
            memdir_p95_ms=ours["p95"],
            bare_p95_ms=bare["p95"],
            ratio=common.ratio(ours["p50"], bare["p50"]),
        )
        row["ok"] = row["ratio"] <= TARGET
    floor_rows = [
        {"what": label, "ms": common.stats_ms(times[(label, "floor")])["p50"]} for label in floors
    ]

    worst = max(rows, key=lambda r: r["ratio"])
    summary = {
        "target_ratio": TARGET,
        "worst_ratio": worst["ratio"],
        "worst_query": worst["query"],
        "median_ratio": common.median([r["ratio"] for r in rows]),
        "memdir_ms": common.median([r["memdir_ms"] for r in rows]),
        "bare_ms": common.median([r["bare_ms"] for r in rows]),
        "floors_ms": {r["what"]: r["ms"] for r in floor_rows},
        "ok": all(r["ok"] for r in rows),
    }
    common.print_table(
        f"memdir search CLI vs a bare python+sqlite3 process, {n:,} facts, "
        f"median of {args.runs} runs (target ≤ {TARGET}×)",
        [
            ("query", "query", ""),
            ("text", "text", ""),
            ("matches", "matches", ",d"),
            ("memdir_ms", "memdir ms", ".1f"),
            ("bare_ms", "bare ms", ".1f"),
            ("ratio", "ratio", ".2f"),
            ("memdir_p95_ms", "memdir p95", ".1f"),
            ("bare_p95_ms", "bare p95", ".1f"),
            ("ok", "≤ target", ""),
        ],
        rows,
    )
    common.print_table(
        "process floors (same venv python)",
        [("what", "what", ""), ("ms", "median ms", ".1f")],
        floor_rows,
    )
    params = {
        "facts": n,
        "runs": args.runs,
        "warmup": WARMUP,
        "seed": args.seed,
        "memdir": memdir,
        "python": python,
        "pycache_prefix": env["PYTHONPYCACHEPREFIX"],
    }
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
