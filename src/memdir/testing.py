"""Deterministic helpers for tests of memdir and of code built on it. Not fakes of our
storage: every helper here works on a real store on disk."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any


class FixedClock:
    """A clock that moves only when told to: `clock()` is the time, `advance()` moves it."""

    def __init__(self, start: float = 1_780_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def cli_env(state_dir: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a `memdir` child process pointed at `state_dir` and nothing else
    (and at the database the test was given, on PostgreSQL: W1)."""
    keep = ("MEMDIR_DATABASE_URL", "MEMDIR_DATABASE_SCOPE")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_") or k in keep}
    env["MEMDIR_STATE_DIR"] = state_dir
    env.update(extra or {})
    return env


PORT_BLOCK = 1000  # ports each test process draws from; blocks start at PORT_BASE
PORT_BASE = 16000


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port free on `address` now, for a server a test starts.

    Never one from bind(0): that draws from the kernel's ephemeral range, which every
    outgoing connection draws from too, so between this check and the server's bind a
    client in a parallel test could take it (the server then exits with "address in
    use"). Instead each pytest-xdist worker has a block of its own below that range
    (gw0 16000-16999, gw1 17000-..., a serial run the block after the last), walked from
    an offset its pid picks, so no two tests of one run ever share a port."""
    import socket

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    number = worker[2:] if worker.startswith("gw") else ""
    index = int(number) % 15 if number.isdigit() else 15  # blocks end below 32768
    start = PORT_BASE + PORT_BLOCK * index
    for step in itertools.islice(_port_steps, PORT_BLOCK):
        port = start + step % PORT_BLOCK
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((address, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {start}-{start + PORT_BLOCK - 1} on {address}")


_port_steps = itertools.count(os.getpid() % PORT_BLOCK)


# The first JSON-RPC message an MCP client sends: for tests that speak to a server raw.
MCP_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


def cli_command(*args: str) -> list[str]:
    """argv that runs this interpreter's memdir CLI."""
    return [sys.executable, "-m", "memdir", *args]


def at_once(
    argv: list[str],
    count: int,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> list[tuple[int, str, str]]:
    """`count` processes of `argv` started together (each given `stdin`), for tests of
    writers racing: each one's (exit code, stdout, stderr)."""
    import subprocess

    procs = [
        subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    outs = [proc.communicate(stdin, timeout=timeout) for proc in procs]
    return [(proc.returncode, out, err) for proc, (out, err) in zip(procs, outs, strict=True)]


class HashEmbedder:
    """A deterministic stand-in for the embedding model: each word (lowercased) adds a fixed
    random direction, so texts sharing words are similar. For tests of semantic search that
    must not depend on a model; needs numpy."""

    name = "hash-embedder"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> Any:
        import re
        import zlib

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                seed = zlib.crc32(word.encode("utf-8", "surrogatepass"))
                out[row] += np.random.default_rng(seed).standard_normal(self.dim)
            norm = float(np.linalg.norm(out[row]))
            if norm:
                out[row] /= norm
        return out


def poll(what: Callable[[], Any], deadline: float = 120.0, label: str = "") -> Any:
    """What `what` returns once it is truthy, looked at every 50 ms; AssertionError at the
    deadline. A wait for a process to come up or go, never a timing threshold."""
    import time

    end = time.monotonic() + deadline
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < end, f"{label or what} not reached in {deadline} s"
        time.sleep(0.05)


def lock_holder(lock: str) -> int | None:
    """The pid written in `lock` while a process holds it (a worker's, the fork server's),
    else None: a lock that can be taken has no holder; -1: held, its pid not written yet."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def worker_pid(state_dir: str) -> int | None:
    """The pid of the store's warm worker while it holds its lock (vector_worker.py)."""
    from .search.worker import Places

    return lock_holder(Places(state_dir).lock)


def forkserver_pid() -> int | None:
    """The pid of this installation's fork server for this environment (cli/forkserver.py)."""
    from .cli.forkserver import places

    return lock_holder(places()[2])


def _stop(holder: Callable[[], int | None], timeout: float) -> None:
    import signal
    import time

    deadline = time.monotonic() + timeout
    while (pid := holder()) is not None and time.monotonic() < deadline:
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def stop_worker(state_dir: str, timeout: float = 30.0) -> None:
    """End the store's warm worker, if one runs, and wait until it has let go of its lock:
    a test leaves no process behind it."""
    _stop(lambda: worker_pid(state_dir), timeout)


def starting_forkservers() -> list[int]:
    """Fork servers of this installation and environment that are still starting: their
    pid is not in the lock yet (it is written once the socket is bound), they may not
    even hold it. Found by what they run (this Python, `-m memdir.cli.forkserver`) and
    where their environment puts the lock; only this user's processes. Not a server's
    forked calls and spare (they run the same command: their parent is one), nor a
    server that let go of its lock and still waits for its calls (it has them)."""
    from .cli.forkserver import MODULE, places

    argv = [os.fsencode(sys.executable), b"-m", MODULE.encode()]
    lock = places()[2]
    parents: dict[int, int] = {}  # every process running that command -> its parent
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != os.getuid():
                continue
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if handle.read().split(b"\0")[:3] != argv:
                    continue
            with open(f"/proc/{name}/environ", "rb") as handle:
                pairs = [item.partition(b"=") for item in handle.read().split(b"\0") if item]
            with open(f"/proc/{name}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        env = {os.fsdecode(k): os.fsdecode(v) for k, _, v in pairs}
        if places(env)[2] == lock:
            parents[int(name)] = parent
    busy = set(parents.values())
    return [pid for pid, parent in parents.items() if parent not in parents and pid not in busy]


def stop_forkserver(timeout: float = 30.0) -> None:
    """End the fork server this environment's calls reach, if one runs or is starting
    (a call just started it: it may hold its lock with no pid written yet, or not hold it
    yet), and wait until it is gone."""

    def holder() -> int | None:
        pid = forkserver_pid()
        if pid is not None and pid > 0:
            return pid
        return next(iter(starting_forkservers()), pid)

    _stop(holder, timeout)


def stop_workers_under(root: str) -> None:
    """End every warm worker serving a store under `root` (a test's tmp dir): a test that
    ran the CLI on a store of its own, not its state dir, leaves no process behind."""
    prefix = os.path.join(os.path.realpath(root), "")
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if b"memdir.vector_worker" in args and len(args) >= 2:
            state = os.fsdecode(args[-2] if args[-1] == b"" else args[-1])
            if os.path.join(os.path.realpath(state), "").startswith(prefix):
                stop_worker(state)


class EmbeddingsStandIn:
    """A stand-in for an OpenAI-compatible embeddings endpoint (Q2): a real HTTP server on
    loopback, in a thread of the calling process, serving `POST /v1/embeddings` as
    Ollama, vLLM or a hosted API does. Its vectors are made from the words of each text
    (each word a fixed random direction, summed, deliberately not normalised: memdir must
    normalise), so texts sharing words are alike; `dimensions` in a request shortens
    them, as OpenAI's API does; the answer lists them out of order (by "index").

    `key`: the bearer token it requires (None: none). `fail`: an HTTP status to answer
    every request with instead, or "garbage" for a body that is not JSON. Every request
    is logged in `requests` (path, headers, body). Needs numpy."""

    DIM = 48

    def __init__(self, key: str | None = None) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.key = key
        self.fail: int | str | None = None
        self.requests: list[dict[str, Any]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # the log is `requests`
                pass

            def do_POST(self) -> None:
                import json

                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size) or b"null")
                standin.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                if standin.fail == "garbage":
                    return self._answer(200, b"<html>not json</html>")
                if standin.fail is not None:
                    return self._answer(int(standin.fail), b'{"error": "overloaded"}')
                if standin.key is not None and (
                    self.headers.get("Authorization") != f"Bearer {standin.key}"
                ):
                    return self._answer(401, b'{"error": {"message": "invalid api key"}}')
                if self.path != "/v1/embeddings":
                    return self._answer(404, b'{"error": "not found"}')
                dim = int(body.get("dimensions") or standin.DIM)
                data = [
                    {"object": "embedding", "index": i, "embedding": standin.vector(text, dim)}
                    for i, text in enumerate(body["input"])
                ]
                data.reverse()
                answer = {"object": "list", "model": body["model"], "data": data}
                self._answer(200, json.dumps(answer).encode())

            def _answer(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @classmethod
    def vector(cls, text: str, dim: int) -> list[float]:
        import re
        import zlib

        import numpy as np

        out = np.zeros(cls.DIM, dtype=np.float64)
        for word in re.findall(r"\w+", text.lower()):
            out += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(cls.DIM)
        return [float(x) * 3.0 for x in out[:dim]]

    def __enter__(self) -> EmbeddingsStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def texts(self) -> list[str]:
        """Every text it was asked to embed, in order."""
        return [
            text
            for request in self.requests
            if isinstance(request["body"], dict)
            for text in request["body"]["input"]
        ]
