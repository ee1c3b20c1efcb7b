"""Team mode (W1): bulk writers of the markdown tiers on PostgreSQL, until the rows hold it.

--days daily logs (one `## HH:MM` section each, ~230 bytes) and a heartbeat state in an
OpenClaw workspace are imported (`memdir import --from openclaw`, curation/importers) into a
fresh scope, and an archive of a local store holding them (`memdir import ARCHIVE`,
curation/archive.py) into another; each run on a new machine (state dir) and scope, timed
from the call until the view is refreshed after it (the rows hold every file and the view
renders them). Then the retention sweep (`memdir prune`) of --days expired task notes. A
throwaway PostgreSQL (tests/pg_server.py, a unix socket, fsync off as in the suite). Every
write goes through storage/documents.py inside `Documents.bulk()`: one change of a row per
file, the view refreshed once around the whole import.

    python bench/team_import.py [--days 500] [--runs 5]
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
from typing import Any

import common

sys.path.insert(0, os.path.join(os.path.dirname(common.BENCH_DIR), "tests"))

import pg_server  # noqa: E402  (the suite's throwaway server, tests/pg_server.py)

NAME = "team_import"
HOUR = 3600.0


def log(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def workspace(work: str, days: int) -> str:
    folder = os.path.join(work, "workspace", "memory")
    os.makedirs(folder)
    first = datetime.date(2024, 1, 1)
    for i in range(days):
        day = (first + datetime.timedelta(days=i)).isoformat()
        with open(os.path.join(folder, f"{day}.md"), "w", encoding="utf-8") as handle:
            handle.write(f"# {day}\n\n## 10:00\n- did thing {i} " + "x" * 200 + "\n")
    with open(os.path.join(folder, "heartbeat-state.json"), "w", encoding="utf-8") as handle:
        json.dump({"lastChecks": {"email": 1700000000}}, handle)
    return os.path.dirname(folder)


def run_once(
    work: str, run: int, source: str, archive_path: str, server: Any, days: int
) -> dict[str, float]:
    """One import of each kind, and one sweep, each into a fresh scope from a new machine."""
    from memdir.curation import archive, importers
    from memdir.testing import FixedClock

    def machine(kind: str, **options: Any) -> Any:
        url = {"MEMDIR_DATABASE_URL": server.url(server.new_database())}
        return common.open_memory(os.path.join(work, f"{kind}-{run}"), env=url, **options)

    took: dict[str, float] = {}
    with machine("openclaw") as memory:
        memory.hot_append("- the scope exists")

        def openclaw() -> None:
            importers.run(memory, "openclaw", source)
            memory.docs.refresh()

        took["openclaw"], _ = common.timed(openclaw)
        stored = len(memory.store.documents_since(0))
        if stored != days + 2:
            raise SystemExit(f"{NAME}: openclaw: {stored} rows, expected {days + 2}")
    with machine("archive") as memory:

        def restore() -> None:
            archive.import_archive(memory, archive_path)
            memory.docs.refresh()

        took["archive"], _ = common.timed(restore)
    clock = FixedClock()
    with machine("prune", clock=clock) as memory:
        for i in range(days):
            memory.start_task(f"t{i}")
            memory.add_note(f"t{i}", f"note {i}")
            memory.end_task(f"t{i}")
        clock.advance(memory.settings.task_retention + HOUR)
        took["prune"], pruned = common.timed(memory.prune)
        if len(pruned) != days:
            raise SystemExit(f"{NAME}: prune removed {len(pruned)}, expected {days}")
    return took


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=500, help="daily logs (and task notes)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each import")
    args = parser.parse_args(argv)
    from memdir.curation import archive, importers

    work = os.path.join(os.path.abspath(args.cache_dir), f"team-import-work-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    server = pg_server.start()
    times: dict[str, list[float]] = {"openclaw": [], "archive": [], "prune": []}
    try:
        source = workspace(work, args.days)
        archive_path = os.path.join(work, "store.jsonl")
        with common.open_memory(os.path.join(work, "local")) as local:  # memory.db
            importers.run(local, "openclaw", source)
            archive.export_to(local, archive_path)
        for run in range(args.runs):
            took = run_once(work, run, source, archive_path, server, args.days)
            for kind, seconds in took.items():
                times[kind].append(seconds)
            log(
                f"run {run + 1}/{args.runs}: "
                + ", ".join(f"{k} {v:.2f} s" for k, v in took.items())
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        {
            "writer": kind,
            "files": args.days + (1 if kind == "openclaw" else 0),
            "p50_s": common.median(seconds),
            "min_s": min(seconds),
            "max_s": max(seconds),
            "per_file_ms": 1000 * common.median(seconds) / args.days,
        }
        for kind, seconds in times.items()
    ]
    common.print_table(
        f"team mode: bulk writers of {args.days} files until the rows hold them, {args.runs} runs",
        [("writer", "writer", ""), ("files", "files", ",d"), ("p50_s", "p50 s", ".2f"),
         ("min_s", "min s", ".2f"), ("max_s", "max s", ".2f"), ("per_file_ms", "ms/file", ".1f")],
        rows,
    )  # fmt: skip
    summary: dict[str, Any] = {f"{row['writer']}_p50_s": row["p50_s"] for row in rows}
    summary.update(times=times, ok=True)  # every run stored (and swept) every file: checked
    common.write_result(NAME, args.out_dir, {"days": args.days, "runs": args.runs}, rows, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
