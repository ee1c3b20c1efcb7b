"""The first searches after an import (Q2): `memdir import` of N facts (a mem0
JSON export of the bench corpus) with and without embedding, then the first search on
each store in the default mode against a lexical search on the same store — as a whole
`memdir search` process, and in a fresh process's first `Memory.search` (interpreter start
left out). The sides run alternately, so machine load hits both alike.

In earlier versions the first searches after an import of 2,000 facts took 20, 8 and 4 s
(each embedded up to 256 items inline) and ranked differently each time. Now a search
embeds only its question; an item without a vector is ranked by its words. Checked, not
timed: consecutive searches on the same store answer the same ids in the same order.

    python bench/first_search.py [--facts 2000] [--runs 5]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import common

NAME = "first_search"
QUERY = "why does the socket timeout?"
IN_PROCESS = """\
import json, sys, time
from memdir import Memory
started = time.perf_counter()
memory = Memory()
hits = memory.search(sys.argv[1], mode=None if sys.argv[2] == "default" else sys.argv[2])
took = time.perf_counter() - started
print(json.dumps({"ms": took * 1000, "ids": [h.id for h in hits],
                  "note": memory.search_notice()}))
"""


def run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(
            f"{NAME}: {' '.join(argv[:3])} exited {proc.returncode}: {proc.stderr.strip()}"
        )
    return took, proc


def build(folder: str, source: str, embed: bool, cache_dir: str) -> tuple[str, float, str]:
    """A fresh store holding the import: (state dir, import seconds, import output)."""
    shutil.rmtree(folder, ignore_errors=True)
    state = os.path.join(folder, "state")
    os.makedirs(state)  # a named state dir must exist (L1)
    argv = [common.venv_bin("memdir"), "import", "--from", "mem0", source, "--json"]
    took, proc = run(argv + ([] if embed else ["--no-embed"]), common.child_env(state, cache_dir))
    return state, took, proc.stdout


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts", type=common.sizes, default=[2000], help="facts imported (default 2,000)"
    )
    parser.add_argument("--runs", type=int, default=5, help="timed searches per side")
    args = parser.parse_args(argv)
    n = args.facts[0]
    work = os.path.join(os.path.abspath(args.cache_dir), f"{NAME}-{n}")
    os.makedirs(work, exist_ok=True)
    source = os.path.join(work, "mem0.json")
    with open(source, "w", encoding="utf-8") as handle:
        json.dump(
            [
                {"memory": text, "id": str(i), "metadata": {"category": category}}
                for i, (text, category) in enumerate(common.make_facts(n, args.seed))
            ],
            handle,
        )

    imports: list[dict[str, Any]] = []
    stores: dict[str, str] = {}
    for label, embed in (("without embedding", False), ("with embedding", True)):
        state, took, output = build(
            os.path.join(work, label.replace(" ", "-")), source, embed, args.cache_dir
        )
        report = json.loads(output)
        stores["embedded" if embed else "not embedded"] = state
        imports.append(
            {
                "import": label,
                "facts": len(report["imported"]),
                "embedded": report["embedded"],
                "ms": took * 1000,
                "facts_per_s": len(report["imported"]) / took,
            }
        )

    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")
    rows: list[dict[str, Any]] = []
    stable = True
    for store, state in stores.items():
        env = common.child_env(state, args.cache_dir)
        sides = {
            "CLI default": [memdir, "search", QUERY, "--json"],
            "CLI lexical": [memdir, "search", QUERY, "--mode", "lexical", "--json"],
            "in-process default": [python, "-c", IN_PROCESS, QUERY, "default"],
            "in-process lexical": [python, "-c", IN_PROCESS, QUERY, "lexical"],
        }
        times: dict[str, list[float]] = {side: [] for side in sides}
        answers: dict[str, list[list[int]]] = {side: [] for side in sides}
        notes: dict[str, str] = {}
        for run_no in range(args.runs):
            for side in common.rotate(run_no, list(sides)):
                took, proc = run(sides[side], env)
                if side.startswith("CLI"):
                    ids = [hit.get("id") for hit in json.loads(proc.stdout)]
                    times[side].append(took)
                    notes[side] = proc.stderr.strip()
                else:
                    out = json.loads(proc.stdout)
                    ids = out["ids"]
                    times[side].append(out["ms"] / 1000)
                    notes[side] = out["note"] or ""
                answers[side].append(ids)
        for side in sides:
            same = all(ids == answers[side][0] for ids in answers[side])
            stable = stable and same
            figures = common.stats_ms(times[side])
            rows.append(
                {
                    "store": store,
                    "side": side,
                    "p50_ms": figures["p50"],
                    "p95_ms": figures["p95"],
                    "same_answer_each_run": same,
                    "hits": len(answers[side][0]),
                    "note": notes[side][:90],
                }
            )

    def p50(store: str, side: str) -> float:
        return next(r["p50_ms"] for r in rows if (r["store"], r["side"]) == (store, side))

    summary = {
        "facts": n,
        "import_ms": {row["import"]: row["ms"] for row in imports},
        "first_search_ms": {f"{r['store']}, {r['side']}": r["p50_ms"] for r in rows},
        "cli_default_over_lexical": {
            store: common.ratio(p50(store, "CLI default"), p50(store, "CLI lexical"))
            for store in stores
        },
        "stable": stable,
        "ok": stable,
    }
    common.print_table(
        f"memdir import of {n:,} facts (mem0 JSON), whole process",
        [
            ("import", "import", ""),
            ("facts", "facts", ",d"),
            ("embedded", "embedded", ",d"),
            ("ms", "ms", ",.0f"),
            ("facts_per_s", "facts/s", ",.0f"),
        ],
        imports,
    )
    common.print_table(
        f"first search after the import, median of {args.runs} fresh processes",
        [
            ("store", "store", ""),
            ("side", "side", ""),
            ("p50_ms", "p50 ms", ".0f"),
            ("p95_ms", "p95 ms", ".0f"),
            ("hits", "hits", "d"),
            ("same_answer_each_run", "same answer", ""),
            ("note", "note", ""),
        ],
        rows,
    )
    params = {"facts": n, "runs": args.runs, "seed": args.seed, "query": QUERY}
    common.write_result(NAME, args.out_dir, params, [*imports, *rows], summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
