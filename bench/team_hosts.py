"""Team mode across machines (W1): acknowledged writes per second of --hosts hosts x
--writers writers on one scope of one PostgreSQL, each host a network namespace reaching the
server over TCP on a private subnet (tests/netns.py; needs root and iproute2's `ip`).

Every writer is a process of its own adding distinct facts through Memory.add_fact for
--seconds (bench/postgres.py's writer, embedding left to later), each host with its own
memory root. Beside it, in the same run and against the same server, the same number of
writers on one host (the root namespace): over TCP to the same address, and over the
server's unix socket (what bench/postgres.py measures). Each layout writes --rounds times
into a fresh scope, the layouts taking turns going first; reported per layout: the median
round's facts/s, the slowest and fastest, and the ratio to the socket baseline. Every fact a
writer was told was stored is counted, and the scope's count must match.

Not measured here: a network with latency (the namespaces share this machine's kernel: a
round trip is microseconds), PostgreSQL with durability on (the test server runs fsync off).

    python bench/team_hosts.py [--hosts 3] [--writers 4] [--seconds 10] [--rounds 3]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from typing import Any

import common
from postgres import WRITER

sys.path.insert(0, os.path.join(os.path.dirname(common.BENCH_DIR), "tests"))

import netns  # noqa: E402  (the suite's hosts, tests/netns.py)
import pg_server  # noqa: E402  (the suite's throwaway server, tests/pg_server.py)

NAME = "team_hosts"
LAYOUTS = ("hosts-tcp", "one-host-tcp", "one-host-socket")


def log(message: str) -> None:
    print(f"[{NAME}] {message}", file=sys.stderr, flush=True)


def round_of(
    layout: str,
    hosts: netns.Hosts,
    server: pg_server.Server,
    database: str,
    writers: int,
    seconds: float,
    work: str,
) -> dict[str, Any]:
    """One round of one layout into a fresh scope: its acknowledged facts."""
    from memdir import Memory

    scope = f"w{len(os.listdir(work))}"
    folder = os.path.join(work, scope)
    spread = layout == "hosts-tcp"
    url = server.url(database) if layout == "one-host-socket" else server.tcp_url(database)
    go = os.path.join(folder, "go")
    procs = []
    for k in range(len(hosts.names)):
        state = os.path.join(folder, f"host{k}" if spread else "host")
        os.makedirs(state, exist_ok=True)
        with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
            handle.write('[search]\nembed_on_write = "loaded"\n')
        env = {name: v for name, v in os.environ.items() if not name.startswith("MEMDIR_")}
        env.update(MEMDIR_DATABASE_URL=url, MEMDIR_DATABASE_SCOPE=scope)
        for w in range(writers):
            argv = [sys.executable, "-c", WRITER, state, go, str(seconds), f"h{k}w{w}"]
            procs.append(
                subprocess.Popen(
                    hosts.command(k, argv) if spread else argv,
                    stdout=subprocess.PIPE, text=True, env=env,
                )
            )  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    open(go, "w").close()
    acked = sum(int(proc.communicate()[0].strip()) for proc in procs)
    if any(proc.returncode != 0 for proc in procs):
        raise SystemExit(f"{NAME}: {layout}: a writer failed")
    env = {"MEMDIR_DATABASE_URL": server.url(database), "MEMDIR_DATABASE_SCOPE": scope}
    state = os.path.join(folder, "host0" if spread else "host")
    with Memory(state, env=env, cwd=state) as memory:
        stored = memory.store.count_facts().get("active", 0)
    if stored != acked:
        raise SystemExit(f"{NAME}: {layout}: {acked} writes acknowledged, {stored} stored")
    log(f"{layout}: {len(procs)} writers, {acked:,} facts in {seconds:.0f} s")
    return {"acked": acked, "per_s": acked / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3, help="hosts (network namespaces)")
    parser.add_argument("--writers", type=int, default=4, help="writer processes a host")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long they write")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each layout")
    args = parser.parse_args(argv)
    missing = netns.prerequisites()
    if missing:
        raise SystemExit(f"{NAME}: {missing}")
    work = os.path.join(os.path.abspath(args.cache_dir), f"team-hosts-work-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rounds: dict[str, list[dict[str, Any]]] = {layout: [] for layout in LAYOUTS}
    try:
        with netns.Hosts(args.hosts) as hosts:
            server = pg_server.start(hosts.address, clients=hosts.subnet)
            try:
                database = server.new_database()
                for run_no in range(args.rounds):
                    for layout in common.rotate(run_no, list(LAYOUTS)):
                        rounds[layout].append(
                            round_of(layout, hosts, server, database, args.writers,
                                     args.seconds, work)
                        )  # fmt: skip
            finally:
                hosts.close()  # its writers first, then the server they write to
                server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = args.hosts * args.writers
    rows = []
    for layout in LAYOUTS:
        rates = [r["per_s"] for r in rounds[layout]]
        rows.append(
            {
                "layout": layout,
                "hosts": args.hosts if layout == "hosts-tcp" else 1,
                "writers": total,
                "acked": sum(r["acked"] for r in rounds[layout]),
                "per_s": statistics.median(rates),
                "min_per_s": min(rates),
                "max_per_s": max(rates),
            }
        )
    base = rows[-1]["per_s"]
    for row in rows:
        row["ratio"] = common.ratio(row["per_s"], base)
    common.print_table(
        f"acknowledged writes: {total} writers on one scope, {args.seconds:.0f} s a round, "
        f"median of {args.rounds}",
        [("layout", "layout", ""), ("hosts", "hosts", ",d"), ("writers", "writers", ",d"),
         ("acked", "facts", ",d"), ("per_s", "facts/s", ",.0f"), ("min_per_s", "min", ",.0f"),
         ("max_per_s", "max", ",.0f"), ("ratio", "/ socket", ".2f")],
        rows,
    )  # fmt: skip
    common.write_result(
        NAME,
        args.out_dir,
        {
            "hosts": args.hosts,
            "writers": args.writers,
            "seconds": args.seconds,
            "rounds": args.rounds,
        },
        rows,
        {"per_s": rows[0]["per_s"], "rounds": rounds},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
