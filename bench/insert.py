"""Fact inserts: bulk (Memory.add_facts) against a raw FTS5 insert, and one fact per call.

Bulk: the same facts go into a fresh memdir store through Memory.add_facts in batches, and
into a fresh bare database (a table, an external-content FTS5 table with the same tokenizer
and an insert trigger, WAL) through executemany in one transaction, and, to tell where a
gap comes from, raw into memdir's own schema, and raw into that schema with the duplicate
guard's band-key rows (computed before the clock starts); the sides take turns going first.
Each rate includes opening, creating the schema and closing. Target (docs/spec.md, Performance):
memdir ≥ 0.8× the raw rate, judged on the median of the rounds' ratios. The band keys of
a large import are indexed after it, in the background, by the duplicate guard's worker
(N1): the seconds that took are reported beside, and waited for before the next side
starts. `--without-numpy` runs this process as a lexical-only install would (numpy hidden; the
worker, a process of its own, still has it: its seconds are those of an install with numpy).

One fact per call: Memory.add_fact into a store that already holds some facts, alternating
with a raw one-row transaction (BEGIN IMMEDIATE, synchronous FULL, as memdir writes) into a
bare database holding the same facts. Target: memdir p95 ≤ 5 ms.

    python bench/insert.py [--facts 100000] [--rounds 3] [--single 1000] [--single-base 10000]
                           [--without-numpy]
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import common
from memdir import similarity
from memdir.storage.sqlite.migrations import migrate  # imports memdir whole, before any timing

NAME = "insert"
TARGET_RATIO = 0.8
TARGET_SINGLE_P95_MS = 5.0
WARMUP_FACTS = 200
SETTLE_WAIT = 600.0  # seconds the guard's worker may take to index an import's keys
TOKENIZER = "porter unicode61 remove_diacritics 2"
RAW_SCHEMA = f"""
CREATE TABLE facts (id INTEGER PRIMARY KEY, category TEXT NOT NULL, content TEXT NOT NULL);
CREATE VIRTUAL TABLE facts_fts USING fts5(
    content, content='facts', content_rowid='id', tokenize='{TOKENIZER}'
);
CREATE TRIGGER facts_ai AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts(rowid, content) VALUES (new.id, new.content);
END;
"""
RAW_INSERT = "INSERT INTO facts (category, content) VALUES (?, ?)"


def raw_open(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")  # SQLite's default, and what memdir sets
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'facts'").fetchone():
        db.executescript(RAW_SCHEMA)
    return db


def raw_bulk(path: str, facts: Sequence[tuple[str, str]]) -> float:
    started = time.perf_counter()
    db = raw_open(path)
    db.execute("BEGIN")
    db.executemany(RAW_INSERT, ((category, content) for content, category in facts))
    db.execute("COMMIT")
    db.close()
    return time.perf_counter() - started


def schema_bulk(path: str, facts: Sequence[tuple[str, str]], sketch: str | None = None) -> float:
    """Not a target, a diagnosis: the raw insert into memdir's own schema (its migrations:
    wider rows, two more indexes, the trigger's WHEN), with the columns memdir fills, so the
    gap splits into what the schema costs and what the Python layer costs. `sketch`: the
    facts' band keys as the flat JSON array memdir's bulk import hands SQLite (BANDS a
    fact, computed before the clock started), inserted with the same statement: what the
    duplicate guard's 16 rows a fact cost SQLite alone."""
    started = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    migrate(db)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO facts (category, content, created, updated, supersedes, session_id, "
        "surface, agent) VALUES (?, ?, ?, ?, NULL, NULL, 'cli', NULL)",
        ((category, content, now, now) for content, category in facts),
    )
    if sketch is not None:
        db.execute(
            "INSERT OR IGNORE INTO fact_sketch (key, fact_id) "
            "SELECT value, 1 + key / ? FROM json_each(?) WHERE value IS NOT NULL ORDER BY 1, 2",
            (similarity.BANDS, sketch),
        )
    db.execute("COMMIT")
    db.close()
    return time.perf_counter() - started


def band_keys_json(facts: Sequence[tuple[str, str]]) -> str:
    flat: list[int | None] = []
    for keys in similarity.sketches([content for content, _ in facts]):
        flat += keys or [None] * similarity.BANDS
    return json.dumps(flat)


def memdir_bulk(state: str, facts: Sequence[tuple[str, str]], batch: int) -> tuple[float, float]:
    """(the import's seconds, the seconds after it until the guard's worker had indexed
    every band key the import left for later): the second is not on the import's clock,
    but it is waited for before the next side starts, so it never runs beside another
    side's timing."""
    started = time.perf_counter()
    with common.open_memory(state) as memory:
        common.add_all(memory, facts, batch)
    took = time.perf_counter() - started
    with common.open_memory(state) as memory:
        while memory.settle_imported(0):
            if time.perf_counter() - started - took > SETTLE_WAIT:
                raise SystemExit(
                    f"the guard's worker did not index the keys: see {state}/worker/log"
                )
            time.sleep(0.01)
    return took, time.perf_counter() - started - took


SIDES = ("memdir", "raw", "schema", "sketch")


def bulk(args: Any, facts: list[tuple[str, str]], scratch: str) -> list[dict[str, Any]]:
    rows = []
    keys = {len(facts): band_keys_json(facts), WARMUP_FACTS: band_keys_json(facts[:WARMUP_FACTS])}
    for round_no in range(-1, args.rounds):  # round -1: a small untimed warm-up
        sample = facts if round_no >= 0 else facts[:WARMUP_FACTS]
        took: dict[str, float] = {}
        settled = 0.0
        for side in common.rotate(round_no, list(SIDES)):  # each side takes a turn first
            where = os.path.join(scratch, f"bulk-{round_no}-{side}")
            os.makedirs(where)
            if side == "memdir":
                took[side], settled = memdir_bulk(where, sample, args.batch)
            elif side == "raw":
                took[side] = raw_bulk(os.path.join(where, "raw.db"), sample)
            elif side == "schema":
                took[side] = schema_bulk(os.path.join(where, "schema.db"), sample)
            else:
                took[side] = schema_bulk(os.path.join(where, "s.db"), sample, keys[len(sample)])
            shutil.rmtree(where)
        if round_no < 0:
            continue
        rate = {side: len(facts) / seconds for side, seconds in took.items()}
        rows.append(
            {
                "round": round_no + 1,
                "facts": len(facts),
                "memdir_per_s": rate["memdir"],
                "raw_per_s": rate["raw"],
                "schema_per_s": rate["schema"],
                "sketch_per_s": rate["sketch"],
                "ratio": common.ratio(rate["memdir"], rate["raw"]),
                "schema_ratio": common.ratio(rate["schema"], rate["raw"]),
                "sketch_ratio": common.ratio(rate["sketch"], rate["raw"]),
                "settled_s": settled,
            }
        )
    return rows


def single(
    args: Any, base: list[tuple[str, str]], extra: list[tuple[str, str]], scratch: str
) -> dict[str, Any]:
    state = os.path.join(scratch, "single-memdir")
    raw_path = os.path.join(scratch, "single-raw.db")
    times: dict[str, list[float]] = {"memdir": [], "raw": []}
    with common.open_memory(state) as memory:
        common.add_all(memory, base)
        raw = raw_open(raw_path)
        raw.execute("BEGIN")
        raw.executemany(RAW_INSERT, ((category, content) for content, category in base))
        raw.execute("COMMIT")

        def raw_one(content: str, category: str) -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(RAW_INSERT, (category, content))
            raw.execute("COMMIT")

        calls = {"memdir": memory.add_fact, "raw": raw_one}
        for i, (content, category) in enumerate(extra):
            for side in common.alternate(i, ("memdir", "raw")):
                took, _ = common.timed(calls[side], content, category)
                times[side].append(took)
        raw.close()
    mine, theirs = common.stats_ms(times["memdir"]), common.stats_ms(times["raw"])
    return {
        "calls": len(extra),
        "base_facts": len(base),
        "memdir_p50_ms": mine["p50"],
        "memdir_p95_ms": mine["p95"],
        "memdir_max_ms": mine["max"],
        "raw_p50_ms": theirs["p50"],
        "raw_p95_ms": theirs["p95"],
        "raw_max_ms": theirs["max"],
        "ok": mine["p95"] <= TARGET_SINGLE_P95_MS,
    }


def params_numpy() -> bool:
    try:
        return importlib.util.find_spec("numpy") is not None
    except ValueError:  # hidden: sys.modules["numpy"] is None
        return False


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts", type=common.sizes, default=[100_000], help="facts per bulk round (default 100k)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="bulk rounds per side")
    parser.add_argument(
        "--batch", type=int, default=common.BUILD_BATCH, help="facts per Memory.add_facts call"
    )
    parser.add_argument("--single", type=int, default=1000, help="one-fact calls per side")
    parser.add_argument(
        "--single-base",
        type=common.sizes,
        default=[10_000],
        help="facts already in the store for the one-fact calls",
    )
    parser.add_argument(
        "--without-numpy", action="store_true", help="hide numpy, as a lexical-only install"
    )
    args = parser.parse_args(argv)
    if args.without_numpy:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # import numpy: ImportError
    n, base_n = args.facts[0], args.single_base[0]
    facts = common.make_facts(max(n, base_n + args.single), args.seed)

    with tempfile.TemporaryDirectory(prefix="memdir-bench-insert-") as scratch:
        rows = bulk(args, facts[:n], scratch)
        one = single(args, facts[:base_n], facts[base_n : base_n + args.single], scratch)

    medians = {
        key: common.median([r[key] for r in rows])
        for key in (
            "memdir_per_s",
            "raw_per_s",
            "schema_per_s",
            "sketch_per_s",
            "ratio",
            "schema_ratio",
            "sketch_ratio",
            "settled_s",
        )
    }
    summary = {
        # the ratio is the median of each round's ratio: the two sides of a round ran
        # back to back, under the same load
        "target_ratio": TARGET_RATIO,
        **medians,
        "target_single_p95_ms": TARGET_SINGLE_P95_MS,
        "single": one,
    }
    summary["bulk_ok"] = summary["ratio"] >= TARGET_RATIO
    summary["ok"] = summary["bulk_ok"] and one["ok"]

    install = "numpy installed" if params_numpy() else "no numpy (lexical-only install)"
    common.print_table(
        f"bulk insert: Memory.add_facts (batches of {args.batch:,}) vs raw FTS5 "
        f"(one transaction), facts/s, {install} (target ≥ {TARGET_RATIO}×)",
        [
            ("round", "round", ""),
            ("facts", "facts", ",d"),
            ("memdir_per_s", "memdir /s", ",.0f"),
            ("raw_per_s", "raw /s", ",.0f"),
            ("ratio", "ratio", ".2f"),
            ("schema_per_s", "raw, memdir schema /s", ",.0f"),
            ("schema_ratio", "schema / raw", ".2f"),
            ("sketch_per_s", "schema + band keys /s", ",.0f"),
            ("sketch_ratio", "+ keys / raw", ".2f"),
            ("settled_s", "keys indexed after, s", ".2f"),
        ],
        [*rows, {"round": "median", "facts": n, **medians}],
    )
    common.print_table(
        f"one fact per call: Memory.add_fact vs a raw one-row transaction, ms "
        f"(target memdir p95 ≤ {TARGET_SINGLE_P95_MS:g} ms)",
        [
            ("calls", "calls", ",d"),
            ("base_facts", "facts before", ",d"),
            ("memdir_p50_ms", "memdir p50", ".2f"),
            ("memdir_p95_ms", "memdir p95", ".2f"),
            ("memdir_max_ms", "memdir max", ".1f"),
            ("raw_p50_ms", "raw p50", ".2f"),
            ("raw_p95_ms", "raw p95", ".2f"),
            ("raw_max_ms", "raw max", ".1f"),
            ("ok", "p95 ≤ target", ""),
        ],
        [one],
    )
    params = {
        "facts": n,
        "rounds": args.rounds,
        "batch": args.batch,
        "single": args.single,
        "single_base": base_n,
        "seed": args.seed,
        "tokenizer": TOKENIZER,
        # the duplicate guard's band keys take the numpy path when it is installed (the
        # embeddings extra) and the pure-Python one without: run the bench in both
        "numpy": params_numpy(),
    }
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
