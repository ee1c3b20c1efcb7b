"""Shared pieces of the benchmark scripts: a synthetic fact corpus, stores built through
memdir's own API (cached on disk), timing statistics, tables and JSON results.

The corpus is deterministic for a seed: facts of ~200 characters drawn from `words.txt`
beside this file, 4,000 English words ranked by how often they occur in the docstrings and
comments of CPython's standard library and its pydoc topics, sampled with Zipf weights
(1/rank), so a few words are in most facts and most words are rare, as in real text.

Every script takes its sizes as arguments (the smoke test runs them tiny), prints a table
and writes `<out-dir>/<name>.json`: {name, params, env, rows, summary}.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(BENCH_DIR, "results")
CACHE_DIR = os.path.join(RESULTS_DIR, "cache")
WORDS_FILE = os.path.join(BENCH_DIR, "words.txt")

CATEGORIES = ("preference", "convention", "decision", "learning")
# How a fact of each category tends to open; the rest is words from the vocabulary.
LEADS = {
    "preference": ("Prefers", "The user prefers", "Likes to keep", "Would rather use"),
    "convention": ("Convention:", "Always", "In this repo we", "The team writes"),
    "decision": ("Decided to", "We chose", "Agreed to", "Going with"),
    "learning": ("Learned that", "Turns out", "Found that", "Note to self:"),
}
FACT_CHARS = (170, 240)  # each fact's length is drawn uniformly from this range
ZIPF_EXPONENT = 1.0
CORPUS_VERSION = 1  # bump when the corpus changes, so cached stores are rebuilt
BUILD_BATCH = 10_000
DEFAULT_SEED = 1234

# (name, query) pairs run by the search benchmarks. The selective ones AND two or three
# mid-frequency words (tens of matches at 100k facts); "common" is one frequent word
# (~5% of facts) and "or" an OR of two words (~4%): the rows FTS5 must rank grow with them.
QUERIES = (
    ("and-2", "socket timeout"),
    ("and-2b", "cache memory"),
    ("and-3", "unicode encoding errors"),
    ("common", "path"),
    ("or", "server OR connection"),
)


# -- corpus ----------------------------------------------------------------------------


def vocabulary() -> list[str]:
    with open(WORDS_FILE, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def make_facts(n: int, seed: int = DEFAULT_SEED) -> list[tuple[str, str]]:
    """n (content, category) pairs, the same for the same n and seed."""
    words = vocabulary()
    cum_weights = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT
                                            for rank in range(len(words))))
    rng = random.Random(seed)
    facts = []
    for _ in range(n):
        category = rng.choice(CATEGORIES)
        target = rng.randint(*FACT_CHARS)
        parts = [rng.choice(LEADS[category])]
        size = len(parts[0])
        while size < target:
            for word in rng.choices(words, cum_weights=cum_weights, k=16):
                parts.append(word)
                size += len(word) + 1
                if size >= target:
                    break
        facts.append((" ".join(parts) + ".", category))
    return facts


# -- stores ----------------------------------------------------------------------------


def store_key(n: int, seed: int) -> str:
    """The cache name of a store: changes with the corpus, memdir's version and its schema."""
    import memdir
    from memdir.storage.migrations import MIGRATIONS

    return f"facts-{n}-seed{seed}-c{CORPUS_VERSION}-v{memdir.__version__}-s{MIGRATIONS[-1][0]}"


def open_memory(state_dir: str) -> Any:
    """A Memory on exactly this state dir: no MEMDIR_* variable of ours may redirect it."""
    from memdir import Memory

    state_dir = os.path.abspath(state_dir)
    return Memory(state_dir, env={}, cwd=state_dir)


def db_path(state_dir: str) -> str:
    return os.path.join(state_dir, "memory", "memory.db")


def add_all(memory: Any, facts: Sequence[tuple[str, str]], batch: int = BUILD_BATCH) -> None:
    for start in range(0, len(facts), batch):
        memory.add_facts(list(facts[start:start + batch]))


def build_store(n: int, seed: int = DEFAULT_SEED, cache_dir: str = CACHE_DIR,
                log: Callable[[str], None] | None = None) -> str:
    """The state dir of a store holding make_facts(n, seed), added with Memory.add_facts in
    batches. Built once into the cache dir and reused (by this run and later ones) until
    the corpus, memdir's version or its schema changes."""
    log = log or _stderr
    state = os.path.join(os.path.abspath(cache_dir), store_key(n, seed))
    if os.path.exists(os.path.join(state, "complete")):
        return state
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(building)
    facts = make_facts(n, seed)
    started = time.perf_counter()
    with open_memory(building) as memory:
        add_all(memory, facts)
    took = time.perf_counter() - started
    with open(os.path.join(building, "complete"), "w", encoding="utf-8") as handle:
        json.dump({"facts": n, "seed": seed, "seconds": took}, handle)
    os.rename(building, state)  # only a finished store ever carries the final name
    log(f"built a {n:,}-fact store in {took:.1f} s ({n / took:,.0f} facts/s): {state}")
    return state


def match_count(state_dir: str, match: str) -> int:
    """How many facts an FTS5 MATCH expression selects: the rows that bm25 must rank."""
    db = sqlite3.connect(db_path(state_dir))
    try:
        query = "SELECT count(*) FROM facts_fts WHERE facts_fts MATCH ?"
        return int(db.execute(query, (match,)).fetchone()[0])
    finally:
        db.close()


def fts_match(query: str) -> str:
    """The MATCH expression memdir builds for a user query."""
    from memdir import query as memdir_query

    return memdir_query.to_fts5(memdir_query.parse(query))


def search_sql() -> str:
    """The statement SQLiteStore.search_facts runs with no category or date filter: top k
    by bm25, joined to the facts table for the whole row."""
    from memdir.storage.sqlite import FACT_COLUMNS

    columns = ", ".join("f." + c for c in FACT_COLUMNS.split(", "))
    return (
        f"SELECT {columns}, bm25(facts_fts) FROM facts_fts JOIN facts f "
        "ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? ORDER BY bm25(facts_fts) LIMIT ?"
    )


# -- timing ----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolated between the nearest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def stats_ms(seconds: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, min, max and mean of durations given in seconds, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms), "p50": percentile(ms, 50), "p95": percentile(ms, 95),
        "min": min(ms, default=math.nan), "max": max(ms, default=math.nan),
        "mean": statistics.fmean(ms) if ms else math.nan,
    }


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """(seconds, result) of call(*args)."""
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def alternate(run: int, pair: tuple[Any, Any]) -> tuple[Any, Any]:
    """Swap the order of the two sides every other run, so neither always goes first."""
    return pair if run % 2 == 0 else (pair[1], pair[0])


def rotate(run: int, sides: list[Any]) -> list[Any]:
    """The sides in an order that starts with a different one each run."""
    shift = run % len(sides)
    return sides[shift:] + sides[:shift]


# -- output ----------------------------------------------------------------------------


Column = tuple[str, str, str]  # (key, header, format spec)


def print_table(title: str, columns: Sequence[Column], rows: Iterable[dict[str, Any]]) -> None:
    """A markdown table: pastes straight into a report."""
    cells = [[_cell(row.get(key), spec) for key, _, spec in columns] for row in rows]
    headers = [header for _, header, _ in columns]
    widths = [max([len(h), *(len(line[i]) for line in cells)]) for i, h in enumerate(headers)]
    print(f"\n### {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in cells:
        print("| " + " | ".join(c.rjust(w) if _numeric(c) else c.ljust(w)
                                for c, w in zip(line, widths, strict=True)) + " |")
    print(flush=True)


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    return format(value, spec) if spec else str(value)


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "", 1).replace("×", "").lstrip("-").isdigit()


def environment() -> dict[str, Any]:
    import memdir

    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "sqlite": sqlite3.sqlite_version,
        "memdir": memdir.__version__,
        "commit": _git_commit(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _git_commit() -> str | None:
    """The checkout measured: HEAD, with -dirty when tracked files differ from it."""
    try:
        proc = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                              cwd=BENCH_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def write_result(name: str, out_dir: str, params: dict[str, Any],
                 rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    data = {"name": name, "params": params, "env": environment(), "rows": rows,
            "summary": summary}
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(_jsonable(data), handle, indent=2)
        handle.write("\n")
    os.replace(path + ".tmp", path)
    print(f"wrote {path}", flush=True)
    return path


def _jsonable(value: Any) -> Any:
    """NaN is not JSON: it becomes null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def parser(description: str) -> argparse.ArgumentParser:
    """The options every script shares: --seed, --out-dir, --cache-dir."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corpus seed")
    result.add_argument("--out-dir", default=RESULTS_DIR, help="where <name>.json goes")
    result.add_argument("--cache-dir", default=CACHE_DIR, help="where built stores are kept")
    return result


def sizes(text: str) -> list[int]:
    """'10000,100k' -> [10000, 100000]."""
    result = []
    for part in text.split(","):
        part = part.strip().lower()
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        result.append(int(float(part.rstrip("km")) * scale))
    return result


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
