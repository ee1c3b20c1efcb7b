"""`memdir serve` ends cleanly whatever its background threads are doing (U3, A2; issue
11.4): a client that leaves while the embedding model is still loading, SIGTERM or SIGINT
soon after start, over stdio and over HTTP. Before, ~1 in 14 short stdio sessions and 5 of
6 early SIGTERMs of an HTTP server aborted with exit 134, "terminate called without an
active exception": the model loaded on a thread still inside onnxruntime while the
interpreter finalised. Real server processes, the mcp SDK's client."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dbrows import own_store
from memdir import Memory
from memdir.storage import embeddings
from memdir.testing import MCP_INITIALIZE, cli_command, cli_env, free_port

pytestmark = [
    pytest.mark.slow,  # real server processes, and the model's warm-up
    pytest.mark.xdist_group("processes"),  # process storms take turns (Makefile)
    pytest.mark.timeout(240),
    pytest.mark.embeddings,  # the model's warm-up is what a shutdown must survive
    pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra"),
]
SESSIONS = 50
AT_ONCE = 4  # sessions run side by side: 50 in ~30 s on two cores
ABORT = "terminate called"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sessions_of(state: Path) -> list[tuple[str | None, str]]:
    with Memory(str(state)) as memory:
        return [(s.ended, s.surface) for s in memory.sessions()]


async def short_session(folder: Path, call: bool) -> tuple[str, str]:
    """One client: initialize, maybe one call, leave at once. `sh` runs the server and
    writes down its exit code (the SDK client keeps the process to itself). The client
    SIGTERMs the process group when a server takes over 2 s to leave (a loaded machine):
    sh outlives that to record the code, and the server's answer to it is tested too."""
    folder.mkdir()
    own_store(folder / "state")  # L1: a named state dir must exist
    code, err = folder / "code", folder / "err"
    script = f'trap true TERM; "{sys.executable}" -m memdir serve 2>"{err}"; echo $? >"{code}"'
    params = StdioServerParameters(
        command="sh", args=["-c", script], env=cli_env(str(folder / "state"))
    )
    async with Client(params, read_timeout_seconds=60) as client:
        answer = await client.call_tool("memory_search", {"query": "anything"}) if call else None
    with anyio.fail_after(60):
        while not code.exists() or not code.read_text().strip():
            await anyio.sleep(0.05)
    assert answer is None or not answer.is_error, (answer, err.read_text())  # what went wrong
    return code.read_text().strip(), err.read_text()


@pytest.mark.slow
@pytest.mark.anyio
async def test_fifty_short_stdio_sessions_all_exit_0(tmp_path: Path) -> None:  # U3 A2
    results: dict[int, tuple[str, str]] = {}
    limit = anyio.Semaphore(AT_ONCE)

    async def one(n: int) -> None:
        async with limit:
            results[n] = await short_session(tmp_path / f"s{n}", call=n % 2 == 1)

    async with anyio.create_task_group() as group:
        for n in range(SESSIONS):
            group.start_soon(one, n)
    codes = [results[n][0] for n in range(SESSIONS)]
    assert codes == ["0"] * SESSIONS, [(n, r) for n, r in results.items() if r[0] != "0"]
    assert not [n for n, (_, err) in results.items() if ABORT in err or "Traceback" in err]
    for n in range(SESSIONS):  # U3: each one recorded its end
        [(ended, surface)] = sessions_of(tmp_path / f"s{n}" / "state")
        assert ended is not None and surface == "mcp"


def wait_for_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    pytest.fail(f"no server on port {port}")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_http_server_stopped_right_after_start_exits_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """Stopped as soon as it listens, while the model is still loading: the documented
    clean exit (128 + the signal), no abort, the session recorded. Three runs: each stop
    lands at another instant of the warm-up."""
    for state in stopped_three_times(tmp_path, lambda state: start_http(state)[0], stop):
        [(ended, surface)] = sessions_of(state)
        assert ended is not None and surface == "mcp"


def stopped_three_times(
    tmp_path: Path,
    start: Callable[[Path], subprocess.Popen[bytes]],
    stop: signal.Signals,
    close_stdin: bool = False,
) -> list[Path]:
    """Three servers, each in a state dir of its own, started and at once sent `stop` (then
    their stdin closed, `close_stdin`: the client leaves too); each exits cleanly
    (exited_cleanly). The state dirs, for what they recorded."""
    states = []
    for run in range(3):
        state = tmp_path / f"run{run}"
        own_store(state)
        proc = start(state)
        try:
            proc.send_signal(stop)
            if close_stdin and proc.stdin is not None:
                proc.stdin.close()
                proc.stdin = None  # closed: communicate() leaves it alone
            exited_cleanly(proc, stop, state)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        states.append(state)
    return states


# -- every instant of a stop (A2, U3) ----------------------------------------------------


def start_stdio(state: Path) -> subprocess.Popen[bytes]:
    """A stdio server that has answered initialize; its stdin stays open, as a client's
    does while it waits for the server to go."""
    proc = subprocess.Popen(
        cli_command("serve"),
        env=cli_env(str(state)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(MCP_INITIALIZE) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer["id"] == 1 and "result" in answer, answer
    return proc


def spawn_http(state: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`memdir serve --http` on a free port, not yet waited for."""
    port = free_port()
    proc = subprocess.Popen(
        cli_command("serve", "--http", f"127.0.0.1:{port}"),
        env=cli_env(str(state)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, port


def start_http(state: Path) -> tuple[subprocess.Popen[bytes], int]:
    proc, port = spawn_http(state)
    wait_for_port(port, proc)
    return proc, port


def exited_cleanly(proc: subprocess.Popen[bytes], stop: signal.Signals, state: Path) -> None:
    """Gone within the test's time, with 128 + the first signal, neither an abort nor a
    traceback on stderr, and every session it started recorded as ended (U3)."""
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the server did not exit after the signal")
    text = proc.communicate()[1].decode()  # and closes the pipes
    assert (proc.returncode, ABORT in text, "Traceback" in text) == (128 + stop, False, False), text
    assert all(ended is not None for ended, _ in sessions_of(state))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stdio_server_stopped_while_its_client_holds_stdin_exits(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """A service manager's SIGTERM, or Ctrl+C in a terminal, with stdin still open: the
    SDK's reader thread waits for a line that never comes, and the process used to hang
    there for good."""
    proc = start_stdio(tmp_path)
    try:
        proc.send_signal(stop)
        exited_cleanly(proc, stop, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    [(ended, _)] = sessions_of(tmp_path)
    assert ended is not None


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stdio_server_stopped_while_warming_exits_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """Stopped while the model still loads, its client leaving at once (stdin closed):
    three runs, each stop at another instant of the warm-up."""
    for state in stopped_three_times(tmp_path, start_stdio, stop, close_stdin=True):
        [(ended, _)] = sessions_of(state)
        assert ended is not None


def thread_kill(pid: int, tid: int, sig: signal.Signals) -> None:
    """`sig` to one thread of another process (tgkill): where the kernel may deliver a
    signal sent to the whole process."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, int(sig)) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {tid}")


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stdio_server_stops_whichever_thread_the_signal_lands_on(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """A signal to the process is delivered to any one of its threads. Python runs the
    handler on the main thread only, and an idle stdio server's main thread sleeps in its
    event loop's select with no timer due: a signal that landed on the stdin reader or the
    embedder went unseen and the server never stopped (the held-stdin hang under load).
    Two servers: the signal goes to the first thread the server started, then to the
    last."""
    for run, pick in enumerate((0, -1)):
        state = tmp_path / f"run{run}"
        own_store(state)
        proc = start_stdio(state)
        try:
            threads = sorted(int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir())
            others = [t for t in threads if t != proc.pid]
            assert others, "a serving stdio server runs more than its main thread"
            thread_kill(proc.pid, others[pick], stop)
            exited_cleanly(proc, stop, state)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def signal_storm(proc: subprocess.Popen[bytes], stop: signal.Signals) -> None:
    """The signal again and again (an impatient Ctrl+C, a supervisor that repeats its
    SIGTERM) until the process is gone: every instant of its shutdown gets one."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(stop)
        time.sleep(0.005)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_server_signalled_again_and_again_stops_once_cleanly(
    tmp_path: Path, stop: signal.Signals, transport: str
) -> None:  # U3 A2
    """Later signals neither cut the cleanup short (a forced uvicorn exit skipped the
    lifespan's shutdown: a traceback) nor kill the exiting process (-15, -2)."""
    proc = start_stdio(tmp_path) if transport == "stdio" else start_http(tmp_path)[0]
    try:
        signal_storm(proc, stop)
        exited_cleanly(proc, stop, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    [(ended, _)] = sessions_of(tmp_path)
    assert ended is not None


def handles(pid: int, sig: signal.Signals) -> bool:
    """Linux: the process has a handler installed for `sig` (SigCgt in its status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_server_stopped_before_it_listens_exits_with_the_signal_code(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """The stop policy holds from the CLI's first moment on: a signal during the SDK's
    second of imports stops the server before it serves, with its code (not -15)."""
    proc, _ = spawn_http(tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not handles(proc.pid, signal.SIGTERM) and time.monotonic() < deadline:
            assert proc.poll() is None
            time.sleep(0.001)
        proc.send_signal(stop)
        exited_cleanly(proc, stop, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.anyio
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_busy_http_server_stopped_exits_cleanly(
    tmp_path: Path, stop: signal.Signals
) -> None:  # U3 A2
    """Stopped with everything under way at once: the background embedder working through
    a store's unembedded facts, a client's session open with its event stream, and tool
    calls in flight."""
    with Memory(str(tmp_path), create=True) as memory, memory.bulk():
        for n in range(600):
            memory.add_fact(f"seed fact {n}: the kettle {n * 7919 % 997} boils at noon", "learning")
    proc, port = start_http(tmp_path)
    try:
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30) as client:

            async def writes() -> None:
                for n in range(1000):
                    await client.call_tool(
                        "memory_update", {"category": "learning", "content": f"kettle note {n}"}
                    )

            with contextlib.suppress(Exception):
                async with anyio.create_task_group() as group:
                    group.start_soon(writes)
                    await anyio.sleep(1.0)
                    proc.send_signal(stop)
                    with anyio.fail_after(60):
                        while proc.poll() is None:
                            await anyio.sleep(0.05)
                    group.cancel_scope.cancel()
    except Exception:  # the client sees its server go: what counts is how the server went
        pass
    exited_cleanly(proc, stop, tmp_path)
