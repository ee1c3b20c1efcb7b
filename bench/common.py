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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    ("and-2", "socket AND timeout"),
    ("and-2b", "cache AND memory"),
    ("and-3", "unicode AND encoding AND errors"),
    ("common", "path"),
    ("or", "server OR connection"),
    ("question", "why does the socket timeout?"),  # plain words: an OR of the non-stopwords
)


# -- corpus ----------------------------------------------------------------------------


def vocabulary() -> list[str]:
    with open(WORDS_FILE, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def make_facts(n: int, seed: int = DEFAULT_SEED) -> list[tuple[str, str]]:
    """n (content, category) pairs, the same for the same n and seed."""
    words = vocabulary()
    cum_weights = list(
        itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(len(words)))
    )
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
    return f"facts-{n}-seed{seed}-{code_key()}"


def code_key() -> str:
    """What a cached store depends on besides its sizes: the corpus, memdir's version and
    its schema."""
    import memdir
    from memdir.storage.sqlite.migrations import MIGRATIONS

    return f"c{CORPUS_VERSION}-v{memdir.__version__}-s{MIGRATIONS[-1][0]}"


def open_memory(state_dir: str, env: Mapping[str, str] | None = None, **options: Any) -> Any:
    """A Memory on exactly this state dir, made when missing: no MEMDIR_* variable but
    those in `env` (e.g. MEMDIR_DATABASE_URL) may redirect it. `options` go to Memory
    (e.g. clock=...)."""
    from memdir import Memory

    state_dir = os.path.abspath(state_dir)
    return Memory(state_dir, env=dict(env or {}), cwd=state_dir, create=True, **options)


def db_path(state_dir: str) -> str:
    return os.path.join(state_dir, "memory", "memory.db")


def add_all(memory: Any, facts: Sequence[tuple[str, str]], batch: int = BUILD_BATCH) -> None:
    for start in range(0, len(facts), batch):
        memory.add_facts(list(facts[start : start + batch]))


def finish_build(building: str, state: str, info: dict[str, Any]) -> None:
    """Mark the store built in `building` complete (its `complete` file holds `info`) and
    give it its final name: only a finished store ever carries it."""
    with open(os.path.join(building, "complete"), "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    shutil.rmtree(state, ignore_errors=True)
    os.rename(building, state)


def build_store(
    n: int,
    seed: int = DEFAULT_SEED,
    cache_dir: str = CACHE_DIR,
    log: Callable[[str], None] | None = None,
) -> str:
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
    finish_build(building, state, {"facts": n, "seed": seed, "seconds": took})
    log(f"built a {n:,}-fact store in {took:.1f} s ({n / took:,.0f} facts/s): {state}")
    return state


# -- entry stores: global entries and task notes (recall, ingest) ----------------------

ENTRY_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: the synthetic clock's start
ENTRY_TICK = 37  # seconds between two writes, so every entry and note has its own time
HOT_TEXT = (
    "# Hot memory\n\n- Run the tests with `make test` before every commit.\n"
    "- The user reviews every change; keep commits small and explain why.\n"
    "- Deploys go out on Tuesdays only; never push to main on a Friday.\n"
)


def lineage_ids(depth: int) -> list[str]:
    """Task ids from the root to the deepest task: task-0 is the root, task-<depth-1> the
    task that recall is asked for."""
    return [f"task-{level}" for level in range(depth)]


def make_entries(n: int, seed: int = DEFAULT_SEED) -> list[tuple[str, str, str]]:
    """n (name, description, content) triples: a kebab-case name from two words of the
    corpus, a one-line description (the first 8-16 words of a fact) and a body of 1-3
    facts, like an entry an agent would write."""
    facts = make_facts(3 * n, seed + 1)
    rng = random.Random(seed + 2)
    result = []
    for i in range(n):
        text = facts[3 * i][0]
        words = [w for w in dict.fromkeys(text.lower().rstrip(".").split()) if w.isalnum()]
        name = "-".join([*sorted(words, key=len, reverse=True)[:2], f"{i:04d}"])
        description = " ".join(text.split()[: rng.randint(8, 16)]).rstrip(".:")
        body = "\n\n".join(f[0] for f in facts[3 * i : 3 * i + rng.randint(1, 3)])
        result.append((name, description, body))
    return result


def make_notes(n: int, depth: int, seed: int = DEFAULT_SEED) -> list[tuple[str, str, str]]:
    """n (task id, content, workflow/step) triples spread at random over the lineage's
    tasks, in time order, so every task's notes interleave in time with the others'."""
    facts = make_facts(n, seed + 3)
    rng = random.Random(seed + 4)
    ids = lineage_ids(depth)
    steps = ("triage/analyze", "triage/reproduce", "fix/implement", "fix/test", "review/read")
    return [(rng.choice(ids), content, rng.choice(steps)) for content, _ in facts]


def entry_store_key(entries: int, notes: int, depth: int, seed: int) -> str:
    return f"entries-{entries}-notes-{notes}-depth{depth}-seed{seed}-{code_key()}"


class SyntheticClock:
    """A clock for Memory: ENTRY_TICK seconds later on every reading."""

    def __init__(self) -> None:
        self.now = float(ENTRY_EPOCH)

    def __call__(self) -> float:
        self.now += ENTRY_TICK
        return self.now


def build_entry_store(
    entries: int,
    notes: int,
    depth: int,
    seed: int = DEFAULT_SEED,
    cache_dir: str = CACHE_DIR,
    log: Callable[[str], None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """(state dir, how it was built) of a store holding HOT.md, make_entries(entries) written
    one by one with Memory.write_entry, and make_notes(notes, depth) added with
    Memory.add_note to a lineage of `depth` tasks made with Memory.start_task(parent=...).
    Built once into the cache dir like build_store. The store is meant to be copied before
    it is changed (shutil.copytree keeps the files' mtimes, so the copy's entry cache holds).
    """
    log = log or _stderr
    state = os.path.join(os.path.abspath(cache_dir), entry_store_key(entries, notes, depth, seed))
    done = os.path.join(state, "complete")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as handle:
            return state, {**json.load(handle), "cached": True}
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(building)
    items, lines = make_entries(entries, seed), make_notes(notes, depth, seed)
    started = time.perf_counter()
    write_ms: list[float] = []
    with open_memory(building, clock=SyntheticClock()) as memory:
        memory.hot_set(HOT_TEXT)
        parent = None
        for task in lineage_ids(depth):
            memory.start_task(task, parent=parent)
            parent = task
        for name, description, content in items:
            took, _ = timed(memory.write_entry, name, description, content)
            write_ms.append(took * 1000)
        entries_took = time.perf_counter() - started
        for task, content, where in lines:
            workflow, step = where.split("/")
            memory.add_note(task, content, workflow=workflow, step=step)
    took = time.perf_counter() - started
    tenth = max(1, len(write_ms) // 10)
    info = {
        "entries": entries,
        "notes": notes,
        "depth": depth,
        "seed": seed,
        "seconds": took,
        "entries_seconds": entries_took,
        "notes_seconds": took - entries_took,
        "write_entry_first_tenth_ms": statistics.fmean(write_ms[:tenth]) if write_ms else 0.0,
        "write_entry_last_tenth_ms": statistics.fmean(write_ms[-tenth:]) if write_ms else 0.0,
    }
    finish_build(building, state, info)
    log(
        f"built a store of {entries:,} entries and {notes:,} notes in {took:.1f} s "
        f"(write_entry {info['write_entry_first_tenth_ms']:.1f} ms each over the first "
        f"tenth, {info['write_entry_last_tenth_ms']:.1f} ms over the last): {state}"
    )
    return state, {**info, "cached": False}


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
    from memdir.storage.sqlite.index import to_fts5

    node = memdir_query.parse_search(query)
    assert node is not None, query
    return to_fts5(node)


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
        "n": len(ms),
        "p50": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "min": min(ms, default=math.nan),
        "max": max(ms, default=math.nan),
        "mean": statistics.fmean(ms) if ms else math.nan,
    }


def timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """(seconds, result) of call(*args)."""
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


# print_table columns of the figures side_row gives (a script adds its own after them)
SIDE_COLUMNS = [
    ("side", "side", ""),
    ("calls", "calls", ",d"),
    ("p50_ms", "p50", ".1f"),
    ("p95_ms", "p95", ".1f"),
    ("min_ms", "min", ".1f"),
    ("max_ms", "max", ".1f"),
    ("floor", "floor", ""),
    ("ratio_p50", "ratio p50", ".2f"),
    ("ratio_p95", "ratio p95", ".2f"),
]


def side_row(side: str, stats: dict[str, dict[str, float]], floor: str | None) -> dict[str, Any]:
    """One timed side of a whole-process benchmark: its figures, and its ratios against
    the floor it is compared with (a bare process doing the least the same job needs)."""
    mine = stats[side]
    return {
        "side": side,
        "calls": mine["n"],
        "p50_ms": mine["p50"],
        "p95_ms": mine["p95"],
        "min_ms": mine["min"],
        "max_ms": mine["max"],
        "floor": floor or "",
        "ratio_p50": ratio(mine["p50"], stats[floor]["p50"]) if floor else None,
        "ratio_p95": ratio(mine["p95"], stats[floor]["p95"]) if floor else None,
    }


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
        print(
            "| "
            + " | ".join(
                c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(line, widths, strict=True)
            )
            + " |"
        )
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
        proc = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=BENCH_DIR,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def write_result(
    name: str,
    out_dir: str,
    params: dict[str, Any],
    rows: list[dict[str, Any]],
    summary: dict[str, Any],
    file_name: str | None = None,
) -> str:
    """Write <out_dir>/<name>.json (or <out_dir>/<file_name>)."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, file_name or f"{name}.json")
    data = {"name": name, "params": params, "env": environment(), "rows": rows, "summary": summary}
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


def venv_bin(name: str) -> str:
    """An executable of the venv running this script: .venv/bin/memdir, .venv/bin/python."""
    path = os.path.join(sys.prefix, "bin", name)
    if sys.prefix == sys.base_prefix or not os.access(path, os.X_OK):
        raise SystemExit(f"run the benches with the project's venv python (no {path})")
    return path


def child_env(state: str, cache_dir: str) -> dict[str, str]:
    """This environment, pointed at the store, with bytecode written and read once."""
    dropped = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_") and k not in dropped}
    env["MEMDIR_STATE_DIR"] = state
    env["PYTHONPYCACHEPREFIX"] = os.path.join(os.path.abspath(cache_dir), "pycache")
    return env


def time_sides(
    calls: dict[str, Callable[[], Any]], runs: int, warmup: int
) -> dict[str, list[float]]:
    """Each side called `warmup + runs` times, the sides taking turns going first; the
    durations (seconds) after the warm-up."""
    times: dict[str, list[float]] = {side: [] for side in calls}
    for run_no in range(warmup + runs):
        for side in rotate(run_no, list(calls)):
            took, _ = timed(calls[side])
            if run_no >= warmup:
                times[side].append(took)
    return times
