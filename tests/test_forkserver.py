"""C1: the CLI's warm fork server. A call handed to it answers exactly as the caller's own
process would (argv, environment, working folder, streams, exit code, the caller's parent),
the server starts on demand, is reused, is never two, exits when idle or when memdir's
code changes under it, outlives a crash of its starter only until its idle exit, and a
socket held by another user is never given a call. Every process is real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import memdir
from memdir import Memory, cli, sessions
from memdir.cli import forkserver
from memdir.testing import cli_command, cli_env, forkserver_pid, poll, stop_forkserver

WAIT_S = 60.0  # how long a test waits for a process to come up or go (not a threshold)


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private runtime dir of this test's own (short: a socket path has at most 107
    bytes), so the test's server is no other test's; stopped at the end."""
    path = tempfile.mkdtemp(prefix="mdfs-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", path)
    yield path
    stop_forkserver()
    shutil.rmtree(path, ignore_errors=True)


def env_for(state: Path, runtime: str, **extra: str) -> dict[str, str]:
    return cli_env(str(state), {"XDG_RUNTIME_DIR": runtime, **extra})


def run(
    env: dict[str, str], *args: str, input: str | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def wait_for(check: Callable[[], object], what: str) -> None:
    poll(check, WAIT_S, what)


def server_up() -> int:
    """Wait for this test's server to hold its lock and listen; its pid."""
    wait_for(
        lambda: (forkserver_pid() or 0) > 0 and os.path.exists(forkserver.places()[1]),
        "a server up",
    )
    pid = forkserver_pid()
    assert pid is not None and pid > 0
    return pid


def served(
    env: dict[str, str], *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The call, run with -X importtime: the caller imports only the launcher when the
    server runs the call, and the library when it runs the call itself."""
    command = [sys.executable, "-X", "importtime", "-m", "memdir", *args]
    return subprocess.run(command, env=env, input=input, capture_output=True, text=True, timeout=60)


def forked(proc: subprocess.CompletedProcess[str]) -> bool:
    """Whether the server ran this call (served's): its caller never imported the library."""
    return "memdir.cli" in imported(proc.stderr) and "memdir.memory" not in imported(proc.stderr)


def imported(stderr: str) -> set[str]:
    return {
        line.split("|")[-1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, name) of each live child of `pid`."""
    found = []
    for other in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{other}/stat", "rb") as handle:
                head, tail = handle.read().rsplit(b")", 1)
        except OSError:
            continue
        fields = tail.split()
        if int(fields[1]) == pid and fields[0] != b"Z":
            found.append((int(other), os.fsdecode(head.split(b"(", 1)[1])))
    return found


def family(pid: int) -> list[int]:
    """The server `pid` and the children it forked for calls that still run (its spare,
    which waits for the next call, is not one of them)."""
    return [pid] + [child for child, name in children(pid) if name != forkserver.SPARE_NAME]


def spares(pid: int) -> list[int]:
    return [child for child, name in children(pid) if name == forkserver.SPARE_NAME]


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


@pytest.fixture
def store(state_dir: Path) -> Path:
    with Memory(str(state_dir)) as memory:
        memory.hot_append("Run the linter before every commit.")
        memory.add_fact("the kiwi harvest is in March", "learning")
    return state_dir


def test_first_call_starts_the_server_and_later_calls_are_forked_from_it(  # C1
    runtime: str, store: Path
) -> None:
    env = env_for(store, runtime)
    first = served(env, "search", "--mode", "lexical", "kiwi")
    assert first.returncode == 0 and "kiwi harvest" in first.stdout
    assert "memdir.memory" in imported(first.stderr)  # no server yet: it ran here
    pid = server_up()
    second = served(env, "search", "--mode", "lexical", "kiwi")
    assert second.returncode == 0 and second.stdout == first.stdout
    assert "memdir.memory" not in imported(second.stderr)  # the server's child ran it
    assert {"memdir.cli", "memdir.cli.forkserver"} <= imported(second.stderr)
    third = served(env, "recall")
    assert third.returncode == 0 and "Run the linter" in third.stdout
    assert forkserver_pid() == pid  # one server, reused


def test_a_forked_call_answers_as_its_own_process_would(  # C1, C
    runtime: str, store: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    warm = env_for(store, runtime)
    cold = env_for(store, runtime, MEMDIR_FORKSERVER="0")
    run(warm, "path")
    server_up()
    calls: list[tuple[tuple[str, ...], str | None]] = [
        (("path", "--json"), None),
        (("recall", "--json"), None),
        (("search", "kiwi", "--mode", "lexical", "--json"), None),
        (("boot",), None),
        (("hot", "show"), None),
        (("bogus",), None),  # a usage error: one line, exit 1 (C)
        (("fact", "show", "999999", "--json"), None),  # an error as JSON on stdout
        (("--version",), None),
        (("search", "--help"), None),
        (("hook", "SessionStart"), "not json"),  # stdin reaches the call
    ]
    for args, stdin in calls:
        ran = served(warm, *args, input=stdin)
        alone = run(cold, *args, input=stdin)
        # a known command is forked; `bogus` and `--version` are answered by the caller
        assert forked(ran) == (cli.command_name(list(args)) in cli.MODULES), args
        without_imports = "".join(
            line + "\n" for line in ran.stderr.splitlines() if not line.startswith("import time:")
        )
        assert (ran.returncode, ran.stdout, without_imports) == (
            alone.returncode,
            alone.stdout,
            alone.stderr,
        ), args
    # the caller's environment and working folder: a project's .memdir/ found from the
    # folder the caller is in, a session named in the caller's environment
    env = {k: v for k, v in warm.items() if k != "MEMDIR_STATE_DIR"}
    assert run(env, "init", cwd=str(project)).returncode == 0
    where = json.loads(run(env, "path", "--json", cwd=str(project)).stdout)
    assert where["state_dir"] == str(project / ".memdir")
    session = {**env, "MEMDIR_SESSION_ID": "s-forked"}
    added = run(session, "fact", "add", "-c", "learning", "pears ripen late", cwd=str(project))
    assert added.returncode == 0, added.stderr
    with Memory(str(project / ".memdir")) as memory:
        (hit,) = memory.search("pears", mode="lexical")
        assert memory.get_fact(int(hit.id)).session_id == "s-forked"


def test_files_a_forked_call_writes_have_the_callers_umask(  # C1, X
    runtime: str, store: Path
) -> None:
    env = env_for(store, runtime)
    run(env, "path")
    server_up()
    script = "import os, sys; os.umask(0o077); from memdir.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script, "daily", "append", "a private note"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert forked(proc)
    logs = list((store / "memory").rglob("*.md"))
    daily = [p for p in logs if "private note" in p.read_text()]
    assert daily and all(p.stat().st_mode & 0o077 == 0 for p in daily)


def test_a_hook_names_the_callers_parent_as_its_host(runtime: str, store: Path) -> None:  # C1, K3
    env = env_for(store, runtime)
    env.pop("CLAUDE_PID", None)
    run(env, "path")
    server_up()
    payload = json.dumps(
        {"session_id": "s-host", "hook_event_name": "SessionStart", "source": "startup"}
    )
    ran = served(env, "hook", "SessionStart", input=payload)
    assert ran.returncode == 0 and forked(ran), ran.stderr
    with Memory(str(store)) as memory:
        host = sessions.host_key(sessions.process_name(os.getpid()))  # this test launched it
        assert memory.store.get_value(host) == "s-host"


def test_a_stop_signal_to_the_caller_stops_its_forked_call(runtime: str, store: Path) -> None:  # C1
    env = env_for(store, runtime)
    run(env, "path")
    pid = server_up()
    caller = subprocess.Popen(
        cli_command("hook", "SessionStart"),  # waits for the host's JSON on stdin
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: len(family(pid)) == 2, "the call's child forked")
    caller.send_signal(signal.SIGTERM)
    code = caller.wait(timeout=60)  # stdin still open: only the signal can end the call
    caller.communicate(timeout=60)
    assert code == -signal.SIGTERM  # as if the call had run in it
    wait_for(lambda: family(pid) == [pid], "the child gone, the server left")


def test_a_call_is_run_by_the_spare_made_ready_before_it_and_no_spare_outlives_its_server(  # C1
    runtime: str, store: Path
) -> None:
    """The server keeps one process forked ahead, which takes the next call (and is
    replaced); it goes when the server goes, even when the server is killed."""
    env = env_for(store, runtime)
    assert run(env, "path").returncode == 0
    pid = server_up()
    wait_for(lambda: len(spares(pid)) == 1, "the spare forked")
    (ready,) = spares(pid)
    ran = served(env, "search", "--mode", "lexical", "kiwi")
    assert ran.returncode == 0 and "kiwi harvest" in ran.stdout and forked(ran)
    wait_for(lambda: gone(ready), "the spare that took the call gone with it")
    wait_for(lambda: len(spares(pid)) == 1, "a new spare")
    (after,) = spares(pid)
    assert after != ready and family(pid) == [pid]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: gone(after), "the spare gone with its server")
    ran = run(env, "search", "--mode", "lexical", "kiwi")  # and calls still answer
    assert ran.returncode == 0 and "kiwi harvest" in ran.stdout
    # it started a new server, which the fixture stops once it holds the lock
    wait_for(lambda: (forkserver_pid() or 0) > 0 and forkserver_pid() != pid, "a new server")


@pytest.mark.sqlite_only  # memory.db's WAL; a team store has none
def test_a_forked_write_leaves_the_wal_for_the_next_call_and_its_own_process_folds_it(  # C1
    runtime: str, store: Path
) -> None:
    """A forked call ends without SQLite's close: its commit is in the WAL, which stays
    for the next call (no checkpoint a call); every reader sees the fact; a call in a
    process of its own closes the store, which folds the WAL into memory.db."""
    env = env_for(store, runtime)
    assert run(env, "path").returncode == 0
    server_up()
    wal = Path(Memory(str(store), create=False).layout.db + "-wal")
    added = served(env, "fact", "add", "-c", "learning", "pears ripen late")
    assert added.returncode == 0 and forked(added)
    assert wal.exists()  # left for the next call
    found = run(env, "search", "--mode", "lexical", "pears")
    assert "pears ripen late" in found.stdout
    # the server, between calls, looks at the stores they used (a connection of its own,
    # which folds nothing): stopped, so that the call below has the last connection
    stop_forkserver()
    alone = run({**env, "MEMDIR_FORKSERVER": "0"}, "fact", "add", "-c", "learning", "figs too")
    assert alone.returncode == 0 and not wal.exists()  # folded by the last close
    with Memory(str(store)) as memory:
        texts = {hit.content for hit in memory.search("pears OR figs", mode="lexical")}
    assert {"pears ripen late", "figs too"} <= texts


@pytest.mark.sqlite_only  # memory.db's WAL; a team store has none
def test_a_store_removed_right_after_its_calls_is_removed_whole(  # C1
    runtime: str, tmp_path: Path
) -> None:
    """A script's or a test's temporary store, deleted as soon as its last call answers
    (and its own process has read it, folding the WAL), while the server would ready it
    for the next call: the deletion finds no file made behind its back. Several stores
    in a row, each its own race."""
    for attempt in range(20):
        state = tmp_path / f"store-{attempt}"
        state.mkdir()
        env = env_for(state, runtime)
        for args in (("hot", "append", "release on fridays"), ("recall", "--task", "release")):
            call = run(env, *args)
            assert call.returncode == 0, call.stderr
        with Memory(str(state)) as memory:  # the script reads it itself, last
            assert "release on fridays" in memory.hot()
        shutil.rmtree(state)  # raises if anything was made in it meanwhile
        assert not state.exists()
    (tmp_path / "last").mkdir()
    assert forked(served(env_for(tmp_path / "last", runtime), "path"))  # the server ran them


def test_the_server_is_never_two_and_exits_when_idle_even_if_its_starter_crashed(  # C1
    runtime: str, store: Path
) -> None:
    env = env_for(store, runtime, MEMDIR_FORKSERVER_IDLE="1")
    # a starter killed right after it started the server
    starter = (
        "import os; from memdir.cli import forkserver; forkserver.start(); os.kill(os.getpid(), 9)"
    )
    crashed = subprocess.run([sys.executable, "-c", starter], env=env, timeout=60)
    assert crashed.returncode == -signal.SIGKILL
    # and four more started at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", forkserver.MODULE], env=env, stderr=subprocess.DEVNULL
        )
        for _ in range(4)
    ]
    pid = server_up()
    assert [p.wait(timeout=60) for p in procs if p.pid != pid] == [0] * (
        4 - (pid in {p.pid for p in procs})
    )
    spare = spares(pid)
    wait_for(lambda: forkserver_pid() is None, "the server's idle exit")
    for p in procs:
        p.wait(timeout=60)
    wait_for(lambda: gone(pid), "the server gone")
    assert all(gone(child) for child in spare)  # its spare went with it
    assert not os.path.exists(forkserver.places()[1])  # its socket went with it


# Holds a fork server where it starts: before it takes its lock (`start`: as Python
# starts), or holding it with no pid written (`preload`: at the first import of its
# preload that the launcher never makes). It writes the marker file once there.
HOLD = """
import os, sys, time

stage, marker = os.environ["HOLD_STAGE"], os.environ["HOLD_MARKER"]


def hold():
    open(marker, "w").close()
    while True:
        time.sleep(0.05)


class Held:
    def find_spec(self, name, path=None, target=None):
        if name == "memdir.ui.app":
            hold()
        return None


if stage == "start":
    hold()
sys.meta_path.insert(0, Held())
"""


@pytest.mark.parametrize("stage", ["start", "preload"])
def test_a_server_still_starting_is_stopped_too(  # C1
    runtime: str, store: Path, tmp_path: Path, stage: str
) -> None:
    """memdir.testing.stop_forkserver ends a server a call just started, that has not
    written its pid (or not even taken its lock): a test leaves no process behind."""
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(HOLD)
    marker = tmp_path / "held"
    env = env_for(store, runtime, PYTHONPATH=str(hold), HOLD_STAGE=stage, HOLD_MARKER=str(marker))
    server = subprocess.Popen([sys.executable, "-m", forkserver.MODULE], env=env)
    try:
        wait_for(marker.exists, "the server held where it starts")
        assert forkserver_pid() == (None if stage == "start" else -1)  # no pid written
        assert not os.path.exists(forkserver.places()[1])  # no socket
        stop_forkserver(timeout=WAIT_S)
        assert server.wait(timeout=WAIT_S) in (0, -signal.SIGTERM)
        assert forkserver_pid() is None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_change_of_memdirs_code_retires_the_server(
    runtime: str, tmp_path: Path, store: Path
) -> None:  # C1
    """A copy of the package (an installation of its own, so a server of its own) whose
    files change while its server runs: the next call runs in its own process, with the
    code on disk, and a new server starts."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(memdir.__file__).parent, site / "memdir", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = env_for(store, runtime, PYTHONPATH=str(site))
    probe = [
        sys.executable,
        "-c",
        "from memdir.testing import forkserver_pid; print(forkserver_pid())",
    ]

    def pid() -> int:
        out = subprocess.run(
            probe, env=env, capture_output=True, text=True, timeout=60
        ).stdout.strip()
        return int(out) if out.lstrip("-").isdigit() else 0

    assert run(env, "path").returncode == 0
    wait_for(lambda: pid() > 0, "the copy's server up")
    first = pid()
    assert first not in (forkserver_pid(), None)  # not this checkout's server
    changed = site / "memdir" / "cli" / "forkserver.py"  # the server's own code, run as __main__
    changed.write_text(changed.read_text() + "\n# changed\n")
    ran = run(env, "search", "kiwi", "--mode", "lexical")
    assert ran.returncode == 0 and "kiwi harvest" in ran.stdout
    wait_for(lambda: pid() not in (0, first), "a new server for the new code")
    second = pid()
    ran = run(env, "search", "kiwi", "--mode", "lexical")  # served: no change since
    assert ran.returncode == 0 and pid() == second
    deep = site / "memdir" / "storage" / "sqlite" / "facts.py"  # a module deep down, in place
    with open(deep, "a") as handle:
        handle.write("\n# changed too\n")
    ran = run(env, "search", "kiwi", "--mode", "lexical")
    assert ran.returncode == 0 and "kiwi harvest" in ran.stdout
    wait_for(lambda: pid() not in (0, second), "a new server for that change too")
    os.kill(pid(), signal.SIGTERM)


def test_a_socket_held_by_another_user_is_never_given_a_call(  # C1, X
    runtime: str, store: Path, tmp_path: Path
) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root, to listen as another user")
    folder, path, _ = forkserver.places()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    impostor = (
        "import os, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.setuid(65534); s.listen(1)\n"
        "print('up', flush=True)\n"
        "c, _ = s.accept(); c.settimeout(5)\n"
        "try:\n    data = c.recv(65536)\nexcept OSError:\n    data = b''\n"
        "print(len(data), flush=True)\n"
    )
    listener = subprocess.Popen(
        [sys.executable, "-c", impostor, path], stdout=subprocess.PIPE, text=True
    )
    assert listener.stdout is not None and listener.stdout.readline() == "up\n"
    env = env_for(store, runtime, MEMDIR_FORKSERVER_IDLE="0.5")
    ran = served(env, "search", "--mode", "lexical", "kiwi")
    assert ran.returncode == 0 and "kiwi harvest" in ran.stdout
    assert "memdir.memory" in imported(ran.stderr)  # it ran in the caller's own process
    out, _ = listener.communicate(timeout=60)
    assert out == "0\n"  # not a byte of the call reached the other user


def test_the_launcher_imports_neither_the_library_nor_argparse() -> None:  # C1, C
    """What every call imports before it knows whether the server runs it: the package,
    the launcher and the client, nothing of the library."""
    code = (
        "import sys, memdir, memdir.cli, memdir.cli.forkserver\n"
        "print(sorted(m for m in sys.modules if m.startswith('memdir')), 'argparse' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("]")[0] + "]" == str(
        sorted(["memdir", "memdir.cli", "memdir.cli.forkserver", "memdir.process"])
    )
    assert out.stdout.strip().endswith("False")


def no_new_privs() -> None:  # runs in the child before exec, as a sandbox sets it up
    import ctypes

    assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS


def test_a_call_from_a_sandbox_or_another_namespace_runs_in_its_own_process(  # C1, X
    runtime: str, store: Path
) -> None:
    """A sandboxed caller (no_new_privs, as an agent host's sandbox sets) or one in another
    network namespace is not given to the server, whose child would be neither."""
    env = env_for(store, runtime)
    run(env, "path")
    server_up()
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "memdir",
        "search",
        "--mode",
        "lexical",
        "kiwi",
    ]
    sandboxed = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, preexec_fn=no_new_privs
    )
    assert sandboxed.returncode == 0 and "kiwi harvest" in sandboxed.stdout
    assert "memdir.memory" in imported(sandboxed.stderr)
    unshare = shutil.which("unshare")
    if os.getuid() == 0 and unshare:
        elsewhere = subprocess.run(
            [unshare, "--net", *command], env=env, capture_output=True, text=True, timeout=60
        )
        assert elsewhere.returncode == 0 and "kiwi harvest" in elsewhere.stdout
        assert "memdir.memory" in imported(elsewhere.stderr)
    warm = served(env, "search", "--mode", "lexical", "kiwi")
    assert "memdir.memory" not in imported(warm.stderr)  # and the server still serves the rest
