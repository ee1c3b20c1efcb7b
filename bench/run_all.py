"""Run every benchmark at its default sizes (--quick: tiny ones), print each table, and write
<out-dir>/summary.json with each script's headline figures against its target.

Each script runs in its own process, one after the other, so none measures another's
leftovers. Stores are built once into the cache dir and reused by the scripts that share a
size. A missed target is reported, not an error: the exit code is non-zero only when a
script fails. A headline without a target (a figure reported for information) has an empty
"met" cell and does not count towards all_targets_met.

    python bench/run_all.py [--quick] [--only search_cli,insert]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import common

# name -> (default arguments, --quick arguments)
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "search_cli": ([], ["--facts", "2000", "--runs", "3"]),
    "search_inprocess": ([], ["--sizes", "1000,2000", "--runs", "20"]),
    "search_bounded": ([], ["--sizes", "2000", "--questions", "20", "--runs", "2"]),
    "insert": ([], ["--facts", "2000", "--rounds", "1", "--single", "50", "--single-base", "1000"]),
    "recall": (
        [],
        ["--entries", "200", "--notes", "100", "--runs", "20", "--edits", "3", "--touches", "1"],
    ),
    "ingest": (
        [],
        [
            "--mb",
            "0.2",
            "--blocks",
            "20",
            "--scales",
            "1,2",
            "--runs",
            "5",
            "--rounds",
            "1",
            "--store-entries",
            "200",
        ],
    ),
    "boot": ([], ["--days", "10", "--entries", "50", "--runs", "5"]),
    "hooks": ([], ["--days", "10", "--entries", "50", "--runs", "5"]),
    "uprompt": ([], ["--facts", "2000", "--runs", "3", "--inprocess-runs", "20"]),
    "search_scale": (
        [],
        [
            "--facts",
            "1000",
            "--chunks",
            "300",
            "--index-chunks",
            "100",
            "--runs",
            "20",
            "--hybrid-runs",
            "10",
            "--cli-runs",
            "3",
        ],
    ),
    "scale": (
        [],
        [
            "--facts",
            "1000,2000",
            "--chunks",
            "300",
            "--runs",
            "3",
            "--mcp-runs",
            "1",
            "--pool",
            "256",
        ],
    ),
    "hybrid_sessions": (
        [],
        ["--facts", "2000", "--chunks", "300", "--runs", "5", "--pool", "256"],
    ),
    "stress": ([], ["--procs", "3", "--seconds", "3", "--readers", "1"]),
    "faults": ([], ["--kills", "10"]),
    "secrets_fp": ([], ["--code-lines", "2000", "--package-lines", "2000", "--samples", "2"]),
    "secrets_recall": ([], ["--samples", "50", "--seeds", "1"]),
    "doctor": ([], ["--facts", "2000", "--entries", "20", "--notes", "10", "--runs", "3"]),
    "ui": ([], ["--facts", "1000", "--starts", "1", "--runs", "3"]),
    "duplicates": ([], ["--facts", "2000", "--exact", "50", "--near", "80", "--distinct", "50"]),
    "first_search": ([], ["--facts", "300", "--runs", "2"]),
    "models": ([], ["--facts", "300", "--runs", "4"]),
    "cold": (
        [],
        [
            "--facts",
            "2000",
            "--entries",
            "200",
            "--notes",
            "100",
            "--boot-entries",
            "50",
            "--days",
            "10",
            "--runs",
            "3",
        ],
    ),
}


def headline(name: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures each target is judged on, as table rows."""
    if name == "models":  # for information: what each model costs (Q2)
        return [
            {
                "bench": name,
                "figure": f"{model}: re-embed items/s after a change of model, "
                f"question p50 {row['question_p50_ms']:.1f} ms",
                "value": row["reindex_per_s"],
                "target": "",
                "ok": None,
            }
            for model, row in summary["by_model"].items()
        ]
    if name == "ui":
        return [
            {
                "bench": name,
                "figure": "`memdir ui` spawn to ready (address printed, listening), p50 ms"
                f" (first page {summary['first_page_p50_ms']:.0f} ms)",
                "value": summary["ready_p50_ms"],
                "target": f"< {summary['ready_target_ms']}",
                "ok": summary["ok"],
            }
        ]
    if name == "search_cli":
        return [
            {
                "bench": name,
                "figure": "memdir / bare, median wall (worst query)",
                "value": summary["worst_ratio"],
                "target": f"≤ {summary['target_ratio']}",
                "ok": summary["ok"],
            }
        ]
    if name == "cold":
        targets = summary["targets"]
        return [
            {
                "bench": name,
                "figure": f"`memdir {what}` / {floor}, median wall",
                "value": summary[key],
                "target": f"≤ {targets[target]:g}",
                "ok": summary[key] <= targets[target],
            }
            for what, floor, key, target in (
                (
                    "search --mode lexical",
                    "bare FTS5 process (worst query)",
                    "search_worst_ratio_p50",
                    "search",
                ),
                ("recall --task", "bare read", "recall_ratio_p50", "recall"),
                ("boot", "bare read", "boot_ratio_p50", "boot"),
                ("hook SessionStart", "bare read", "session_start_ratio_p50", "SessionStart"),
            )
        ]
    if name == "search_inprocess":
        return [
            {
                "bench": name,
                "figure": f"memdir / raw p95 at {summary['facts']:,} (worst query)",
                "value": summary["worst_ratio_p95"],
                "target": f"≤ {summary['target_ratio_p95']}",
                "ok": summary["ok"],
            }
        ]
    if name == "search_bounded":
        return [
            {
                "bench": name,
                "figure": f"bounded lexical p95 ms, plain questions, {summary['facts']:,} facts"
                f" (full ranking {summary['full_p95_ms']:.0f} ms)",
                "value": summary["bounded_p95_ms"],
                "target": f"≤ {summary['target_p95_ms']:g}",
                "ok": summary["ok"],
            },
            {
                "bench": name,
                "figure": "top-10 overlap with full ranking (share identical "
                f"{summary['identical_share']:.3f})",
                "value": summary["mean_overlap"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "insert":
        single = summary["single"]
        return [
            {
                "bench": name,
                "figure": "add_facts / raw FTS5 insert rate",
                "value": summary["ratio"],
                "target": f"≥ {summary['target_ratio']}",
                "ok": summary["bulk_ok"],
            },
            {
                "bench": name,
                "figure": "add_fact p95 ms",
                "value": single["memdir_p95_ms"],
                "target": f"≤ {summary['target_single_p95_ms']:g}",
                "ok": single["ok"],
            },
        ]
    if name == "recall":
        size = f"{summary['entries']:,} entries, {summary['notes']:,} notes"
        target = f"≤ {summary['target_p95_ms']:g}"
        return [
            {
                "bench": name,
                "figure": f"recall p95 ms, one reused Memory ({size})",
                "value": summary["reused_p95_ms"],
                "target": target,
                "ok": summary["reused_p95_ms"] <= summary["target_p95_ms"],
            },
            {
                "bench": name,
                "figure": f"recall p95 ms, a fresh Memory per call ({size})",
                "value": summary["fresh_p95_ms"],
                "target": target,
                "ok": summary["fresh_p95_ms"] <= summary["target_p95_ms"],
            },
            {
                "bench": name,
                "figure": "recall / raw read of the same files, p50",
                "value": summary["ratio_p50"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "ingest":
        size = f"{summary['mb']:.2f} MB, {summary['blocks']} blocks"
        return [
            {
                "bench": name,
                "figure": f"Memory.ingest ms, empty store ({size})",
                "value": summary["ingest_p50_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "markers.parse / regex floor, p50",
                "value": summary["parse_ratio"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"parse ms per MB at {summary['largest_scale']}× size / at 1×",
                "value": summary["growth"],
                "target": f"≤ {summary['target_growth']:g} (linear)",
                "ok": summary["linear_ok"],
            },
        ]
    if name == "boot":
        size = f"{summary['entries']:,} entries, {summary['days']} daily logs"
        return [
            {
                "bench": name,
                "figure": f"memdir boot p50 ms, whole process ({size})",
                "value": summary["boot_p50_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"memdir boot p95 ms, whole process ({size})",
                "value": summary["boot_p95_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "memdir boot / bare read of the same files, median wall",
                "value": summary["ratio_p50"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "hooks":
        size = f"{summary['entries']:,} entries, {summary['days']} daily logs, full HOT.md"
        return [
            {
                "bench": name,
                "figure": f"memdir hook SessionStart p50 ms, whole process ({size})",
                "value": summary["session_start_p50_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"memdir hook SessionStart p95 ms, whole process ({size})",
                "value": summary["session_start_p95_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "memdir hook SessionStart / bare read of the same files, median wall",
                "value": summary["session_start_ratio_p50"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "memdir hook SubagentStart p50 ms, whole process",
                "value": summary["subagent_start_p50_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "memdir hook PreToolUse (subagent write, denied) p50 ms",
                "value": summary["pre_tool_use_p50_ms"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "uprompt":
        size = f"{summary['facts']:,} facts"
        return [
            {
                "bench": name,
                "figure": f"memdir hook UserPromptSubmit p50 ms, whole process ({size})",
                "value": summary["hook_p50_ms"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"memdir hook UserPromptSubmit p95 ms, whole process ({size})",
                "value": summary["hook_p95_ms"],
                "target": f"< {summary['prompt_timeout_ms']} ([hooks] prompt_timeout_ms)",
                "ok": summary["hook_worst_p95_ms"] < summary["prompt_timeout_ms"],
            },
            {
                "bench": name,
                "figure": "memdir hook UserPromptSubmit / bare FTS5 process, median wall",
                "value": summary["hook_ratio_p50"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"UserPromptSubmit in-process p95 ms ({size})",
                "value": summary["inprocess_p95_ms"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "stress":
        return [
            {
                "bench": name,
                "figure": "stress: acknowledged writes/s (all writers)",
                "value": summary["writes_per_s"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "stress: acknowledged writes lost",
                "value": summary["lost"],
                "target": "0",
                "ok": summary["lost"] == 0 and summary["ok"],
            },
        ]
    if name == "faults":
        return [
            {
                "bench": name,
                "figure": "crash harness: acknowledged writes lost after kills",
                "value": summary.get("lost", 0),
                "target": "0",
                "ok": summary.get("ok"),
            }
        ]
    if name == "secrets_fp":
        return [
            {
                "bench": name,
                "figure": "secret scanner false-positive rate (clean text)",
                "value": summary["false_positive_rate"],
                "target": "",
                "ok": None,
            }
        ]
    if name == "secrets_recall":
        return [
            {
                "bench": name,
                "figure": f"secret scanner misses ({summary['samples']:,} fresh credentials)",
                "value": summary["missed"],
                "target": "0",
                "ok": summary["missed"] == 0,
            }
        ]
    if name == "doctor":
        return [
            {
                "bench": name,
                "figure": f"memdir doctor p50 ms, whole process ({summary['facts']:,} facts)",
                "value": summary["cli_p50_ms"],
                "target": "",
                "ok": None,
            }
        ]
    if name == "duplicates":
        size = f"{summary['facts']:,} facts"
        return [
            {
                "bench": name,
                "figure": f"duplicate guard precision ({size})",
                "value": summary["precision"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"duplicate guard recall ({size})",
                "value": summary["recall"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "add_fact p95 ms with the guard",
                "value": summary["add_fact_ms"]["p95"],
                "target": "≤ 5",
                "ok": summary["add_fact_ms"]["p95"] <= 5,
            },
        ]
    if name == "first_search":
        size = f"{summary['facts']:,} facts"
        first = summary["first_search_ms"]
        return [
            {
                "bench": name,
                "figure": f"import ms with embedding ({size})",
                "value": summary["import_ms"]["with embedding"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"import ms without embedding ({size})",
                "value": summary["import_ms"]["without embedding"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "first memdir search ms after a --no-embed import",
                "value": first["not embedded, CLI default"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "the same search, lexical",
                "value": first["not embedded, CLI lexical"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": "consecutive searches answer the same",
                "value": summary["stable"],
                "target": "yes",
                "ok": summary["stable"],
            },
        ]
    if name == "search_scale":
        size = f"{summary['facts']:,} facts + {summary['chunks']:,} chunks"
        targets, met = summary["targets"], summary["met"]
        return [
            {
                "bench": name,
                "figure": "reindex chunks/s with embeddings (fresh store)",
                "value": summary["index_chunks_per_s"],
                "target": f"≥ {targets['chunks_per_s']:g}",
                "ok": met["index"],
            },
            {
                "bench": name,
                "figure": f"lexical search / raw FTS5 p95 ({size}, worst query)",
                "value": summary["lexical_worst_ratio_p95"],
                "target": f"≤ {targets['lexical_ratio_p95']:g}",
                "ok": met["lexical"],
            },
            {
                "bench": name,
                "figure": "the same without the per-search index sync",
                "value": summary["lexical_no_sync_worst_ratio_p95"],
                "target": "",
                "ok": None,
            },
            {
                "bench": name,
                "figure": f"hybrid search p95 ms, warm ({size}, worst query)",
                "value": summary["hybrid_worst_p95_ms"],
                "target": f"≤ {targets['hybrid_p95_ms']:g}",
                "ok": met["hybrid"],
            },
            {
                "bench": name,
                "figure": "`memdir search --mode hybrid` p50 ms, whole process",
                "value": summary["cli_hybrid_p50_ms"],
                "target": f"≤ {targets['cli_hybrid_p50_ms']:g}",
                "ok": met["cli_hybrid"],
            },
        ]
    if name == "hybrid_sessions":
        store = summary["store"]
        size = f"{store['facts']:,} facts in {store['sessions']:,} sessions"
        size += f" + {store['chunks']:,} chunks"
        return [
            {
                "bench": name,
                "figure": f"hybrid p95, this checkout / {summary['before']} ({size})",
                "value": summary["hybrid_ratio_p95"],
                "target": f"≤ {summary['target_ratio_p95']:g}",
                "ok": summary["hybrid_ratio_p95"] <= summary["target_ratio_p95"],
            },
            {
                "bench": name,
                "figure": f"lexical p95, this checkout / {summary['before']}",
                "value": summary["lexical_ratio_p95"],
                "target": "",
                "ok": None,
            },
        ]
    if name == "scale":  # a curve: figures without targets
        return [
            {
                "bench": name,
                "figure": f"{what}, {row['facts']:,} facts + {row['chunks']:,} chunks",
                "value": row[key],
                "target": "",
                "ok": None,
            }
            for row in summary["curve"]
            for what, key in (
                ("hybrid p95 ms (questions)", "hybrid_p95_ms"),
                ("server RSS MiB after searches", "rss_mib"),
            )
        ]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--only", help="comma-separated script names (default: all)")
    parser.add_argument("--seed", type=int, default=common.DEFAULT_SEED)
    parser.add_argument("--out-dir", default=common.RESULTS_DIR)
    parser.add_argument("--cache-dir", default=common.CACHE_DIR)
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(SCRIPTS)
    unknown = sorted(set(names) - set(SCRIPTS))
    if unknown:
        parser.error(f"unknown script(s) {', '.join(unknown)}: choose from {', '.join(SCRIPTS)}")

    results: dict[str, Any] = {}
    failed = []
    for name in names:
        default, quick = SCRIPTS[name]
        command = [
            sys.executable,
            os.path.join(common.BENCH_DIR, f"{name}.py"),
            *(quick if args.quick else default),
            "--seed",
            str(args.seed),
            "--out-dir",
            args.out_dir,
            "--cache-dir",
            args.cache_dir,
        ]
        print(f"\n## {name}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(command)
        took = time.perf_counter() - started
        path = os.path.join(args.out_dir, f"{name}.json")
        if code != 0 or not os.path.exists(path):
            failed.append(name)
            results[name] = {"exit_code": code, "seconds": took}
            continue
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        results[name] = {
            "exit_code": code,
            "seconds": took,
            "params": data["params"],
            "summary": data["summary"],
        }

    rows = [
        row
        for name in names
        if "summary" in results[name]
        for row in headline(name, results[name]["summary"])
    ]
    common.print_table(
        "summary",
        [
            ("bench", "bench", ""),
            ("figure", "figure", ""),
            ("value", "value", ".2f"),
            ("target", "target", ""),
            ("ok", "met", ""),
        ],
        rows,
    )
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    judged = [r["ok"] for r in rows if r["ok"] is not None]
    summary = {
        "quick": args.quick,
        "failed": failed,
        "all_targets_met": all(judged),
        "headlines": rows,
        "scripts": results,
    }
    common.write_result(
        "summary", args.out_dir, {"quick": args.quick, "scripts": names}, rows, summary
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
