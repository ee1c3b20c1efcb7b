"""The user's warm `memdir` (C): a process with the whole command imported that forks a
child for each call, so a call costs a fork instead of ~30 ms of imports.

One server per user, per Python and per memdir installation (a venv or a checkout of its
own has its own), listening on a Unix socket in the user's private runtime folder
(process.runtime_path). Started detached by the first call that found none, it exits after
MEMDIR_FORKSERVER_IDLE seconds (600) without a call, when memdir's code on disk changes
under it (an upgrade, an edit of a checkout), or on SIGTERM. Never two at once: the one
holding the lock file binds the socket; a second started at the same moment exits.

A call: the client (`memdir`, cli/__init__.py) connects, checks the server is its own
user's (SO_PEERCRED), and sends its argv, environment, working folder, umask, parent pid
and the encodings of its standard streams, with the streams themselves (SCM_RIGHTS). The
server checks the caller is its user too and forks; the child takes the caller's place
(folder, environment, streams, umask, time zone), says `pid N`, runs the command exactly
as the caller's own process would (cli/run.py), runs the exit handlers, says `exit CODE`
and is gone. Its output goes straight to the caller's stdout and stderr. The caller
forwards SIGINT, SIGTERM and SIGHUP to the child, and exits with its code.

Nothing here may run a call twice: the client runs the call itself only when the server
said `fallback` (or never answered) before the child said `pid`.

Cheap on purpose, for the client's side: os and sys at import, _socket and _signal when
called (socket.py and signal.py import enum, ~2 ms); the server imports the library.
"""

from __future__ import annotations

import os
import sys

from .. import process

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from _socket import socket as Socket
    from types import FrameType
    from typing import TextIO

SWITCH_ENV = "MEMDIR_FORKSERVER"  # "0": every call runs in a process of its own
IDLE_ENV = "MEMDIR_FORKSERVER_IDLE"  # seconds without a call before the server exits
IDLE_S = 600.0
MODULE = "memdir.cli.forkserver"
PROTOCOL = b"memdir-fork/1"
MAX_REQUEST = 16 * 2**20
FORWARDED = (2, 15, 1)  # SIGINT, SIGTERM, SIGHUP: what stops the caller stops the call
# modules no call should find imported in its child: they bring their own threads (the
# embedding stack), the MCP SDK, or are this server's relatives
NO_PRELOAD = (
    "memdir.__main__",
    "memdir.cli.forkserver",
    "memdir.embed_worker",
    "memdir.mcp_server",
    "memdir.testing",
    "memdir.vector_worker",
)


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "1") != "0"


def key() -> str:
    """What a server must share with its caller to run its calls: the same Python and the
    same memdir on disk."""
    return f"{sys.executable}\0{os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}"


def places() -> tuple[str, str, str]:
    """(folder, socket, lock) of this installation's server for this user."""
    import zlib

    tag = f"{zlib.crc32(key().encode()):08x}"
    folder, sock = process.runtime_path(f"cli-{tag}.sock")
    return folder, sock, os.path.join(folder, f"cli-{tag}.lock")


# -- the caller's side ---------------------------------------------------------------


def call(argv: list[str]) -> int | None:
    """The exit code of `memdir ARGV` run by the server, or None when no server ran it
    (none listens, it is another user's, or it sent the call back): run it here, then."""
    import _socket

    try:
        request = _request(argv)
    except OSError:
        return None  # e.g. the working folder was deleted: the caller's own process copes
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(places()[1])
        cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
            return None  # never hand our streams and environment to another user
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        sent = sock.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(request):
            sock.sendall(request[sent:])
    except OSError:
        sock.close()
        return None
    return _wait(sock)


def _request(argv: list[str]) -> bytes:
    umask = os.umask(0)
    os.umask(umask)
    streams = [
        b"" if s is None else f"{s.encoding}:{s.errors}".encode()
        for s in (sys.stdin, sys.stdout, sys.stderr)
    ]
    fields = [
        PROTOCOL,
        key().encode(),
        os.fsencode(os.getcwd()),
        str(umask).encode(),
        str(os.getppid()).encode(),
        *streams,
        b"\0".join(os.fsencode(a) for a in argv),
        b"\0".join(k + b"=" + v for k, v in os.environb.items()),
    ]
    body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    return len(body).to_bytes(4, "big") + body


def _wait(sock: Socket) -> int | None:
    """Read what the child says until it exits; forward stop signals to it meanwhile."""
    import _signal  # type: ignore[import-not-found]  # no stub; signal.py imports enum

    child = 0
    forwarded = 0

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal forwarded
        forwarded = signum
        if child:
            os.kill(child, signum)

    previous = {s: _signal.signal(s, forward) for s in FORWARDED}
    buffer = b""
    try:
        while True:
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line == b"fallback" and not child:
                    return 128 + forwarded if forwarded else None  # asked to stop: stopped
                word, _, value = line.partition(b" ")
                if word == b"pid" and not child:
                    child = int(value)
                    if forwarded:
                        os.kill(child, forwarded)
                elif word == b"exit" and child:
                    return int(value)
            if not data:
                break
    finally:
        sock.close()
        for signum, handler in previous.items():
            _signal.signal(signum, handler)
    if not child:
        return None  # the server went away before it forked: nothing ran
    if forwarded:
        return 128 + forwarded
    sys.stderr.write("memdir: the command's process ended without an exit status\n")
    return 1


def start() -> None:
    """Start this installation's server, detached (its own session, no terminal, none of
    our open files), unless its folder is not private. Two started at once are fine: the
    second finds the lock taken and exits."""
    folder = places()[0]
    try:
        if not process.private_dir(folder):
            return
    except OSError:
        return
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, "-m", MODULE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        pass  # no server: every call runs in its own process, as it can


# -- the server ---------------------------------------------------------------------


def serve() -> int:
    import contextlib
    import fcntl
    import select
    import signal
    import socket

    folder, path, lock_path = places()
    if not process.private_dir(folder):
        return 1
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # this installation has its server already
    log = os.open(lock_path[: -len(".lock")] + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    idle = _idle()
    listener = None
    try:
        preload()
        watched = dict(_signature())
        import threading

        if threading.active_count() != 1:
            print("a preloaded module started a thread: not forking", file=sys.stderr)
            return 1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead server's: ours now, by the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(64)
        os.ftruncate(lock, 0)
        os.write(lock, f"{os.getpid()}\n".encode())
        print(f"pid {os.getpid()} serving {path}", file=sys.stderr, flush=True)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        while select.select([listener], [], [], idle)[0]:
            conn, _ = listener.accept()
            if dict(_signature()) != watched:
                print("memdir's code changed on disk: exiting", file=sys.stderr, flush=True)
                listener.close()
                listener = None
                os.unlink(path)  # before the lock goes: the next call starts a new server
                with contextlib.suppress(OSError):
                    conn.sendall(b"fallback\n")
                conn.close()
                break
            _take(conn, listener, lock)
    except KeyboardInterrupt:
        pass
    finally:
        if listener is not None:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        os.close(lock)
    return 0


def _idle() -> float:
    try:
        return max(0.1, float(os.environ.get(IDLE_ENV, IDLE_S)))
    except ValueError:
        return IDLE_S


def preload() -> None:
    """Import every module of memdir a call may use (and the standard library modules
    they import when called), so that no child imports anything."""
    import importlib
    import pkgutil

    import memdir

    for info in pkgutil.walk_packages(memdir.__path__, "memdir."):
        if not info.name.startswith(NO_PRELOAD):
            importlib.import_module(info.name)
    for name in ("json", "tomllib", "subprocess", "hashlib", "uuid", "traceback", "shutil"):
        importlib.import_module(name)
    from .run import build_parser

    build_parser(None)  # argparse's own lazy imports


def _signature() -> Iterator[tuple[str, tuple[int, int]]]:
    """(file, (mtime, size)) of each memdir module this process holds."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and getattr(module, "__name__", "").startswith("memdir"):
            try:
                info = os.stat(path)
            except OSError:
                yield path, (0, 0)
            else:
                yield path, (info.st_mtime_ns, info.st_size)


def _take(conn: Socket, listener: Socket, lock: int) -> None:
    """Read one call and fork its child; whatever goes wrong, the caller hears
    `fallback` unless the child was born (then the child answers)."""
    import contextlib
    import socket

    fds: list[int] = []
    try:
        conn.settimeout(5)
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
            return  # not our user: closed without a word
        data, fds = _receive(conn)
        fields = _fields(data)
        if fields[0] != PROTOCOL or fields[1] != key().encode():
            conn.sendall(b"fallback\n")
            return
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(lock)
            _child(conn, fds, fields)  # never returns
        conn.close()
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            conn.sendall(b"fallback\n")
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        conn.close()


def _receive(conn: Socket) -> tuple[bytes, list[int]]:
    import socket

    data, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
    fds = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [
                int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, len(payload), 4)
            ]
    if len(fds) != 3:
        raise ValueError("a call without its three streams")
    if len(data) < 4:
        raise ValueError("a short call")
    size = int.from_bytes(data[:4], "big")
    if size > MAX_REQUEST:
        raise ValueError(f"a call of {size} bytes")
    parts = [data[4:]]
    have = len(parts[0])
    while have < size:
        part = conn.recv(min(size - have, 2**20))
        if not part:
            raise ValueError("the caller left mid-call")
        parts.append(part)
        have += len(part)
    return b"".join(parts), fds


def _fields(body: bytes) -> list[bytes]:
    fields, at = [], 0
    while at < len(body):
        size = int.from_bytes(body[at : at + 4], "big")
        fields.append(body[at + 4 : at + 4 + size])
        at += 4 + size
    if len(fields) != 10:
        raise ValueError("a call of another shape")
    return fields


def _child(conn: Socket, fds: list[int], fields: list[bytes]) -> None:
    """Take the caller's place, run its call, say how it ended, and exit."""
    import contextlib
    import signal

    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _, _, cwd, umask, ppid, stdin, stdout, stderr, argv, env = fields
        try:
            os.chdir(cwd)
        except OSError:
            conn.sendall(b"fallback\n")
            os._exit(0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            if fd > 2:
                os.close(fd)
        fds.clear()
        os.environ.clear()
        for item in env.split(b"\0") if env else ():
            name, _, value = item.partition(b"=")
            if name:
                os.environb[name] = value
        import time

        time.tzset()
        os.umask(int(umask))
        process.act_for(int(ppid))
        sys.stdin, sys.stdout, sys.stderr = (
            _stream(0, stdin, "r"),
            _stream(1, stdout, "w"),
            _stream(2, stderr, "w"),
        )
        args = [os.fsdecode(a) for a in argv.split(b"\0")] if argv else []
        sys.argv = ["memdir", *args]
        conn.sendall(f"pid {os.getpid()}\n".encode())
        code = _run(args)
    finally:
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())
        os._exit(code)


def _stream(fd: int, spec: bytes, mode: str) -> TextIO:
    """A text stream on `fd` as the caller's interpreter made it: its encoding and errors,
    line buffered on a terminal (stderr always)."""
    import io

    encoding, _, errors = spec.decode().partition(":")
    if mode == "r":
        reader = open(fd, "rb", closefd=False)
        return io.TextIOWrapper(reader, encoding=encoding or None, errors=errors or None)
    writer = open(fd, "wb", closefd=False)
    return io.TextIOWrapper(
        writer,
        encoding=encoding or None,
        errors=errors or None,
        line_buffering=fd == 2 or os.isatty(fd),
    )


def _run(argv: list[str]) -> int:
    """The call, and what the interpreter would do at its exit: its exit code, the
    traceback of what escaped, the exit handlers, the non-daemon threads joined."""
    import atexit

    from .run import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as Python: output that could not be written fails the call
    return code


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(serve())
