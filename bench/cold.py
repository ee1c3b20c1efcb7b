"""Cold start of the commands that agents and hooks run many times a turn (C), each a whole
process beside the bare process doing the least the same job needs, all in one run, the
sides taking turns going first:

- `memdir search --mode lexical QUERY` on a store of 100k facts (common.build_store),
  against a bare Python process that opens the same memory.db, runs the same FTS5 MATCH
  (the statement memdir runs, common.search_sql) and prints the rows (search_cli.py's
  floor). Target ≤ 1.5×, for every query of --queries.
- `memdir recall --task task-4` on 1,000 global entries and 500 task notes over a lineage
  of 5 tasks (common.build_entry_store, as recall.py), against a bare read of HOT.md,
  MEMORY.md and the lineage's note files (recall.py's floor). Target ≤ 2×.
- `memdir boot` on 300 entries, HOT.md, SOUL.md, USER.md and 60 daily logs of ~10 KB
  (boot.py's store), against a bare read of the files boot shows. Target ≤ 2×.
- `memdir hook SessionStart` (a Claude Code payload, a fresh session id each call: the
  session is recorded, U1) on the same kind of store with HOT.md full (hooks.py's), against
  the same bare read. Target ≤ 2×.

Each memdir command runs as a user's call does, handed to the fork server (C1), which the
bench starts in a runtime dir of its own before timing; and once more in its own process
("(own process)": MEMDIR_FORKSERVER=0), as a call that finds no server runs, beside the
same floor. The targets judge the first.

Before timing, every memdir side is checked against its floor: the same fact ids; the
recall text is what Memory.recall gives in-process and holds HOT.md and the deepest task's
notes; boot's parts are the files' text (boot.check); the hook's context holds HOT.md; a
call in its own process prints what the server's child printed.
`python -c pass` and `python -c "import memdir.cli.run"` (what a call in its own process
imports) run beside them, to split a call into interpreter start, memdir's imports and the
work itself. Every side runs from this venv's bin/ with bytecode cached (common.child_env).
The figure of each command is the ratio of median wall times (p95 beside it); --profile
adds `python -X importtime` of each memdir command (median of --profile-runs calls).

    python bench/cold.py [--facts 100k] [--entries 1000] [--notes 500] [--boot-entries 300]
                         [--days 60] [--queries and-2,question] [--runs 20] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from typing import Any

import boot
import common
import hooks
import recall
import search_cli

NAME = "cold"
WARMUP = 2
DEPTH = 5
TARGETS = {"search": 1.5, "recall": 2.0, "boot": 2.0, "SessionStart": 2.0}
ALONE = "(own process)"  # a call that found no fork server (C1), beside its floor too


def fill_args(args: Any, hot_kb: float) -> argparse.Namespace:
    """What boot.fill reads: the daily logs, HOT.md and the identity files' sizes."""
    return argparse.Namespace(
        seed=args.seed, days=args.days, day_kb=args.day_kb, hot_kb=hot_kb, identity_kb=1.0
    )


def recall_paths(state: str) -> tuple[list[str], str, str]:
    """(what the recall floor reads, the deepest task, Memory.recall's text for it)."""
    from memdir import advice

    deepest = common.lineage_ids(DEPTH)[-1]
    token = advice.use("cli", ["memdir"])  # the hints name commands, as the CLI's do
    with common.open_memory(state) as memory:
        lineage = list(reversed(common.lineage_ids(DEPTH)))  # deepest first
        try:
            return recall.raw_paths(memory, lineage), deepest, memory.recall(task=deepest).text
        finally:
            advice.reset(token)


def check_recall(out: str, expected: str, paths: list[str]) -> None:
    if out != expected:
        raise SystemExit(f"{NAME}: `memdir recall` printed other text than Memory.recall")
    hot = boot.read(paths[0]).strip().splitlines()[-1]
    if hot not in out:
        raise SystemExit(f"{NAME}: `memdir recall` does not show HOT.md")


def importtime(
    python: str, argv: list[str], env: dict[str, str], stdin: str | None, runs: int
) -> float:
    """Median ms of the top-level imports `python -X importtime` reports for one call."""
    totals = []
    for _ in range(runs):
        _, _, err = boot.run([python, "-X", "importtime", *argv], env, stdin)
        totals.append(
            sum(
                int(m.group(2)) / 1000
                for m in map(boot.IMPORTTIME_RE.match, err.splitlines())
                if m and not m.group(3)
            )
        )
    return common.median(totals)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=common.sizes, default=[100_000], help="facts (100k)")
    parser.add_argument(
        "--queries",
        default="and-2,question",
        help=f"search queries by name, of {', '.join(n for n, _ in common.QUERIES)}",
    )
    parser.add_argument("--entries", type=int, default=1000, help="recall's entries (1000)")
    parser.add_argument("--notes", type=int, default=500, help="recall's task notes (500)")
    parser.add_argument("--boot-entries", type=int, default=300, help="boot's entries (300)")
    parser.add_argument("--days", type=int, default=60, help="daily log files (60)")
    parser.add_argument("--day-kb", type=float, default=10, help="KB per daily log (~10)")
    parser.add_argument("--runs", type=int, default=20, help="timed calls per side")
    parser.add_argument("--profile", action="store_true", help="then -X importtime of each")
    parser.add_argument("--profile-runs", type=int, default=5, help="-X importtime calls")
    args = parser.parse_args(argv)
    if args.days < 2:
        parser.error("--days must be at least 2: boot shows today's and yesterday's logs")
    queries = dict(common.QUERIES)
    unknown = [q for q in args.queries.split(",") if q not in queries]
    if unknown:
        parser.error(f"unknown queries {', '.join(unknown)}")
    memdir, python = common.venv_bin("memdir"), common.venv_bin("python")
    facts_state = common.build_store(args.facts[0], args.seed, args.cache_dir)
    entry_store, _ = common.build_entry_store(
        args.entries, args.notes, DEPTH, args.seed, args.cache_dir
    )
    boot_store, _ = common.build_entry_store(args.boot_entries, 0, 0, args.seed, args.cache_dir)

    with tempfile.TemporaryDirectory(prefix="memdir-bench-cold-") as scratch:
        # each command gets its own copy: boot's store with a 2 KB HOT.md (boot.py's), the
        # hook's with a full one (hooks.py's); the copies keep the files' mtimes
        states = {}
        for name, source in (("recall", entry_store), ("boot", boot_store), ("hook", boot_store)):
            states[name] = os.path.join(scratch, name)
            shutil.copytree(source, states[name])
        boot_fill = boot.fill(states["boot"], fill_args(args, 2.0))
        hook_fill = boot.fill(states["hook"], fill_args(args, 4.8))
        boot_paths = boot.floor_paths(states["boot"], boot_fill["layout"])
        hook_paths = boot.floor_paths(states["hook"], hook_fill["layout"])
        recall_floor, deepest, recalled = recall_paths(states["recall"])
        envs = {
            "search": common.child_env(facts_state, args.cache_dir),
            **{name: common.child_env(state, args.cache_dir) for name, state in states.items()},
        }
        envs["hook"]["CLAUDE_PROJECT_DIR"] = scratch
        # the calls as a user's are made: through the fork server (C1), in a runtime dir
        # of the bench's own; and each once more in its own process, as a call that finds
        # no server runs (MEMDIR_FORKSERVER=0)
        runtime = tempfile.mkdtemp(prefix="mdcold-", dir="/tmp")
        for name in list(envs):
            envs[name]["XDG_RUNTIME_DIR"] = runtime
            envs[f"{name} alone"] = {**envs[name], "MEMDIR_FORKSERVER": "0"}
        db = common.db_path(facts_state)
        bare_search = search_cli.BARE.format(sql=common.search_sql())

        # side -> (command it floors, argv, env key, stdin maker)
        sides: dict[str, tuple[str | None, list[str], str, Any]] = {}
        for name in args.queries.split(","):
            text = queries[name]
            sides[f"search {name}"] = (
                f"bare FTS5 {name}",
                [memdir, "search", "--mode", "lexical", text],
                "search",
                None,
            )
            sides[f"bare FTS5 {name}"] = (
                None,
                [python, "-c", bare_search, db, common.fts_match(text)],
                "search",
                None,
            )
        sides["recall --task"] = (
            "bare read, recall",
            [memdir, "recall", "--task", deepest],
            "recall",
            None,
        )
        sides["bare read, recall"] = (
            None,
            [python, "-c", boot.BARE, *recall_floor],
            "recall",
            None,
        )
        sides["boot"] = ("bare read, boot", [memdir, "boot"], "boot", None)
        sides["bare read, boot"] = (None, [python, "-c", boot.BARE, *boot_paths], "boot", None)
        sides["hook SessionStart"] = (
            "bare read, hook",
            [memdir, "hook", "SessionStart"],
            "hook",
            lambda: hooks.payload("SessionStart-startup", scratch, session_id=str(uuid.uuid4())),
        )
        sides["bare read, hook"] = (None, [python, "-c", boot.BARE, *hook_paths], "hook", None)
        for side, (floor, cmd, env, stdin) in list(sides.items()):
            if floor is not None:
                sides[f"{side} {ALONE}"] = (floor, cmd, f"{env} alone", stdin)
        sides["python -c pass"] = (None, [python, "-c", "pass"], "search", None)
        sides["import memdir.cli.run"] = (
            None,
            [python, "-c", "import memdir.cli.run"],
            "search",
            None,
        )

        def call(side: str) -> tuple[float, str, str]:
            _, cmd, env, stdin = sides[side]
            return boot.run(cmd, envs[env], stdin() if stdin else None)

        call("python -c pass")
        boot.run([memdir, "path"], envs["search"])  # starts the server
        if not wait_for_server(runtime):
            raise SystemExit(f"{NAME}: the fork server did not start (see {runtime})")
        outputs = {side: call(side) for side in sides}
        for side, (_, _, env, _) in sides.items():
            if env.endswith(" alone") and outputs[side][1] != outputs[side[: -len(ALONE) - 1]][1]:
                raise SystemExit(f"{NAME}: {side}: another answer than through the server")
        for name in args.queries.split(","):
            ours, theirs = outputs[f"search {name}"][1], outputs[f"bare FTS5 {name}"][1]
            if search_cli.fact_ids(ours) != search_cli.fact_ids(theirs) or not ours:
                raise SystemExit(f"{NAME}: {name}: memdir and the bare query differ")
        check_recall(outputs["recall --task"][1], recalled, recall_floor)
        boot_outputs = {"boot --json": call_json(memdir, envs["boot"])}
        boot_outputs["boot"] = outputs["boot"][1]
        boot_outputs["boot --subagent"] = boot.run([memdir, "boot", "--subagent"], envs["boot"])[1]
        boot_outputs["bare"] = outputs["bare read, boot"][1]
        boot_outputs["bare, no MEMORY.md"] = boot.run(
            [python, "-c", boot.BARE, *boot_paths[:-1]], envs["boot"]
        )[1]
        boot.check(boot_outputs, boot_paths)
        hot = boot.read(hook_paths[0])
        hooks.check(
            "SessionStart", outputs["hook SessionStart"][1], outputs["hook SessionStart"][2], hot
        )

        times: dict[str, list[float]] = {side: [] for side in sides}
        for run_no in range(WARMUP + args.runs):
            for side in common.rotate(run_no, list(sides)):
                took, out, err = call(side)
                if side.startswith("hook SessionStart"):
                    hooks.check("SessionStart", out, err, hot)
                if run_no >= WARMUP:
                    times[side].append(took)
        stop_server(runtime)
        imports = {}
        if args.profile:  # what a call in its own process imports: no server is started
            for side, (floor, cmd, env, stdin) in sides.items():
                if floor is not None:
                    alone = {**envs[env], "MEMDIR_FORKSERVER": "0"}
                    imports[side] = importtime(
                        python, cmd, alone, stdin() if stdin else None, args.profile_runs
                    )

    stats = {side: common.stats_ms(times[side]) for side in sides}
    rows = []
    for side, (floor, *_rest) in sides.items():
        row = common.side_row(side, stats, floor)
        command = side.removesuffix(f" {ALONE}").split()[-1] if floor else None
        command = {"recall --task": "recall"}.get(side.removesuffix(f" {ALONE}"), command)
        if side.startswith("search"):
            command = "search"
        judged_here = floor is not None and not side.endswith(ALONE)
        row["target"] = TARGETS.get(command or "") if judged_here else None
        row["ok"] = row["ratio_p50"] <= row["target"] if judged_here else None
        row["imports_ms"] = imports.get(side)
        rows.append(row)
    judged = [r for r in rows if r["target"] is not None]
    by = {r["side"]: r for r in rows}
    start = stats["python -c pass"]["p50"]
    summary: dict[str, Any] = {
        "targets": TARGETS,
        "search_worst_ratio_p50": max(
            r["ratio_p50"] for r in judged if r["side"].startswith("search")
        ),
        "recall_ratio_p50": by["recall --task"]["ratio_p50"],
        "boot_ratio_p50": by["boot"]["ratio_p50"],
        "session_start_ratio_p50": by["hook SessionStart"]["ratio_p50"],
        "alone_ratio_p50": {r["side"]: r["ratio_p50"] for r in rows if r["side"].endswith(ALONE)},
        "p50_ms": {side: stats[side]["p50"] for side in sides},
        "split_p50_ms": {
            "interpreter": start,
            "import memdir.cli.run": stats["import memdir.cli.run"]["p50"] - start,
        },
        "facts": args.facts[0],
        "entries": args.entries,
        "notes": args.notes,
        "boot_entries": args.boot_entries,
        "days": args.days,
        "loadavg": list(os.getloadavg()),
        "ok": all(r["ok"] for r in judged),
    }
    common.print_table(
        f"cold start, whole processes beside their floors: search on {args.facts[0]:,} facts; "
        f"recall on {args.entries:,} entries + {args.notes:,} notes; boot and SessionStart on "
        f"{args.boot_entries:,} entries + {args.days} daily logs; median and p95 of "
        f"{args.runs} runs, ms",
        [
            *common.SIDE_COLUMNS,
            ("target", "target", ""),
            ("ok", "ratio p50 ≤ target", ""),
            *([("imports_ms", "imports ms", ".1f")] if args.profile else []),
        ],
        rows,
    )
    params = {k: v for k, v in vars(args).items() if k not in ("out_dir", "cache_dir")}
    params.update(warmup=WARMUP, memdir=memdir, facts=args.facts[0])
    common.write_result(NAME, args.out_dir, params, rows, summary)
    return 0


def wait_for_server(runtime: str, timeout: float = 60.0) -> bool:
    """Whether the fork server in `runtime` listens within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if glob.glob(os.path.join(runtime, "memdir", "cli-*.sock")):
            return True
        time.sleep(0.05)
    return False


def stop_server(runtime: str) -> None:
    for lock in glob.glob(os.path.join(runtime, "memdir", "cli-*.lock")):
        with open(lock) as handle:
            pid = handle.read().strip()
        if pid.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)


def call_json(memdir: str, env: dict[str, str]) -> str:
    return boot.run([memdir, "boot", "--json"], env)[1]


if __name__ == "__main__":
    sys.exit(main())
