"""The writers of a team-mode host for tests/test_team_hosts.py (W1): scripts run as real
processes inside a host's network namespace (tests/netns.py), each writing one tier in a
loop until a stop file appears and logging, one JSON line each, what it is about to write
(`try`) and whether the store acknowledged it (`ack`) or refused it as not done (`refused`:
the scope's lock stayed busy past memory.busy_timeout_ms, "nothing was changed"; never
retried). A writer writes at most a given number of times, then idles until the stop file,
so no tier outgrows what it may hold (HOT.md's cap, H2) however unevenly the writers run.
A line is one write() of a line-buffered file, logged before the write starts and after it
is answered, so the log says which write was in flight when its host died. A line may be
read before it is all there (a reader is not held off by a write), and a SIGKILL may cut
one short: a line without its newline is left out. A cut `try` had not started its write;
a cut `ack` leaves its `try` last, a write in flight, whole or absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# CLI writers: one kind of write each, every call a `memdir` process of its own. Every writer
# starts writing when the go file appears: the test makes it once every MCP writer has its
# server listening ("ready"), so a server's start does not queue behind the others' writes.
CLI_KINDS = ("fact", "hot", "daily", "procedure", "entry", "task")

CLI_WRITER = r"""
import json, os, subprocess, sys, time
kind, host, log_path, stop, limit, go = sys.argv[1:7]
limit = int(limit)  # writes at most (0: no limit)
BEGIN, END = "MEMDIR_MEMORIZE_" + "BEGIN", "MEMDIR_MEMORIZE_" + "END"
REFUSED = "is locked by another writer"
log = open(log_path, "a", buffering=1, encoding="utf-8")

def say(**line):
    log.write(json.dumps(line) + "\n")

def memdir(*args, stdin=None):
    proc = subprocess.run([sys.executable, "-m", "memdir", "--json", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)
    said = proc.stdout + proc.stderr  # with --json, an error is JSON on stdout
    if proc.returncode != 0 and REFUSED in said:
        return None  # the scope's lock was busy past memory.busy_timeout_ms: not done
    if proc.returncode != 0:
        say(failed=" ".join(args), code=proc.returncode, err=said[-2000:])
        sys.exit(f"memdir {' '.join(args)} exited with {proc.returncode}: {said}")
    return json.loads(proc.stdout)

def blocks(*items):
    return "".join(f"{BEGIN}\n{json.dumps(item)}\n{END}\n" for item in items)

while not os.path.exists(go):  # every host's writers start together
    time.sleep(0.01)
n = 0
while not os.path.exists(stop):
    if limit and n >= limit:  # enough of this tier: idle until told to stop
        time.sleep(0.05)
        continue
    tag = f"{host}-{kind}-{n}"
    if kind == "fact":
        text = f"Host {host} fact writer, write {n}: the {tag} service runs on port {n}"
        say(op="try", kind="fact", text=text)
        done = memdir("fact", "add", "-c", "learning", text)
        if done is None:
            say(op="refused", kind="fact", text=text)
        else:
            say(op="ack", kind="fact", text=text, id=done["id"], duplicate=done["duplicate"])
    elif kind in ("hot", "daily"):
        text = f"hot {tag}" if kind == "hot" else f"daily entry {tag}"
        say(op="try", kind=kind, text=text)
        done = memdir(kind, "append", text)
        say(op="refused" if done is None else "ack", kind=kind, text=text)
    elif kind == "procedure":
        body = f"# Procedure {tag}\n\n" + "".join(f"{i}. step {i} of {tag}\n" for i in range(1, 40))
        say(op="try", kind="procedure", name=tag, text=body)
        done = memdir("procedure", "write", tag, "-", stdin=body)
        say(op="refused" if done is None else "ack", kind="procedure", name=tag, text=body)
    elif kind == "entry":
        body = "".join(f"line {i} of entry {tag}\n" for i in range(40))
        say(op="try", kind="entry", name=tag, text=body)
        item = {"scope": "global", "name": tag, "description": f"entry {tag}", "content": body}
        done = memdir("memorize", stdin=blocks(item))
        if done is not None and not done["applied"] and REFUSED in str(done["warnings"]):
            done = None  # memorize never fails its caller (M4): a refusal is its warning
        if done is not None:
            assert [a["action"] for a in done["applied"]] == ["created"], done
        say(op="refused" if done is None else "ack", kind="entry", name=tag, text=body)
    elif kind == "task":
        say(op="try", kind="task", name=tag)
        done = memdir("task", "start", tag)
        say(op="refused" if done is None else "ack", kind="task", name=tag)
        if done is not None:
            text = f"note of task {tag}"
            say(op="try", kind="note", name=tag, text=text)
            done = memdir("memorize", "--task", tag, stdin=blocks({"content": text}))
            if done is not None and not done["applied"] and REFUSED in str(done["warnings"]):
                done = None
            if done is not None:
                assert [a["action"] for a in done["applied"]] == ["noted"], done
            say(op="refused" if done is None else "ack", kind="note", name=tag, text=text)
    n += 1
"""

# The MCP writer: starts `memdir serve --http` on its host's own loopback and drives it with
# the `mcp` SDK's streamable HTTP client, cycling through the tools that write.
MCP_WRITER = r"""
import json, os, signal, socket, subprocess, sys, time
import anyio
from mcp import Client
host, log_path, stop, port, limit, go = sys.argv[1:7]
limit = int(limit)
REFUSED = "is locked by another writer"
log = open(log_path, "a", buffering=1, encoding="utf-8")

def say(**line):
    log.write(json.dumps(line) + "\n")

server = subprocess.Popen([sys.executable, "-m", "memdir", "serve", "--http",
                           f"127.0.0.1:{port}"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=open(log_path + ".serve", "w"))
deadline = time.monotonic() + 60  # a bound on a hung start, not a measure
while True:
    if server.poll() is not None:
        sys.exit(f"memdir serve exited with {server.returncode} before listening")
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("memdir serve did not listen in 60 s")
        time.sleep(0.05)

say(op="ready")
while not os.path.exists(go):
    time.sleep(0.01)

async def call(client, tool, arguments):
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    if result.is_error and REFUSED in text:
        return None  # the scope's lock was busy past memory.busy_timeout_ms: not done
    if result.is_error:
        say(failed=tool, err=text)
        sys.exit(f"{tool} failed: {text}")
    return json.loads(text)

async def main():
    # connected only once let go: a connection idle for uvicorn's keep-alive (5 s) is closed
    # by the server, and a call sent as it closes fails (httpx ReadError)
    async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as client:
        n = 0
        while not os.path.exists(stop):
            if limit and n >= limit:
                await anyio.sleep(0.05)
                continue
            tag = f"{host}-mcp-{n}"
            step = n % 4
            if step == 0:
                text = f"Host {host} MCP writer, write {n}: the {tag} queue drains nightly"
                say(op="try", kind="fact", text=text)
                done = await call(client, "memory_update", {"target": "fact", "action": "set",
                                  "category": "decision", "content": text})
                if done is None:
                    say(op="refused", kind="fact", text=text)
                else:
                    say(op="ack", kind="fact", text=text, id=done["fact"]["id"],
                        duplicate=done["fact"]["duplicate"])
            elif step == 1:
                text = f"daily entry {tag}"
                say(op="try", kind="daily", text=text)
                done = await call(client, "daily_append", {"text": text})
                say(op="refused" if done is None else "ack", kind="daily", text=text)
            elif step == 2:
                body = f"# Procedure {tag}\n\n" + "".join(
                    f"{i}. step {i} of {tag}\n" for i in range(1, 40))
                say(op="try", kind="procedure", name=tag, text=body)
                done = await call(client, "procedure_write", {"name": tag, "content": body})
                say(op="refused" if done is None else "ack", kind="procedure", name=tag,
                    text=body)
            else:
                body = "".join(f"line {i} of entry {tag}\n" for i in range(40))
                say(op="try", kind="entry", name=tag, text=body)
                done = await call(client, "memorize", {"blocks": [{"scope": "global",
                                  "name": tag, "description": f"entry {tag}", "content": body}]})
                if done is not None and not done["applied"] and REFUSED in str(done["warnings"]):
                    done = None
                if done is not None:
                    assert [a["action"] for a in done["applied"]] == ["created"], done
                say(op="refused" if done is None else "ack", kind="entry", name=tag, text=body)
            n += 1

try:
    anyio.run(main)
finally:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
"""


def write_scripts(folder: Path) -> tuple[Path, Path]:
    """The two writer scripts, written to `folder`: (cli, mcp)."""
    cli, mcp = folder / "cli_writer.py", folder / "mcp_writer.py"
    cli.write_text(CLI_WRITER, encoding="utf-8")
    mcp.write_text(MCP_WRITER, encoding="utf-8")
    return cli, mcp


def read_log(path: Path) -> list[dict[str, Any]]:
    """A writer's log, line by line (a missing log: a writer that never started)."""
    if not path.exists():
        return []
    complete = path.read_text(encoding="utf-8", errors="replace").split("\n")[:-1]
    return [json.loads(line) for line in complete]


def acks(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("op") == "ack"]


def refusals(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Writes answered "locked by another writer ... nothing was changed" (the scope's lock
    stayed busy past memory.busy_timeout_ms): the writer moved on to its next write."""
    return [line for line in lines if line.get("op") == "refused"]


def in_flight(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The write a log tried last and never saw acknowledged, if any."""
    tries = [line for line in lines if line.get("op") in ("try", "ack", "refused")]
    if tries and tries[-1]["op"] == "try":
        return tries[-1]
    return None


def host_env(root: Path, k: int, url: str, scope: str) -> dict[str, str]:
    """Host k's environment: its own state dir (memory root), home and runtime folder (so
    its own CLI fork server, C1), the team's URL and scope. Embedding is left to later, so
    what is measured is the writes."""
    import os

    base = root / f"host{k}"
    for sub in ("state", "home", "run"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "run").chmod(0o700)
    (base / "state" / "config.toml").write_text(
        '[search]\nembed_on_write = "loaded"\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    env.update(
        MEMDIR_STATE_DIR=str(base / "state"),
        MEMDIR_DATABASE_URL=url,
        MEMDIR_DATABASE_SCOPE=scope,
        HOME=str(base / "home"),
        XDG_RUNTIME_DIR=str(base / "run"),
    )
    return env
