"""`memdir doctor` on a 10k-fact store (N2): the whole check in-process and as a CLI
process, where its time goes check by check, and one `doctor --fix` that has to rebuild.

The store: make_facts(--facts) added with Memory.add_facts (built once into the cache dir,
like the other benches), copied, then given --entries global entries, --notes task notes
over a few tasks, --procedures procedures, a daily log and HOT.md, and its search index
caught up, so doctor has every tier to look at. Facts that no search ever found are
"stale" once older than --stale-days: with the cached store old enough, every fact is,
and doctor lists them all (the worst case of that query).

With the embeddings extra installed, a second copy gets a vector for every fact and chunk
(random unit vectors written with Store.put_vectors: the same cost to doctor as the
model's, without minutes of embedding), because then duplicates.find_all also compares
every embedded fact with every other (a cosine matrix), and that dominates.

Sides, taking turns going first:
- in-process `doctor.diagnose` on a fresh Memory per call (what the CLI does after its
  imports) and on one reused Memory;
- `memdir doctor` and `memdir doctor --json`, whole process; both again on the copy with
  vectors;
- floors: a bare python process that opens memory.db and runs `PRAGMA integrity_check`
  (doctor's single biggest step), and `python -c pass`.
Then each check alone, in-process (p50), and one `memdir doctor --fix` on a copy whose
MEMORY.md was edited by hand and whose index is behind a few files.

docs/spec.md (Performance) sets no target for doctor; the headline is the CLI's median wall time.

    python bench/doctor.py [--facts 10000] [--entries 200] [--notes 100] [--runs 10]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import common

NAME = "doctor"
WARMUP = 2
TASKS = 5

BARE = """\
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("PRAGMA integrity_check").fetchall())
"""


def fill(state: str, args: Any) -> dict[str, Any]:
    """Entries, notes, procedures, a daily log and HOT.md on top of the fact store; then
    one search, so the search index and the entry cache are current."""
    started = time.perf_counter()
    with common.open_memory(state) as memory:
        memory.hot_set(common.HOT_TEXT)
        for name, description, content in common.make_entries(args.entries, args.seed):
            memory.write_entry(name, description, content)
        tasks = [f"bench-task-{i}" for i in range(TASKS)]
        for task in tasks:
            memory.start_task(task)
        for i, (content, _) in enumerate(common.make_facts(args.notes, args.seed + 7)):
            memory.add_note(tasks[i % TASKS], content)
        for i, (content, _) in enumerate(common.make_facts(args.procedures, args.seed + 8)):
            memory.write_procedure(f"procedure-{i:03d}", f"# Procedure {i}\n\n1. {content}\n")
        memory.daily_append("Ran the doctor benchmark")
        memory.search("socket timeout", mode="lexical")
    return {"fill_seconds": time.perf_counter() - started}


def add_vectors(state: str, seed: int) -> int:
    """A random unit vector (float32, the model's width) for every fact and chunk."""
    import numpy as np

    from memdir.storage import embeddings

    model = embeddings.MiniLM
    rng = np.random.default_rng(seed)
    with common.open_memory(state) as memory:
        items = memory.store.unembedded(model.name, 10_000_000)
        vectors = rng.standard_normal((len(items), model.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [
            (owner, item_id, digest, embeddings.to_blob(vector))
            for (owner, item_id, _text, digest), vector in zip(items, vectors, strict=True)
        ]
        memory.store.put_vectors(model.name, rows)
    return len(rows)


def run(argv: list[str], env: dict[str, str], codes: tuple[int, ...] = (0, 1)) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if proc.returncode not in codes:
        raise SystemExit(f"{NAME}: {argv} exited {proc.returncode}: {proc.stderr.strip()}")
    return took


def phases(state: str, stale_days: int, runs: int) -> list[dict[str, Any]]:
    """Each check alone on one Memory (p50 of `runs` calls), in diagnose's order."""
    from memdir.curation.doctor import checks, diagnosis, disk
    from memdir.storage import open_store

    with common.open_memory(state) as memory:
        layout = memory.layout
        store = open_store(layout, memory.settings, read_only=True)
        view = diagnosis._view(memory, store)
        scan = disk.scan_root(layout)
        found: list[Any] = []
        steps: list[tuple[str, Callable[[], Any]]] = [
            (
                "memory.db: integrity_check, sizes, fact counts",
                lambda: disk.check_database(layout, store, found),
            ),
            (
                "scan the memory root (layout, temp files)",
                lambda: disk.check_layout(layout, disk.scan_root(layout), found),
            ),
            ("read every memory file (UTF-8 check)", lambda: disk.check_text(layout, scan, found)),
            ("HOT.md against its cap", lambda: checks.check_hot(memory, found)),
            ("heartbeat-state.json", lambda: checks.check_heartbeat(memory, found)),
            (
                "global entries: frontmatter, MEMORY.md, entry cache",
                lambda: checks.check_entries(view, True, set(), found),
            ),
            (
                "search index against the files",
                lambda: checks.check_index(layout, store, set(), found),
            ),
            ("procedures: frontmatter, empty", lambda: checks.check_procedures(view, found)),
            (
                "task notes: orphans, T4 dry run, idle tasks",
                lambda: checks.check_tasks(view, scan, stale_days, found),
            ),
            (
                "duplicates.find_all (facts, entries, procedures)",
                lambda: checks.check_duplicates(view, found),
            ),
            (
                "stale facts (store.stale_facts)",
                lambda: checks.check_stale(view, stale_days, found),
            ),
            (
                "the whole diagnose, same Memory",
                lambda: diagnosis.diagnose(memory, stale_days=stale_days),
            ),
        ]
        rows = []
        try:
            for label, call in steps:
                call()
                took = [common.timed(call)[0] for _ in range(runs)]
                found.clear()
                rows.append({"phase": label, "calls": runs, "p50_ms": common.stats_ms(took)["p50"]})
        finally:
            store.close()
    return rows


def fix_once(
    store: str, scratch: str, env_of: Callable[[str], dict[str, str]], memdir: str
) -> dict[str, Any]:
    """One `memdir doctor --fix` on a copy with MEMORY.md edited by hand and three entry
    files touched (the index and the entry cache behind them)."""
    state = os.path.join(scratch, "fix")
    shutil.copytree(store, state)
    memory_dir = os.path.join(state, "memory")
    with open(os.path.join(memory_dir, "MEMORY.md"), "a", encoding="utf-8") as handle:
        handle.write("- a line written by hand\n")
    names = sorted(os.listdir(os.path.join(memory_dir, "global")))[:3]
    for name in names:
        with open(os.path.join(memory_dir, "global", name), "a", encoding="utf-8") as handle:
            handle.write("\nOne more line.\n")
    env = env_of(state)
    took = run([memdir, "doctor", "--fix", "--json"], env)
    proc = subprocess.run(
        [memdir, "doctor", "--json"], env=env, capture_output=True, text=True, check=False
    )
    import json

    after = json.loads(proc.stdout)
    left = sorted({f["check"] for f in after["findings"] if f["fixable"]})
    if left:
        raise SystemExit(f"{NAME}: doctor --fix left fixable findings: {left}")
    return {"fix_ms": took * 1000, "touched": len(names)}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--facts", type=common.sizes, default=[10_000], help="facts in the store (default 10k)"
    )
    parser.add_argument("--entries", type=int, default=200, help="global entries (default 200)")
    parser.add_argument("--notes", type=int, default=100, help="task notes (default 100)")
    parser.add_argument("--procedures", type=int, default=20, help="procedures (default 20)")
    parser.add_argument("--stale-days", type=int, default=90, help="doctor's window (90)")
    parser.add_argument("--runs", type=int, default=10, help="timed calls per side")
    parser.add_argument(
        "--no-vectors",
        action="store_true",
        help="skip the copy with vectors (needs the embeddings extra anyway)",
    )
    args = parser.parse_args(argv)
    n = args.facts[0]
    cached = common.build_store(n, args.seed, args.cache_dir)
    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")

    from memdir.curation import doctor
    from memdir.storage import embeddings

    with tempfile.TemporaryDirectory(prefix="memdir-bench-doctor-") as scratch:
        state = os.path.join(scratch, "state")
        shutil.copytree(cached, state)
        built = fill(state, args)
        env = common.child_env(state, args.cache_dir)
        db = common.db_path(state)
        embedded = embeddings.available() and not args.no_vectors
        with_vectors = os.path.join(scratch, "vectors")
        vectors = 0
        if embedded:
            shutil.copytree(state, with_vectors)
            vectors = add_vectors(with_vectors, args.seed)
        env_vectors = common.child_env(with_vectors, args.cache_dir)
        days = ["--stale-days", str(args.stale_days)]

        with common.open_memory(state) as memory:
            report = doctor.diagnose(memory, stale_days=args.stale_days)

            def fresh(where: str) -> Callable[[], Any]:
                def call() -> Any:
                    with common.open_memory(where) as other:
                        return doctor.diagnose(other, stale_days=args.stale_days)

                return call

            calls: dict[str, Callable[[], Any]] = {
                "doctor.diagnose, fresh Memory": fresh(state),
                "doctor.diagnose, reused Memory": lambda: doctor.diagnose(
                    memory, stale_days=args.stale_days
                ),
                "memdir doctor": lambda: run([memdir, "doctor", *days], env),
                "memdir doctor --json": lambda: run([memdir, "doctor", "--json", *days], env),
                "bare: PRAGMA integrity_check": lambda: run([python, "-c", BARE, db], env),
                "python -c pass": lambda: run([python, "-c", "pass"], env),
                "python -c 'import numpy'": lambda: run([python, "-c", "import numpy"], env),
            }
            if embedded:
                calls["doctor.diagnose, fresh Memory, vectors"] = fresh(with_vectors)
                calls["memdir doctor, vectors"] = lambda: run(
                    [memdir, "doctor", *days], env_vectors
                )
            times = common.time_sides(calls, args.runs, WARMUP)
        steps = phases(state, args.stale_days, max(args.runs, 5))
        if embedded:
            steps += [
                {**row, "phase": row["phase"] + ", vectors"}
                for row in phases(with_vectors, args.stale_days, max(args.runs, 5))
                if row["phase"].startswith(("duplicates", "the whole"))
            ]
        fixed = fix_once(state, scratch, lambda s: common.child_env(s, args.cache_dir), memdir)

    stats = {side: common.stats_ms(times[side]) for side in calls}
    rows = [
        {
            "side": side,
            "calls": stats[side]["n"],
            "p50_ms": stats[side]["p50"],
            "p95_ms": stats[side]["p95"],
            "min_ms": stats[side]["min"],
            "max_ms": stats[side]["max"],
        }
        for side in calls
    ]
    summary = report.summary()
    stale = next((len(f.where) for f in report.findings if f.check == "facts.stale"), 0)
    result: dict[str, Any] = {
        "facts": n,
        "entries": args.entries,
        "notes": args.notes,
        "procedures": args.procedures,
        "cli_p50_ms": stats["memdir doctor"]["p50"],
        "cli_p95_ms": stats["memdir doctor"]["p95"],
        "json_p50_ms": stats["memdir doctor --json"]["p50"],
        "inprocess_fresh_p50_ms": stats["doctor.diagnose, fresh Memory"]["p50"],
        "inprocess_reused_p50_ms": stats["doctor.diagnose, reused Memory"]["p50"],
        "integrity_check_process_p50_ms": stats["bare: PRAGMA integrity_check"]["p50"],
        "python_p50_ms": stats["python -c pass"]["p50"],
        "numpy_import_p50_ms": stats["python -c 'import numpy'"]["p50"],
        "vectors": vectors,
        "cli_vectors_p50_ms": stats["memdir doctor, vectors"]["p50"] if embedded else None,
        "inprocess_vectors_p50_ms": stats["doctor.diagnose, fresh Memory, vectors"]["p50"]
        if embedded
        else None,
        "findings": {f.check: f.severity for f in report.findings},
        "counts": summary,
        "stale_facts": stale,
        "database": report.database,
        "phases": steps,
        **fixed,
        **built,
        "ok": True,  # no docs/spec.md (Performance) target: ok says every run succeeded
    }

    common.print_table(
        f"memdir doctor on {n:,} facts, {args.entries:,} entries, {args.notes:,} task notes, "
        f"{args.procedures} procedures: median and p95 of {args.runs} runs, ms",
        [
            ("side", "side", ""),
            ("calls", "calls", ",d"),
            ("p50_ms", "p50", ".1f"),
            ("p95_ms", "p95", ".1f"),
            ("min_ms", "min", ".1f"),
            ("max_ms", "max", ".1f"),
        ],
        rows,
    )
    common.print_table(
        "each check alone, in-process, p50 ms",
        [("phase", "phase", ""), ("calls", "calls", ",d"), ("p50_ms", "p50 ms", ".2f")],
        steps,
    )
    print(
        f"findings: {summary['errors']} errors, {summary['warnings']} warnings, "
        f"{summary['info']} notes ({', '.join(sorted(result['findings'])) or 'none'}); "
        f"{stale:,} facts stale at {args.stale_days} days; memory.db "
        f"{report.database.get('bytes', 0) / 1048576:.1f} MB",
        flush=True,
    )
    print(
        f"`memdir doctor --fix` rebuilding MEMORY.md, the entry cache and the index "
        f"({fixed['touched']} entries touched): {fixed['fix_ms']:.0f} ms; filling the store "
        f"took {built['fill_seconds']:.1f} s",
        flush=True,
    )
    if embedded:
        print(
            f"with a vector for each of {vectors:,} facts and chunks: `memdir doctor` "
            f"{result['cli_vectors_p50_ms']:.0f} ms (p50)",
            flush=True,
        )
    params = {
        "vectors": embedded,
        "facts": n,
        "entries": args.entries,
        "notes": args.notes,
        "procedures": args.procedures,
        "stale_days": args.stale_days,
        "runs": args.runs,
        "warmup": WARMUP,
        "seed": args.seed,
        "memdir": memdir,
        "python": python,
    }
    common.write_result(NAME, args.out_dir, params, rows, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
