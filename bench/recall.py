"""In-process `Memory.recall(task=...)` on a store of global entries and task notes, against
the floor of the same data: HOT.md, MEMORY.md and the lineage's note files read raw and
concatenated (no budget, no parsing, no staleness check, no database).

The store holds HOT.md, 1,000 global entries written one by one with Memory.write_entry
and 500 task notes (Memory.add_note) spread over a lineage of 5 tasks made with
Memory.start_task(parent=...); recall is asked for the deepest. Each write_entry rescans
global/ and regenerates MEMORY.md, so building it takes a while: it is built once into the
cache dir, and every run works on a copy (which keeps the files' mtimes, so the copy's entry
cache holds).

Steady state, the sides taking turns going first: one Memory reused for every call; a fresh
Memory per call (created, recall, closed: what a CLI call or a new step pays); the raw floor.
Before timing, the two memdir sides are checked to produce the same text.

Then the cache refresh paths, on the reused Memory, each beside the raw floor: the first
recall after a hand edit of one entry file (one frontmatter re-parsed, one cache row
rewritten), and the first recall after every entry file was touched (every frontmatter
re-parsed, every cache row rewritten), then the recall after that one.

Target (docs/spec.md, Performance): recall with 1,000 global entries and 500 task notes
≤ 5 ms, judged on the p95 of both steady-state memdir sides.

    python bench/recall.py [--entries 1000] [--notes 500] [--depth 5] [--runs 200]
                           [--edits 20] [--touches 5] [--profile]
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import common

NAME = "recall"
TARGET_P95_MS = 5.0
WARMUP = 5
DESCRIPTION_RE = re.compile(r"^description: .*$", re.MULTILINE)


def raw_paths(memory: Any, lineage: list[str]) -> list[str]:
    """What the floor reads: HOT.md, MEMORY.md, then the notes of the task and each ancestor."""
    layout = memory.layout
    return [layout.hot, layout.index_file, *(layout.task_notes(t) for t in lineage)]


def raw_floor(paths: list[str]) -> str:
    parts = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                parts.append(handle.read())
        except FileNotFoundError:
            continue
    return "\n\n".join(parts)


def entry_files(memory: Any) -> list[str]:
    folder = memory.layout.global_dir
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".md"))


def stale_entries(memory: Any) -> int:
    """How many entry files the entry cache does not describe as they are now."""
    cache = memory.store.entry_cache()
    stale = 0
    for path in entry_files(memory):
        info = os.stat(path)
        cached = cache.get(os.path.basename(path)[:-3])
        stale += cached is None or cached[:2] != (info.st_mtime_ns, info.st_size)
    return stale


def hand_edit(path: str, number: int) -> str:
    """Rewrite the file's description in place, as a user in an editor would; returns it."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    description = f"edited by hand, edit {number}"
    text, count = DESCRIPTION_RE.subn(f"description: {description}", text, count=1)
    if count != 1:
        raise SystemExit(f"{NAME}: no description line in {path}")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return description


def steady(
    args: Any, state: str, memory: Any, deepest: str, paths: list[str]
) -> tuple[dict[str, list[float]], Any]:
    fresh_recall: list[float] = []

    def reused() -> Any:
        return memory.recall(task=deepest, max_chars=args.budget)

    def fresh() -> Any:
        with common.open_memory(state) as other:
            took, result = common.timed(lambda: other.recall(task=deepest, max_chars=args.budget))
        fresh_recall.append(took)
        return result

    def raw() -> str:
        return raw_floor(paths)

    first = reused()
    if fresh().text != first.text:
        raise SystemExit(f"{NAME}: a fresh Memory and the reused one recall different text")
    fresh_recall.clear()
    calls: dict[str, Callable[[], Any]] = {"reused": reused, "fresh": fresh, "raw": raw}
    times = common.time_sides(calls, args.runs, WARMUP)
    times["fresh_recall"] = fresh_recall[WARMUP:]
    return times, first


def after_edits(args: Any, memory: Any, deepest: str, paths: list[str]) -> dict[str, list[float]]:
    files = entry_files(memory)
    times: dict[str, list[float]] = {"memdir": [], "raw": []}

    def recall() -> Any:
        return memory.recall(task=deepest, max_chars=args.budget)

    for number in range(args.edits):
        path = files[number * len(files) // args.edits]
        description = hand_edit(path, number)
        for side in common.alternate(number, ("memdir", "raw")):
            if side == "memdir":
                took, _ = common.timed(recall)
            else:
                took, _ = common.timed(raw_floor, paths)
            times[side].append(took)
        cached = memory.store.entry_cache().get(os.path.basename(path)[:-3])
        if cached is None or description not in cached[2]:
            raise SystemExit(f"{NAME}: the hand edit of {path} was not picked up")
    return times


def after_touches(args: Any, memory: Any, deepest: str, paths: list[str]) -> dict[str, list[float]]:
    files = entry_files(memory)
    times: dict[str, list[float]] = {"first": [], "second": [], "raw": []}

    def recall() -> Any:
        return memory.recall(task=deepest, max_chars=args.budget)

    for number in range(args.touches):
        stamp = time.time_ns() + number
        for path in files:
            os.utime(path, ns=(stamp, stamp))
        if stale_entries(memory) != len(files):
            raise SystemExit(f"{NAME}: touching the entry files did not make them stale")
        for side in common.alternate(number, ("memdir", "raw")):
            if side == "memdir":
                times["first"].append(common.timed(recall)[0])
                if stale_entries(memory):
                    raise SystemExit(f"{NAME}: a recall left entries stale")
                times["second"].append(common.timed(recall)[0])
            else:
                times["raw"].append(common.timed(raw_floor, paths)[0])
    return times


def profile(args: Any, memory: Any, deepest: str) -> tuple[list[dict[str, Any]], str]:
    """Where the time goes: each phase of recall timed alone (p50 of args.runs calls), then
    cProfile of the reused side and of one recall after a touch-all. Not a target."""
    from memdir import entries as memdir_entries
    from memdir import recall as memdir_recall
    from memdir import tasks
    from memdir.storage import frontmatter

    def chain() -> list[str]:
        return tasks.lineage({t.id: t for t in memory.store.all_tasks()}, deepest)

    listed = memdir_entries.index(memory.layout, memory.store)
    lineage = [(t, tasks.notes(memory.layout, t)) for t in chain()]
    hot, policy = memory.hot(), memdir_recall.Policy()
    budget = memory.settings.max_inject_chars if args.budget is None else args.budget
    files = entry_files(memory)
    texts = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            texts.append(handle.read())

    def yaml_c() -> None:
        import yaml

        for text in texts:
            raw, _body = frontmatter.split(text)
            yaml.load(raw, Loader=yaml.CSafeLoader)

    phases: list[tuple[str, Callable[[], Any]]] = [
        (
            "Memory.recall, reused (the whole call)",
            lambda: memory.recall(task=deepest, max_chars=args.budget),
        ),
        ("  hot(): read HOT.md", memory.hot),
        (
            "  entries.index(): list and stat global/, read the cache",
            lambda: memdir_entries.index(memory.layout, memory.store),
        ),
        ("    of which store.entry_cache(): the SELECT", memory.store.entry_cache),
        (
            "    of which os.listdir + os.stat of every entry file",
            lambda: [os.stat(p) for p in entry_files(memory)],
        ),
        ("  the lineage: store.all_tasks() + tasks.lineage", chain),
        (
            "  read and parse the lineage's note files",
            lambda: [tasks.notes(memory.layout, t) for t, _ in lineage],
        ),
        (
            "  recall.build: defang, sort, budget, render",
            lambda: memdir_recall.build(hot, memory.path, listed, lineage, budget, policy),
        ),
        (
            f"(touch-all path) frontmatter.parse of all {len(texts):,} entries (yaml.safe_load)",
            lambda: [frontmatter.parse(t, "x") for t in texts],
        ),
        ("(touch-all path) the same with yaml.CSafeLoader (libyaml)", yaml_c),
    ]
    rows = []
    for label, call in phases:
        runs = args.runs if not label.startswith("(touch") else max(1, args.runs // 20)
        call()
        rows.append(
            {
                "phase": label,
                "calls": runs,
                "p50_ms": common.stats_ms([common.timed(call)[0] for _ in range(runs)])["p50"],
            }
        )

    out = io.StringIO()

    def report(title: str, profiler: cProfile.Profile) -> None:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(20)
        out.write(f"\n### profile: {title}\n\n```\n{text.getvalue().strip()}\n```\n")

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.runs):
        memory.recall(task=deepest, max_chars=args.budget)
    profiler.disable()
    report(f"{args.runs} recalls on a reused Memory", profiler)
    stamp = time.time_ns()
    for path in files:
        os.utime(path, ns=(stamp, stamp))
    profiler = cProfile.Profile()
    profiler.enable()
    memory.recall(task=deepest, max_chars=args.budget)
    profiler.disable()
    report("the first recall after touching every entry file", profiler)
    return rows, out.getvalue()


def row(case: str, mine: list[float], base: list[float], judged: bool) -> dict[str, Any]:
    ours, theirs = common.stats_ms(mine), common.stats_ms(base)
    result = {
        "case": case,
        "calls": ours["n"],
        "memdir_p50_ms": ours["p50"],
        "memdir_p95_ms": ours["p95"],
        "memdir_max_ms": ours["max"],
        "raw_p50_ms": theirs["p50"],
        "raw_p95_ms": theirs["p95"],
        "ratio_p50": common.ratio(ours["p50"], theirs["p50"]),
        "ratio_p95": common.ratio(ours["p95"], theirs["p95"]),
        "ok": ours["p95"] <= TARGET_P95_MS if judged else None,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--entries",
        type=common.sizes,
        default=[1000],
        help="global entries in the store (default 1000)",
    )
    parser.add_argument(
        "--notes",
        type=common.sizes,
        default=[500],
        help="task notes over the lineage (default 500)",
    )
    parser.add_argument("--depth", type=int, default=5, help="tasks in the lineage (default 5)")
    parser.add_argument("--runs", type=int, default=200, help="timed calls per steady side")
    parser.add_argument("--edits", type=int, default=20, help="hand edits, one recall after each")
    parser.add_argument(
        "--touches",
        type=int,
        default=5,
        help="times every entry file is touched, one recall after each",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="max_chars (default: the setting, memory.max_inject_chars)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then print cProfile stats of the reused side and a touch-all",
    )
    args = parser.parse_args(argv)
    n_entries, n_notes = args.entries[0], args.notes[0]
    state, build = common.build_entry_store(
        n_entries, n_notes, args.depth, args.seed, args.cache_dir
    )
    lineage = list(reversed(common.lineage_ids(args.depth)))  # deepest first
    deepest = lineage[0]

    with tempfile.TemporaryDirectory(prefix="memdir-bench-recall-") as scratch:
        copy = os.path.join(scratch, "store")
        shutil.copytree(state, copy)
        with common.open_memory(copy) as memory:
            stale_after_copy = stale_entries(memory)
            paths = raw_paths(memory, lineage)
            budget = memory.settings.max_inject_chars if args.budget is None else args.budget
            hot_chars = len(memory.hot())
            times, recalled = steady(args, copy, memory, deepest, paths)
            floor_chars = len(raw_floor(paths))
            edits = after_edits(args, memory, deepest, paths)
            touches = after_touches(args, memory, deepest, paths)
            phases, profiles = profile(args, memory, deepest) if args.profile else ([], "")

    rows = [
        row("steady, one reused Memory", times["reused"], times["raw"], True),
        row("steady, a fresh Memory per call", times["fresh"], times["raw"], True),
        row("  of which the recall call", times["fresh_recall"], times["raw"], False),
        row("first recall after a hand edit of 1 entry", edits["memdir"], edits["raw"], False),
        row(
            f"first recall after touching all {n_entries:,} entries",
            touches["first"],
            touches["raw"],
            False,
        ),
        row("  the recall after that", touches["second"], touches["raw"], False),
    ]
    output = {
        "budget": budget,
        "chars": len(recalled.text),
        "hot_chars": hot_chars,
        "floor_chars": floor_chars,
        "entries_shown": recalled.entries_shown,
        "entries_total": recalled.entries_total,
        "notes_shown": recalled.notes_shown,
        "notes_total": recalled.notes_total,
    }
    summary: dict[str, Any] = {
        "target_p95_ms": TARGET_P95_MS,
        "entries": n_entries,
        "notes": n_notes,
        "depth": args.depth,
        "reused_p50_ms": rows[0]["memdir_p50_ms"],
        "reused_p95_ms": rows[0]["memdir_p95_ms"],
        "fresh_p50_ms": rows[1]["memdir_p50_ms"],
        "fresh_p95_ms": rows[1]["memdir_p95_ms"],
        "raw_p50_ms": rows[0]["raw_p50_ms"],
        "raw_p95_ms": rows[0]["raw_p95_ms"],
        "ratio_p50": rows[0]["ratio_p50"],
        "ratio_p95": rows[0]["ratio_p95"],
        "edit_first_p50_ms": rows[3]["memdir_p50_ms"],
        "edit_first_max_ms": rows[3]["memdir_max_ms"],
        "touch_all_first_p50_ms": rows[4]["memdir_p50_ms"],
        "touch_all_first_max_ms": rows[4]["memdir_max_ms"],
        "output": output,
        "build": build,
        "stale_after_copy": stale_after_copy,
        "ok": bool(rows[0]["ok"] and rows[1]["ok"]),
    }

    common.print_table(
        f"Memory.recall(task=<deepest of {args.depth}>), {n_entries:,} entries and {n_notes:,} "
        f"notes, vs the raw floor (HOT.md + MEMORY.md + {args.depth} note files read and "
        f"joined), ms (target p95 ≤ {TARGET_P95_MS:g})",
        [
            ("case", "case", ""),
            ("calls", "calls", ",d"),
            ("memdir_p50_ms", "memdir p50", ".2f"),
            ("memdir_p95_ms", "memdir p95", ".2f"),
            ("memdir_max_ms", "memdir max", ".2f"),
            ("raw_p50_ms", "raw p50", ".3f"),
            ("raw_p95_ms", "raw p95", ".3f"),
            ("ratio_p50", "ratio p50", ",.1f"),
            ("ratio_p95", "ratio p95", ",.1f"),
            ("ok", "p95 ≤ target", ""),
        ],
        rows,
    )
    common.print_table(
        f"what recall shows under a budget of {budget:,} characters (HOT.md is outside it)",
        [
            ("chars", "chars out", ",d"),
            ("hot_chars", "of which HOT.md", ",d"),
            ("floor_chars", "raw floor chars", ",d"),
            ("entries_shown", "entries shown", ",d"),
            ("entries_total", "of", ",d"),
            ("notes_shown", "notes shown", ",d"),
            ("notes_total", "of", ",d"),
        ],
        [output],
    )
    if args.profile:
        common.print_table(
            "where recall's time goes: each phase alone, p50 ms (--profile)",
            [("phase", "phase", ""), ("calls", "calls", ",d"), ("p50_ms", "p50 ms", ".3f")],
            phases,
        )
        print(profiles, flush=True)
        summary["phases"] = phases
    how = "cached: built earlier" if build["cached"] else "built now"
    print(
        f"store ({how}): {build['seconds']:.1f} s to build, of which "
        f"{build['entries_seconds']:.1f} s for {n_entries:,} write_entry calls "
        f"({build['write_entry_first_tenth_ms']:.1f} ms each over the first tenth, "
        f"{build['write_entry_last_tenth_ms']:.1f} ms over the last); "
        f"{stale_after_copy} entries stale after copying it",
        flush=True,
    )
    params = {
        "entries": n_entries,
        "notes": n_notes,
        "depth": args.depth,
        "runs": args.runs,
        "warmup": WARMUP,
        "edits": args.edits,
        "touches": args.touches,
        "budget": budget,
        "seed": args.seed,
    }
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
