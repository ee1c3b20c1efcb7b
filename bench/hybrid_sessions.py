"""Hybrid search latency on a store whose facts were written in sessions: the code before the
context ranking (Q3: neighbours and groups, search/context.py; commit c39382e by default)
beside this checkout, in one run.

The context ranking only runs on a store with group documents: facts written in sessions
(their pages) or indexed files. So the store here is what an agent's looks like: --facts
make_facts texts written in sessions of --session-facts (default 20-50) facts each
(Memory.start_session, bind_session, add_facts, end_session, as bench/locomo.py writes each
LoCoMo session), inside Memory.bulk(), plus the markdown of ~--chunks chunks (scale.py's
markdown store: its files, indexed by each side's own code), every fact and chunk given a
vector the way scale.py gives them: --pool corpus texts embedded with the real model, each
item's vector a normalised mix of two of them (a distinct vector per text); the question is
embedded with the real model on every search.

Each side builds its own store with its own code (the schema differs: the search groups are
a migration of the after side) and is measured in a child process of its own, PYTHONPATH at
that side's src/ (the before side's from `git archive`): one warm Memory, every question
searched once in each mode first, then --runs rounds of every question in each mode, the
modes taking turns going first and the sides taking turns going first each round (only one
side runs at a time). Reported per mode: p50/p95/min/max and the ratio after/before.
--profile adds the cumulative cProfile of --profile-calls hybrid searches on each side.

    python bench/hybrid_sessions.py [--facts 100k] [--chunks 10k] [--session-facts 20,50]
                                    [--before c39382e] [--runs 20] [--pool 2048] [--profile]
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from typing import Any

import common
import scale

NAME = "hybrid_sessions"
BEFORE = "c39382e"  # the last commit before calibrated scores and the context ranking
LIMIT = 10
TARGET_RATIO_P95 = 1.0  # hybrid p95 no worse than before the context ranking
MODES = ("hybrid", "lexical")
QUESTIONS = scale.QUESTIONS
SIDES = ("before", "after")
TEMPLATE_SKIP = ("memory.db", "memory.db-wal", "memory.db-shm", "complete")


def log(message: str) -> None:
    scale.log(message)


# -- the two versions of the code ------------------------------------------------------


def git(*args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", common.BENCH_DIR, *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{NAME}: git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def source_of(commit: str, cache_dir: str) -> tuple[str, str]:
    """(the src/ dir of `commit`, its short hash): exported once into the cache dir."""
    sha = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    root = os.path.join(os.path.abspath(cache_dir), f"code-{sha[:12]}")
    if not os.path.isdir(os.path.join(root, "src", "memdir")):
        building = root + ".building"
        shutil.rmtree(building, ignore_errors=True)
        os.makedirs(building)
        top = git("rev-parse", "--show-toplevel")
        archive = subprocess.run(
            ["git", "-C", top, "archive", sha, "src"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", building], input=archive.stdout, check=True)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(building, root)
    return os.path.join(root, "src"), sha[:12]


def child(src: str, argv: list[str], **popen: Any) -> subprocess.Popen[str]:
    """This script under the code of `src` (PYTHONPATH first, before the venv's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    env["PYTHONPATH"] = src
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *argv], env=env, text=True, **popen
    )


def check_source(src: str) -> str:
    import memdir

    where = os.path.abspath(memdir.__file__)
    if not where.startswith(os.path.join(os.path.abspath(src), "")):
        raise SystemExit(f"{NAME}: memdir came from {where}, not from {src}")
    return where


# -- the store (run by a child, under its side's code) ----------------------------------


def sessions_plan(facts: int, low: int, high: int, seed: int) -> list[int]:
    """How many facts each session writes, in order: uniform in [low, high]."""
    rng = random.Random(seed + 41)
    sizes: list[int] = []
    while sum(sizes) < facts:
        sizes.append(min(rng.randint(low, high), facts - sum(sizes)))
    return sizes


def build(args: Any) -> dict[str, Any]:
    """The side's store (built once, cached under its schema), its path and build figures."""
    import numpy as np

    check_source(args.src)
    pool = np.load(args.pool_file)
    low, high = args.session_facts
    key = (
        f"{NAME}-{args.facts}-sess{low}-{high}-md-{args.chunks}-seed{args.seed}-"
        f"{common.code_key()}-{scale.model_name()}-pool{len(pool)}"
    )
    state = os.path.join(os.path.abspath(args.cache_dir), key)
    done = os.path.join(state, "complete")
    if os.path.exists(done):
        with open(done, encoding="utf-8") as handle:
            return {"state": state, **json.load(handle), "cached": True}
    building = state + ".building"
    shutil.rmtree(building, ignore_errors=True)
    if args.template:  # the markdown's files only: this side's code indexes them
        shutil.copytree(args.template, building, ignore=shutil.ignore_patterns(*TEMPLATE_SKIP))
    else:
        os.makedirs(building)
    corpus = common.make_facts(args.facts, args.seed)
    plan = sessions_plan(args.facts, low, high, args.seed)
    log(f"{args.side}: {args.facts:,} facts in {len(plan):,} sessions, chunking the markdown")
    with common.open_memory(building) as memory:
        started = time.perf_counter()
        memory.sync_index()
        chunking_s = time.perf_counter() - started
        started, at = time.perf_counter(), 0
        with memory.bulk():
            for size in plan:
                session_id = memory.start_session("cli").id
                memory.bind_session(session_id)
                memory.add_facts(list(corpus[at : at + size]))
                memory.end_session(session_id)
                memory.bind_session(None)
                at += size
        facts_s = time.perf_counter() - started
        log(f"{args.side}: {args.facts / facts_s:,.0f} facts/s; storing the vectors")
        started = time.perf_counter()
        vectors = scale.fill_vectors(memory, pool)
        vectors_s = time.perf_counter() - started
    info = {
        "facts": args.facts,
        "sessions": len(plan),
        "chunking_s": chunking_s,
        "facts_s": facts_s,
        "vectors": vectors,
        "vectors_s": vectors_s,
        "schema": common.code_key(),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_loadavg": list(os.getloadavg()),
    }
    common.finish_build(building, state, info)
    return {"state": state, **info, "cached": False}


def shape(state: str) -> dict[str, Any]:
    """What the store holds, read from its db: facts, sessions, chunks, vectors, groups."""
    db = common.db_path(state)
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:

        def one(sql: str) -> int:
            return int(connection.execute(sql).fetchone()[0])

        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        found = {
            "facts": one("SELECT count(*) FROM facts"),
            "sessions": one("SELECT count(DISTINCT session_id) FROM facts"),
            "chunks": one("SELECT count(*) FROM chunks"),
            "vectors": one("SELECT count(*) FROM vectors"),
            "groups": one("SELECT count(*) FROM search_groups") if "search_groups" in tables else 0,
        }
    finally:
        connection.close()
    wal = db + "-wal"
    size = os.path.getsize(db) + (os.path.getsize(wal) if os.path.exists(wal) else 0)
    return {**found, "db_mib": size / 2**20}


# -- measuring (a child, under its side's code) -----------------------------------------


def serve(args: Any) -> None:
    """One warm Memory on the store: a round of searches per line read from stdin, its
    durations as one JSON line on stdout (nothing else goes there)."""
    out = sys.stdout
    sys.stdout = sys.stderr
    where = check_source(args.src)
    with common.open_memory(args.state) as memory:
        hits: dict[str, list[int]] = {mode: [] for mode in MODES}
        for text in QUESTIONS:
            for mode in MODES:
                hits[mode].append(len(memory.search(text, limit=LIMIT, mode=mode)))
        unembedded = memory.unembedded
        grouped = bool(getattr(memory.store, "has_groups", lambda: False)())
        out.write(
            json.dumps({"memdir": where, "hits": hits, "unembedded": unembedded, "groups": grouped})
            + "\n"
        )
        out.flush()
        for line in sys.stdin:
            asked = json.loads(line)
            if asked.get("profile"):
                out.write(json.dumps({"profile": profile(memory, asked["profile"])}) + "\n")
                out.flush()
                continue
            run_no = int(asked["run"])
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            for text in common.rotate(run_no, QUESTIONS):
                for mode in common.rotate(run_no, list(MODES)):
                    started = time.perf_counter()
                    memory.search(text, limit=LIMIT, mode=mode)
                    times[mode].append(time.perf_counter() - started)
            out.write(json.dumps({"times": times}) + "\n")
            out.flush()


def profile(memory: Any, calls: int) -> str:
    """The cumulative profile of `calls` hybrid searches over the questions."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(calls):
        memory.search(QUESTIONS[i % len(QUESTIONS)], limit=LIMIT, mode="hybrid")
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs().sort_stats("cumulative").print_stats(30)
    return text.getvalue()


class Side:
    """A measuring child: one side's warm Memory, asked for rounds in turn."""

    def __init__(self, name: str, src: str, state: str) -> None:
        self.name = name
        self.proc = child(
            src,
            ["--child", "serve", "--src", src, "--state", state],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ready = self.answer()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{NAME}: the {self.name} side's child ended early")
        found: dict[str, Any] = json.loads(line)
        return found

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.wait(timeout=60) != 0:
            raise SystemExit(f"{NAME}: the {self.name} side's child failed")


# -- main ------------------------------------------------------------------------------


def pair(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    return int(low), int(high or low)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=lambda t: common.sizes(t)[0], default=100_000)
    parser.add_argument(
        "--chunks", type=lambda t: common.sizes(t)[0], default=10_000, help="0: no markdown"
    )
    parser.add_argument(
        "--session-facts", type=pair, default=(20, 50), help="facts per session: low,high"
    )
    parser.add_argument("--before", default=BEFORE, help="the commit measured as before")
    parser.add_argument("--runs", type=int, default=20, help="rounds over every question")
    parser.add_argument("--pool", type=int, default=scale.POOL, help="texts the real model embeds")
    parser.add_argument("--profile", action="store_true", help="profile hybrid on each side")
    parser.add_argument("--profile-calls", type=int, default=60)
    # a child's own arguments
    parser.add_argument("--child", choices=("build", "serve"), help=argparse_hidden())
    parser.add_argument("--src", help=argparse_hidden())
    parser.add_argument("--state", help=argparse_hidden())
    parser.add_argument("--side", help=argparse_hidden())
    parser.add_argument("--template", help=argparse_hidden())
    parser.add_argument("--pool-file", help=argparse_hidden())
    args = parser.parse_args(argv)
    if args.child == "build":
        print(json.dumps(build(args)))
        return 0
    if args.child == "serve":
        serve(args)
        return 0
    from memdir.storage import embeddings

    if not embeddings.available():
        raise SystemExit(f"{NAME}: needs the embeddings extra: {embeddings.INSTALL}")
    load_start = scale.load()
    pool = scale.pool_vectors(args.pool, args.seed, args.cache_dir)
    pool_file = os.path.join(
        os.path.abspath(args.cache_dir),
        f"scale-pool-{args.pool}-seed{args.seed}-{scale.model_name()}.npy",
    )
    assert os.path.exists(pool_file) and len(pool) == args.pool
    template = (
        scale.markdown_store(args.chunks, args.seed, args.cache_dir)[0] if args.chunks else ""
    )
    before_src, before_commit = source_of(args.before, args.cache_dir)
    sources = {
        "before": (before_src, before_commit),
        "after": (os.path.join(os.path.dirname(common.BENCH_DIR), "src"), common._git_commit()),
    }
    builds: dict[str, dict[str, Any]] = {}
    for side in SIDES:
        src = sources[side][0]
        proc = child(
            src,
            [
                "--child",
                "build",
                "--side",
                side,
                "--src",
                src,
                "--template",
                template,
                "--pool-file",
                pool_file,
                "--facts",
                str(args.facts),
                "--chunks",
                str(args.chunks),
                "--session-facts",
                ",".join(map(str, args.session_facts)),
                "--seed",
                str(args.seed),
                "--cache-dir",
                args.cache_dir,
            ],
            stdout=subprocess.PIPE,
        )
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{NAME}: building the {side} side's store failed")
        builds[side] = json.loads(out.strip().splitlines()[-1])
        log(f"{side}: store {builds[side]['state']} (cached: {builds[side]['cached']})")
    log("measuring, the sides in turn")
    sides = {side: Side(side, sources[side][0], builds[side]["state"]) for side in SIDES}
    times: dict[tuple[str, str], list[float]] = {(s, m): [] for s in SIDES for m in MODES}
    try:
        for run_no in range(args.runs):
            for side in common.alternate(run_no, SIDES):
                got = sides[side].ask({"run": run_no})
                for mode in MODES:
                    times[(side, mode)] += got["times"][mode]
        profiles = (
            {side: sides[side].ask({"profile": args.profile_calls})["profile"] for side in SIDES}
            if args.profile
            else {}
        )
    finally:
        for side_proc in sides.values():
            side_proc.close()
    load_end = scale.load()
    shapes = {side: shape(builds[side]["state"]) for side in SIDES}
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        stats = {side: common.stats_ms(times[(side, mode)]) for side in SIDES}
        for side in SIDES:
            row = common.side_row(side, stats, "before" if side == "after" else None)
            rows.append({"table": "latency", "mode": mode, "commit": sources[side][1], **row})
    details = [
        {
            "table": "store",
            "side": side,
            "commit": sources[side][1],
            **shapes[side],
            "schema": builds[side]["schema"],
            "has_groups": sides[side].ready["groups"],
            "unembedded": sides[side].ready["unembedded"],
            "hits": sides[side].ready["hits"],
            "build_s": builds[side]["chunking_s"]
            + builds[side]["facts_s"]
            + builds[side]["vectors_s"],
            "build_cached": builds[side]["cached"],
        }
        for side in SIDES
    ]
    loads = f"load {load_start} → {load_end}"
    common.print_table(
        f"warm in-process Memory.search, ms: {args.runs} rounds over {len(QUESTIONS)} questions "
        f"per mode and side, the sides and modes taking turns; before = {args.before} "
        f"({before_commit}), after = this checkout; ratio = after / before; {loads}",
        [("mode", "mode", ""), ("commit", "commit", ""), *common.SIDE_COLUMNS],
        rows,
    )
    common.print_table(
        f"the stores (each built by its own side's code): facts in sessions of "
        f"{args.session_facts[0]}-{args.session_facts[1]}, ~{args.chunks:,} markdown chunks, a "
        f"vector for every item ({args.pool:,} texts embedded with {scale.model_name()}, every "
        "vector a normalised mix of two of them; the question embedded by the real model)",
        [
            ("side", "side", ""),
            ("commit", "commit", ""),
            ("facts", "facts", ",d"),
            ("sessions", "sessions", ",d"),
            ("chunks", "chunks", ",d"),
            ("vectors", "vectors", ",d"),
            ("groups", "group docs", ",d"),
            ("has_groups", "context ranked", ""),
            ("db_mib", "db MiB", ",.0f"),
            ("build_s", "build s", ",.0f"),
        ],
        details,
    )
    for side, text in profiles.items():
        print(f"\n### profile: {args.profile_calls} hybrid searches, {side} side\n\n```\n{text}```")
    ratios = {
        f"{row['mode']}_ratio_{q}": row[f"ratio_{q}"]
        for row in rows
        if row["side"] == "after"
        for q in ("p50", "p95")
    }
    summary = {
        "before": before_commit,
        "after": sources["after"][1],
        **ratios,
        "target_ratio_p95": TARGET_RATIO_P95,
        "p95_ms": {f"{r['mode']}_{r['side']}": r["p95_ms"] for r in rows},
        "p50_ms": {f"{r['mode']}_{r['side']}": r["p50_ms"] for r in rows},
        "store": shapes["after"],
        # the figures stand for what they say: every item had a vector, each side ran its
        # own code, every question found something, and the after side ranked in context
        "ok": all(
            d["unembedded"] == 0 and d["vectors"] == d["facts"] + d["chunks"] for d in details
        )
        and all(min(h) > 0 for d in details for h in d["hits"].values())
        and details[1]["has_groups"],
        "loadavg_start": load_start,
        "loadavg_end": load_end,
    }
    params = {
        "facts": args.facts,
        "chunks": args.chunks,
        "session_facts": list(args.session_facts),
        "before": args.before,
        "runs": args.runs,
        "pool": args.pool,
        "limit": LIMIT,
        "seed": args.seed,
        "questions": QUESTIONS,
    }
    common.write_result(NAME, args.out_dir, params, [*rows, *details], summary)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
