"""The memory browser (V): how long `memdir ui` takes to answer its first page, and what
each page costs over the facade call behind it.

- start: from spawning `memdir ui --port N` to its address printed (it prints it once it
  listens: "ready"), and to the overview page answered (200, after the token's redirect:
  "first page"), beside `memdir serve --http` spawned
  the same way to its first HTTP answer (the MCP server the browser can also be mounted
  in). Target: ready under 1 s.
- pages: GET /, /doctor, /timeline and /search?q=... (lexical) against the running browser on a
  store of --facts facts (common.build_store, copied: the browser records its session),
  each beside the same facade call made in this process (stats + both boots for the
  overview; doctor; timeline; search), so the ratio is what serving and rendering add.

    python bench/ui.py [--facts 10k] [--starts 5] [--runs 20]
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import common

QUERY = "deploy staging database"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(port: int, path: str, cookie: str | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def spawn(argv: list[str], env: dict[str, str], out: str) -> subprocess.Popen[bytes]:
    with open(out, "wb") as handle:
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def until(what: Callable[[], Any], deadline: float = 60.0) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = what()
        if value:
            return value
        time.sleep(0.002)
    raise SystemExit(f"not reached in {deadline} s: {what}")


def start_ui(
    state: str, env: dict[str, str], out: str
) -> tuple[float, float, subprocess.Popen[bytes], int, str]:
    """(seconds to ready, to the overview page, the process, its port, its cookie)."""
    port = free_port()
    started = time.perf_counter()
    proc = spawn([common.venv_bin("memdir"), "ui", "--port", str(port)], env, out)

    def address() -> str | None:
        if proc.poll() is not None:
            raise SystemExit(open(out).read())
        found = re.search(r"open: (\S+)", open(out).read())
        return found.group(1) if found else None

    url = until(address)
    ready = time.perf_counter() - started
    split = urllib.parse.urlsplit(url)
    status, headers, _ = get(port, f"{split.path}?{split.query}")
    assert status == 303, status
    cookie = headers["set-cookie"].split(";")[0]
    status, _, body = get(port, "/", cookie)
    took = time.perf_counter() - started
    assert status == 200 and b"Overview" in body, status
    return ready, took, proc, port, cookie


def start_serve(env: dict[str, str], out: str) -> float:
    port = free_port()
    started = time.perf_counter()
    proc = spawn([common.venv_bin("memdir"), "serve", "--http", f"127.0.0.1:{port}"], env, out)

    def answers() -> bool:
        if proc.poll() is not None:
            raise SystemExit(open(out).read())
        try:
            get(port, "/mcp")
        except OSError:
            return False
        return True

    until(answers)
    took = time.perf_counter() - started
    stop(proc)
    return took


def main() -> None:
    parser = common.parser(__doc__ or "")
    parser.add_argument("--facts", default="10k")
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    n = common.sizes(args.facts)[0]
    cached = common.build_store(n, args.seed, args.cache_dir)
    work = tempfile.mkdtemp(prefix="memdir-ui-bench-")
    state = os.path.join(work, "state")
    shutil.copytree(cached, state)
    env = common.child_env(state, args.cache_dir)
    env["MEMDIR_FORKSERVER"] = "0"
    try:
        ui_ready, ui_page = "memdir ui (ready)", "memdir ui (first page)"
        serve = "memdir serve --http"
        times: dict[str, list[float]] = {ui_ready: [], ui_page: [], serve: []}
        for run_no in range(args.starts + 1):  # the first of each warms the caches
            for side in common.rotate(run_no, [ui_page, serve]):
                if side == ui_page:
                    ready, took, proc, _port, _cookie = start_ui(
                        state, env, os.path.join(work, "ui.out")
                    )
                    stop(proc)
                    if run_no:
                        times[ui_ready].append(ready)
                else:
                    took = start_serve(env, os.path.join(work, "serve.out"))
                if run_no:
                    times[side].append(took)
        stats = {side: common.stats_ms(t) for side, t in times.items()}
        start_rows = [
            common.side_row(ui_ready, stats, serve),
            common.side_row(ui_page, stats, serve),
            common.side_row(serve, stats, None),
        ]
        common.print_table(
            f"Start: spawn to first answer ({args.starts} starts)",
            common.SIDE_COLUMNS,
            start_rows,
        )

        _ready, _took, proc, port, cookie = start_ui(state, env, os.path.join(work, "ui.out"))
        sys.path.insert(0, os.path.join(common.BENCH_DIR, "..", "src"))
        from memdir.curation import doctor

        memory = common.open_memory(state)
        memory.search(QUERY, mode="lexical")  # the index synced once, as the page's first

        def overview() -> None:
            memory.stats()
            memory.boot(subagent=False)
            memory.boot(subagent=True)

        pages = {
            "/": overview,
            "/doctor": lambda: doctor.run(memory),
            "/timeline": lambda: memory.timeline(limit=200),
            f"/search?q={urllib.parse.quote(QUERY)}&mode=lexical": lambda: memory.search(
                QUERY, mode="lexical", limit=20
            ),
        }
        page_rows = []
        try:
            for path, call in pages.items():
                sides = {
                    f"GET {path.split('?')[0]}": lambda path=path: get(port, path, cookie),
                    "facade call": call,
                }
                timed = common.time_sides(sides, args.runs, 2)
                page_stats = {side: common.stats_ms(t) for side, t in timed.items()}
                page_rows.append(
                    common.side_row(next(iter(sides)), page_stats, "facade call")
                    | {"page": path.split("?")[0]}
                )
                page_rows.append(common.side_row("facade call", page_stats, None) | {"page": ""})
        finally:
            memory.close()
            stop(proc)
        common.print_table(
            f"Pages on {n:,} facts ({args.runs} calls each)", common.SIDE_COLUMNS, page_rows
        )
        ready_p50 = stats[ui_ready]["p50"]
        summary = {
            "ready_p50_ms": ready_p50,
            "first_page_p50_ms": stats[ui_page]["p50"],
            "ready_target_ms": 1000,
            "ok": ready_p50 < 1000,
            "ready_ratio_vs_serve_http": start_rows[0]["ratio_p50"],
        }
        print(f"ready p50 {ready_p50:.0f} ms (target < 1000 ms)")
        common.write_result(
            "ui",
            args.out_dir,
            {"facts": n, "starts": args.starts, "runs": args.runs},
            start_rows + page_rows,
            summary,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
