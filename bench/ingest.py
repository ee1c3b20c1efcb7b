"""Memorize ingestion: `Memory.ingest` of a 1 MB agent output carrying 100 memorize blocks
(half global entries, half task notes), and the pure `memdir.markers.parse` alone, against
a plain regex pass that finds and removes the same blocks (the floor for scanning).

The output is prose from the corpus in paragraphs, with the blocks spread evenly between
them, on lines of their own: one JSON object each, some pretty-printed over several lines,
some inside a ```json fence. Before timing, the regex pass is checked to leave exactly the
text `parse` leaves, and `parse` to find every request.

Scan (pure, no store): parse, the regex floor and the regex floor plus json.loads of each
block (to tell scanning from decoding) take turns going first; at 1×, 2× and 4× the size
with as many times the blocks, so a cost that grows faster than the text shows as a
per-MB cost that grows with the size (the check here: ≤ 1.5× at the largest size).

Ingest (everything applied): each round ingests the output into a fresh empty store and
into a fresh copy of a store that already holds 1,000 entries (the recall benchmark's),
in turns; opening the store is outside the timing. docs/spec.md (Performance) sets no
target for ingestion.

    python bench/ingest.py [--mb 1] [--blocks 100] [--scales 1,2,4] [--runs 20]
                           [--rounds 5] [--store-entries 1000] [--profile]
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import common
from memdir import markers

NAME = "ingest"
TARGET_GROWTH = 1.5
WARMUP = 2
DEPTH = 5
PARAGRAPH_LINES = (3, 8)
BEGIN, END = "MEMDIR_MEMORIZE_BEGIN", "MEMDIR_MEMORIZE_END"
# Starts with a literal, so the engine jumps from one BEGIN to the next. The blocks here sit
# on lines of their own, where this removes exactly what parse removes (checked).
BLOCK_RE = re.compile(rf"{BEGIN}\n(.*?)\n{END}(?:\n|\Z)", re.DOTALL)
FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)


def make_output(size: int, blocks: int, seed: int) -> tuple[str, int, int]:
    """(text of about `size` characters with `blocks` memorize blocks, globals, notes).
    Even blocks are global entries, odd ones task notes; every 5th is fenced, every 7th
    pretty-printed."""
    rng = random.Random(seed + 5)
    facts = common.make_facts(size // 200 + 4 * blocks + 10, seed + 6)
    prose, extra = facts[: size // 200 + 10], facts[size // 200 + 10 :]
    texts = []
    for i in range(blocks):
        content = extra[4 * i][0]
        if i % 2 == 0:
            words = [w for w in dict.fromkeys(content.lower().rstrip(".").split()) if w.isalnum()]
            item: dict[str, Any] = {
                "scope": "global",
                "name": "-".join(["ingest", *sorted(words, key=len, reverse=True)[:2], f"{i:04d}"]),
                "description": " ".join(extra[4 * i + 1][0].split()[: rng.randint(8, 16)]),
                "content": "\n\n".join(f[0] for f in extra[4 * i : 4 * i + rng.randint(1, 3)]),
            }
        else:
            item = {"scope": "task", "content": content}
        body = json.dumps(item, indent=2 if i % 7 == 3 else None)
        if i % 5 == 2:
            body = f"```json\n{body}\n```"
        texts.append(f"{BEGIN}\n{body}\n{END}\n")
    parts: list[str] = []
    used = next_block = 0
    lines = iter(prose)
    while used < size or next_block < blocks:
        if next_block < blocks and used >= next_block * size // blocks + size // (2 * blocks):
            parts.append(texts[next_block])
            used += len(texts[next_block])
            next_block += 1
            continue
        paragraph = (
            "\n".join(
                next(lines, ("More output.", ""))[0] for _ in range(rng.randint(*PARAGRAPH_LINES))
            )
            + "\n\n"
        )
        parts.append(paragraph)
        used += len(paragraph)
    return "".join(parts), (blocks + 1) // 2, blocks // 2


def regex_floor(text: str) -> tuple[str, list[str]]:
    """Find every block, keep its body, remove it with its lines."""
    bodies: list[str] = []

    def take(match: re.Match[str]) -> str:
        bodies.append(match.group(1))
        return ""

    return BLOCK_RE.sub(take, text), bodies


def regex_json(text: str) -> tuple[str, list[Any]]:
    """The floor plus json.loads of each body (unfenced): scanning and decoding."""
    cleaned, bodies = regex_floor(text)
    decoded = []
    for body in bodies:
        body = body.strip()
        fenced = FENCE_RE.match(body)
        decoded.append(json.loads(fenced.group(1) if fenced else body))
    return cleaned, decoded


def scan(args: Any, scale: int, text: str, blocks: int) -> dict[str, Any]:
    parsed, (cleaned, bodies) = markers.parse(text), regex_floor(text)
    if parsed.warnings or len(parsed.requests) != blocks or len(bodies) != blocks:
        raise SystemExit(
            f"{NAME}: {len(parsed.requests)} requests, {len(bodies)} bodies and "
            f"{parsed.warnings[:3]} for {blocks} blocks"
        )
    if parsed.output != cleaned:
        raise SystemExit(f"{NAME}: parse and the regex floor leave different text")
    calls: dict[str, Callable[[], Any]] = {
        "parse": lambda: markers.parse(text),
        "regex": lambda: regex_floor(text),
        "regex_json": lambda: regex_json(text),
    }
    times = common.time_sides(calls, args.runs, WARMUP)
    ours, base = common.stats_ms(times["parse"]), common.stats_ms(times["regex"])
    decoded = common.stats_ms(times["regex_json"])
    mb = len(text.encode("utf-8")) / 1e6
    return {
        "kind": "scan",
        "case": f"markers.parse, {scale}×",
        "scale": scale,
        "mb": mb,
        "blocks": blocks,
        "memdir_p50_ms": ours["p50"],
        "memdir_p95_ms": ours["p95"],
        "baseline_p50_ms": base["p50"],
        "baseline_p95_ms": base["p95"],
        "regex_json_p50_ms": decoded["p50"],
        "ratio_p50": common.ratio(ours["p50"], base["p50"]),
        "mb_per_s": common.ratio(mb, ours["p50"] / 1000),
        "baseline_mb_per_s": common.ratio(mb, base["p50"] / 1000),
        "us_per_block": ours["p50"] * 1000 / blocks,
        "baseline_us_per_block": base["p50"] * 1000 / blocks,
        "ms_per_mb": ours["p50"] / mb,
        "baseline_ms_per_mb": base["p50"] / mb,
    }


def ingest(
    args: Any, text: str, blocks: int, store: str | None, scratch: str
) -> dict[str, list[float]]:
    """Rounds of Memory.ingest into a fresh empty store and a fresh copy of `store`."""
    deepest = common.lineage_ids(DEPTH)[-1]
    sides = ["empty"] + (["entries"] if store else [])
    times: dict[str, list[float]] = {side: [] for side in sides}
    for round_no in range(-1, args.rounds):  # round -1: untimed warm-up
        for side in common.rotate(round_no + 1, sides):
            where = os.path.join(scratch, f"{side}-{round_no}")
            if side == "entries":
                assert store is not None
                shutil.copytree(store, where)
            else:
                os.makedirs(where)
            with common.open_memory(where) as memory:
                memory.entries()  # open the database (creating it): not ingest's cost
                took, result = common.timed(
                    lambda m=memory: m.ingest(text, task=deepest, workflow="bench", step="ingest")
                )
            actions = [a.action for a in result.applied]
            if result.warnings or len(actions) != blocks or set(actions) - {"created", "noted"}:
                raise SystemExit(
                    f"{NAME}: ingest into the {side} store applied "
                    f"{len(actions)} of {blocks}: {result.warnings[:3]}"
                )
            shutil.rmtree(where)
            if round_no >= 0:
                times[side].append(took)
    return times


def profile(args: Any, text: str, store: str | None) -> str:
    """cProfile of args.runs parses of the 1× output and of one ingest of it (into a copy
    of the entry store if there is one). Not a target: where the time goes."""
    out = io.StringIO()

    def report(title: str, profiler: cProfile.Profile, sort: str) -> None:
        stats = io.StringIO()
        pstats.Stats(profiler, stream=stats).strip_dirs().sort_stats(sort).print_stats(25)
        out.write(f"\n### profile: {title}\n\n```\n{stats.getvalue().strip()}\n```\n")

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.runs):
        markers.parse(text)
    profiler.disable()
    report(f"{args.runs} × markers.parse", profiler, "tottime")
    with tempfile.TemporaryDirectory(prefix="memdir-bench-ingest-") as scratch:
        where = os.path.join(scratch, "store")
        if store:
            shutil.copytree(store, where)
        with common.open_memory(where) as memory:
            memory.entries()
            profiler = cProfile.Profile()
            profiler.enable()
            memory.ingest(text, task=common.lineage_ids(DEPTH)[-1], workflow="bench", step="ingest")
            profiler.disable()
    report("one Memory.ingest" + (" into the entry store" if store else ""), profiler, "cumulative")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1.0, help="output size in MB (default 1)")
    parser.add_argument("--blocks", type=int, default=100, help="memorize blocks in it")
    parser.add_argument(
        "--scales", default="1,2,4", help="size multiples the scan runs at (default 1,2,4)"
    )
    parser.add_argument("--runs", type=int, default=20, help="timed scans per side and size")
    parser.add_argument("--rounds", type=int, default=5, help="timed ingests per store")
    parser.add_argument(
        "--store-entries",
        type=common.sizes,
        default=[1000],
        help="entries in the second store ingested into (0: none)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then print cProfile stats of parse and of one ingest",
    )
    args = parser.parse_args(argv)
    scales = sorted({int(s) for s in args.scales.split(",")} | {1})
    size, store_entries = int(args.mb * 1e6), args.store_entries[0]

    rows = []
    outputs = {}
    for scale in scales:
        text, globals_, notes = make_output(size * scale, args.blocks * scale, args.seed)
        outputs[scale] = (text, globals_, notes)
        rows.append(scan(args, scale, text, args.blocks * scale))
    text, globals_, notes = outputs[1]
    mb = len(text.encode("utf-8")) / 1e6
    base = rows[0]

    store = None
    if store_entries:
        store, _build = common.build_entry_store(
            store_entries, store_entries // 2, DEPTH, args.seed, args.cache_dir
        )
    with tempfile.TemporaryDirectory(prefix="memdir-bench-ingest-") as scratch:
        times = ingest(args, text, args.blocks, store, scratch)
    labels = {
        "empty": "Memory.ingest, empty store",
        "entries": f"Memory.ingest, store of {store_entries:,} entries",
    }
    for side, seconds in times.items():
        ours = common.stats_ms(seconds)
        rows.append(
            {
                "kind": "ingest",
                "case": labels[side],
                "scale": 1,
                "mb": mb,
                "blocks": args.blocks,
                "globals": globals_,
                "notes": notes,
                "entries_before": store_entries if side == "entries" else 0,
                "memdir_p50_ms": ours["p50"],
                "memdir_p95_ms": ours["p95"],
                "memdir_max_ms": ours["max"],
                "baseline_p50_ms": base["baseline_p50_ms"],
                "parse_p50_ms": base["memdir_p50_ms"],
                "ratio_p50": common.ratio(ours["p50"], base["baseline_p50_ms"]),
                "mb_per_s": common.ratio(mb, ours["p50"] / 1000),
                "us_per_block": ours["p50"] * 1000 / args.blocks,
                "apply_ms_per_block": (ours["p50"] - base["memdir_p50_ms"]) / args.blocks,
            }
        )

    scans = [r for r in rows if r["kind"] == "scan"]
    ingests = {r["entries_before"]: r for r in rows if r["kind"] == "ingest"}
    growth = common.ratio(scans[-1]["ms_per_mb"], scans[0]["ms_per_mb"])
    floor_growth = common.ratio(scans[-1]["baseline_ms_per_mb"], scans[0]["baseline_ms_per_mb"])
    summary: dict[str, Any] = {
        "mb": mb,
        "blocks": args.blocks,
        "globals": globals_,
        "notes": notes,
        "parse_p50_ms": base["memdir_p50_ms"],
        "regex_p50_ms": base["baseline_p50_ms"],
        "regex_json_p50_ms": base["regex_json_p50_ms"],
        "parse_ratio": base["ratio_p50"],
        "parse_mb_per_s": base["mb_per_s"],
        "regex_mb_per_s": base["baseline_mb_per_s"],
        "parse_us_per_block": base["us_per_block"],
        "ingest_p50_ms": ingests[0]["memdir_p50_ms"],
        "ingest_ms_per_block": ingests[0]["us_per_block"] / 1000,
        "ingest_store_p50_ms": ingests[store_entries]["memdir_p50_ms"] if store else None,
        "ingest_store_ms_per_block": (
            ingests[store_entries]["us_per_block"] / 1000 if store else None
        ),
        "largest_scale": scales[-1],
        "target_growth": TARGET_GROWTH,
        "growth": growth,
        "floor_growth": floor_growth,
    }
    summary["ok"] = summary["linear_ok"] = bool(growth <= TARGET_GROWTH)

    common.print_table(
        f"scan: markers.parse vs a regex pass that finds and removes the blocks, "
        f"{args.runs} runs each (check: per-MB cost at {scales[-1]}× ≤ {TARGET_GROWTH}× "
        f"the 1× cost)",
        [
            ("case", "case", ""),
            ("mb", "MB", ".2f"),
            ("blocks", "blocks", ",d"),
            ("memdir_p50_ms", "parse p50 ms", ".2f"),
            ("memdir_p95_ms", "parse p95 ms", ".2f"),
            ("baseline_p50_ms", "regex p50 ms", ".2f"),
            ("regex_json_p50_ms", "regex+json p50 ms", ".2f"),
            ("ratio_p50", "parse/regex", ".1f"),
            ("mb_per_s", "parse MB/s", ",.0f"),
            ("baseline_mb_per_s", "regex MB/s", ",.0f"),
            ("us_per_block", "parse µs/block", ",.0f"),
            ("ms_per_mb", "parse ms/MB", ".2f"),
            ("baseline_ms_per_mb", "regex ms/MB", ".2f"),
        ],
        scans,
    )
    common.print_table(
        f"ingest: Memory.ingest of {mb:.2f} MB with {args.blocks} blocks ({globals_} global "
        f"entries, {notes} task notes), {args.rounds} rounds, everything applied",
        [
            ("case", "case", ""),
            ("memdir_p50_ms", "p50 ms", ",.1f"),
            ("memdir_p95_ms", "p95 ms", ",.1f"),
            ("memdir_max_ms", "max ms", ",.1f"),
            ("mb_per_s", "MB/s", ".2f"),
            ("us_per_block", "µs/block", ",.0f"),
            ("parse_p50_ms", "of which parse ms", ".2f"),
            ("apply_ms_per_block", "apply ms/block", ".2f"),
            ("baseline_p50_ms", "regex ms", ".2f"),
            ("ratio_p50", "ingest/regex", ",.0f"),
        ],
        [r for r in rows if r["kind"] == "ingest"],
    )
    params = {
        "mb": args.mb,
        "blocks": args.blocks,
        "scales": scales,
        "runs": args.runs,
        "warmup": WARMUP,
        "rounds": args.rounds,
        "store_entries": store_entries,
        "seed": args.seed,
    }
    if args.profile:
        print(profile(args, text, store), flush=True)
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
