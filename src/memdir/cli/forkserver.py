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
server checks the caller is its user too and shares its namespaces and sandbox (context),
and forks; the child takes the caller's place (folder, environment, streams, umask, time
zone, resource limits), says `pid N` and runs the command exactly as the caller's own
process would (cli/run.py). Its output goes straight to the caller's stdout and stderr.
The server reports how the child ended (`exit CODE` or `signal N`); the caller forwards
SIGINT, SIGTERM and SIGHUP to the child meanwhile, and ends the same way.

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
    from _socket import socket as RawSocket
    from collections.abc import Iterator, Mapping
    from socket import socket as Socket
    from types import FrameType
    from typing import Any, TextIO

SWITCH_ENV = "MEMDIR_FORKSERVER"  # "0": every call runs in a process of its own
IDLE_ENV = "MEMDIR_FORKSERVER_IDLE"  # seconds without a call before the server exits
IDLE_S = 600.0
MODULE = "memdir.cli.forkserver"
PROTOCOL = b"memdir-fork/1"
MAX_REQUEST = 16 * 2**20
SPARE_NAME = "memdir-spare"  # the process that waits for the next call (Server.fork_spare)
# seconds with no call before the server readies the stores the last calls used: a store
# removed right after its call (a script's, a test's temporary one) is gone by then, not
# being removed while the server looks at it (a look may make its -wal, Connection._open_look)
READY_AFTER = 0.1
TOUCH_SLICE = 4096  # objects the spare touches between two looks for a call
FORWARDED = (2, 15, 1)  # SIGINT, SIGTERM, SIGHUP: what stops the caller stops the call
NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "user", "uts")
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
    """Whether calls go to the server: on Linux (fork, SO_PEERCRED), unless turned off."""
    return sys.platform == "linux" and os.environ.get(SWITCH_ENV, "1") != "0"


def key() -> str:
    """What a server must share with its caller to run its calls: the same Python and the
    same memdir on disk."""
    return f"{sys.executable}\0{os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}"


def places(env: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(folder, socket, lock) of this installation's server for this user (`env`: as
    another process of it, with that environment, finds them)."""
    import zlib

    tag = f"{zlib.crc32(key().encode()):08x}"
    folder, sock = process.runtime_path(f"cli-{tag}.sock", env)
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
            sock.close()
            return None  # never hand our streams and environment to another user
        _send(sock, request, [0, 1, 2])
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
        context(),
        _limits(),
        os.fsencode(os.getcwd()),
        str(umask).encode(),
        str(os.getppid()).encode(),
        *streams,
        b"\0".join(os.fsencode(a) for a in argv),
        b"\0".join(k + b"=" + v for k, v in os.environb.items()),
    ]
    body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    return len(body).to_bytes(4, "big") + body


def context() -> bytes:
    """What a child cannot take over from its caller, so must share with it already: the
    namespaces (a call made in `ip netns exec` or a container reaches other hosts and
    files), the sandbox (no_new_privs and a seccomp filter: an agent host's sandbox, such
    as Codex's, which a call must not escape) and the groups."""
    parts = []
    for name in NAMESPACES:
        try:
            parts.append(os.readlink(f"/proc/self/ns/{name}"))
        except OSError:
            parts.append("")
    try:
        with open("/proc/self/status", "rb") as status:
            parts += [
                line.decode().split(None, 1)[-1].strip()
                for line in status
                if line.startswith((b"NoNewPrivs:", b"Seccomp:"))
            ]
    except OSError:
        pass
    parts.append(f"{os.getgid()}:{os.getegid()}:{sorted(os.getgroups())}")
    return "\0".join(parts).encode()


def _limits() -> bytes:
    """The caller's resource limits and niceness, which its child takes on."""
    import resource

    numbers = [getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")]
    limits = [f"{n}={soft},{hard}" for n in numbers for soft, hard in [resource.getrlimit(n)]]
    limits.append(f"nice={os.getpriority(os.PRIO_PROCESS, 0)}")
    return " ".join(limits).encode()


def _wait(sock: RawSocket) -> int | None:
    """Read what the server says until the child is gone; forward stop signals to the
    child meanwhile. A child killed by a signal kills us with it, so that our parent sees
    what it would have seen of a call run here."""
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
    ended: tuple[bytes, int] | None = None
    try:
        while ended is None:
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            buffer += data
            while b"\n" in buffer and ended is None:
                line, buffer = buffer.split(b"\n", 1)
                word, _, value = line.partition(b" ")
                if word == b"pid" and not child:
                    child = int(value)
                    if forwarded:
                        os.kill(child, forwarded)
                elif word in (b"exit", b"signal", b"fallback"):
                    ended = word, int(value or 0)
            if not data:
                break
    finally:
        sock.close()
        for signum, handler in previous.items():
            _signal.signal(signum, handler)
    if not child:  # nothing ran: the call is ours to run, unless we were asked to stop
        return 128 + forwarded if forwarded else None
    if ended is None:
        sys.stderr.write("memdir: the server running the command went away\n")
        return 1
    how, number = ended
    if how == b"signal":
        _signal.signal(number, _signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number  # a signal that does not end a process: as a shell reports it
    return number


def start() -> None:
    """Start this installation's server, detached (its own session, no terminal, none of
    our open files), unless one runs (it sent this call back: a sandboxed caller's, say)
    or its folder is not private. Two started at once are fine: the second finds the lock
    taken and exits."""
    import fcntl

    folder, _, lock_path = places()
    try:
        if not process.private_dir(folder):
            return
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # held: a server runs
        finally:
            os.close(lock)
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
    """Bind, preload, then fork a child per call and report each child's end to its
    caller. Exits when idle with no child left, when stopped (once its children are done;
    a second signal: at once), or when memdir's code on disk changed."""
    import contextlib
    import fcntl
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
    os.chdir("/")  # never keep the starter's folder busy: each child goes to its caller's
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = Server(path, lock)
    try:
        preload()
        import threading

        if threading.active_count() != 1:
            print("a preloaded module started a thread: not forking", file=sys.stderr)
            return 1
        server.watched = dict(_signature())
        server.notify = _notifier(list(server.watched))
        server.own = context()
        from ..storage import watched

        watched.share_with_children()  # what the server readies, its calls use (C1)
        global _recent_file
        _recent_file = recent_file(path)  # its children's list of the stores they used
        import gc

        # what is imported stays: no child's collection walks it, so a child does not
        # copy the server's pages by touching every object (copy-on-write)
        gc.collect()
        server.objects = gc.get_objects()
        gc.freeze()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead server's: ours now, by the lock
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(64)
        server.listener = listener
        os.ftruncate(lock, 0)
        os.write(lock, f"{os.getpid()}\n".encode())
        print(f"pid {os.getpid()} serving {path}", file=sys.stderr, flush=True)
        server.fork_spare()
        try:
            server.run(_idle())
        except KeyboardInterrupt:
            server.retire("stopped")
            server.run(0.0)  # the calls under way still get their exit status
    except KeyboardInterrupt:
        pass
    finally:
        server.retire("exiting")
    return 0


class Server:
    def __init__(self, path: str, lock: int) -> None:
        self.path, self.lock = path, lock
        self.listener: Socket | None = None
        self.children: dict[int, tuple[int, Socket]] = {}  # pidfd -> (pid, its caller)
        self.watched: dict[str, tuple[int, int]] = {}
        self.notify = -1  # inotify on the folders of `watched` (_notifier), or -1
        self.own = b""
        self.pid = os.getpid()
        self.spare: tuple[int, Socket] | None = None  # (pid, its end of our socketpair)
        self.objects: list[object] = []  # what a spare touches before its call (Spare)
        self.ready_due: float | None = None  # when to ready the last calls' stores (ready)

    def run(self, idle: float) -> None:
        """Serve until idle for `idle` seconds with no child running (0: once the
        children are gone, taking no new call)."""
        import select
        import time

        last = time.monotonic()
        while self.children or (self.listener is not None and idle > 0):
            now = time.monotonic()
            wait = None if self.children else max(0.0, idle - (now - last))
            if self.ready_due is not None and wait is not None:
                wait = min(wait, max(0.0, self.ready_due - now))
            watched: list[Any] = [*self.children, *([self.listener] if self.listener else [])]
            if self.spare is not None:
                watched.append(self.spare[1])
            ready = select.select(watched, [], [], wait)[0]
            if not ready and not self.children:
                if self.ready_due is None:
                    return  # idle
                self.ready_due = None
                if self.listener is not None:
                    self.ready()
                continue
            for item in ready:
                if item is self.listener:
                    self.accept()
                elif isinstance(item, int):
                    self.reap(item)
                elif self.spare is not None and item is self.spare[1]:
                    self.drop_spare()  # it died: the next call is forked, and forks one
            last = time.monotonic()

    def accept(self) -> None:
        import contextlib

        assert self.listener is not None
        conn, _ = self.listener.accept()
        if self.code_changed():
            print("memdir's code changed on disk: retiring", file=sys.stderr, flush=True)
            self.retire("code changed")  # before the call goes back: its caller starts anew
            with contextlib.suppress(OSError):
                conn.sendall(b"fallback\n")
            conn.close()
            return
        forked = _take(conn, self)
        if forked is None:
            conn.close()
            return
        self.children[os.pidfd_open(forked)] = (forked, conn)
        if self.spare is None and self.listener is not None:
            self.fork_spare()  # for the next call, while this one runs

    def code_changed(self) -> bool:
        """Whether memdir's code on disk is no longer what this server runs: a stat of
        every module, unless the kernel said nothing happened in their folders since the
        last look (inotify: one read that finds nothing, instead of ~150 stats a call)."""
        if self.notify >= 0:
            try:
                os.read(self.notify, 65536)
            except BlockingIOError:
                return False  # no event: nothing changed (a change queues one at once)
            except OSError:
                os.close(self.notify)
                self.notify = -1
        return dict(_signature()) != self.watched

    def launch(self, conn: Socket, fds: list[int], fields: list[bytes]) -> int:
        """The pid of the process that runs this call: the spare, which has its copy of
        the server's memory made already, else a child forked now."""
        if self.spare is not None:
            pid, end = self.spare
            self.spare = None
            body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
            try:
                _send(end, len(body).to_bytes(4, "big") + body, [conn.fileno(), *fds])
            except OSError:
                self.spare = pid, end
                self.drop_spare()
            else:
                end.close()
                return pid
        pid = os.fork()
        if pid == 0:
            self.forget()
            raise Forked(conn, fds, fields)  # up to the top, where the child runs the call
        return pid

    def fork_spare(self) -> None:
        """Fork the process that will run the next call. It copies what a call touches of
        the server's memory now (copy-on-write: ~5 µs a page on a virtual machine), off
        the caller's clock, then waits on its socket: a call (Spare), or the end of the
        server (end of file: it exits, so it never outlives the server)."""
        import socket

        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            mine.close()
            self.forget()
            _spare(theirs, self.objects)  # raises Forked with its call, or exits
        theirs.close()
        mine.settimeout(5)  # a hand-off to a spare that hangs falls back to a fork
        self.spare = pid, mine

    def drop_spare(self) -> None:
        """End the spare (closing its socket is its signal) and reap it."""
        import contextlib

        if self.spare is None:
            return
        import signal

        pid, end = self.spare
        self.spare = None
        end.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # it holds nothing; a stopped one must not hang us
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def reap(self, pidfd: int) -> None:
        import contextlib

        pid, conn = self.children.pop(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):
            conn.sendall(f"signal {-code}\n".encode() if code < 0 else f"exit {code}\n".encode())
        conn.close()
        if not self.children and self.listener is not None:
            import time

            self.ready_due = time.monotonic() + READY_AFTER

    def ready(self) -> None:
        """No call runs: ready the stores the last calls used (_ready), here, where what
        is kept lives on from call to call; the spare, forked before, holds a copy from
        before, so it is forked again when anything was read or kept anew."""
        from ..storage import watched

        before = watched.changes()
        assert self.listener is not None
        _ready(self.listener)
        if watched.changes() != before and self.spare is not None:
            self.drop_spare()
            self.fork_spare()

    def retire(self, why: str) -> None:
        """Take no more calls: the socket goes, then the lock, so a new server may start."""
        import contextlib

        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self.drop_spare()
        if self.lock >= 0:
            os.close(self.lock)
            self.lock = -1
            print(f"{why}: no more calls", file=sys.stderr, flush=True)

    def forget(self) -> None:
        """In a child: close its copies of the server's files and the other calls', and
        own none of them, so that nothing it does on its way out (retire) touches the
        server's socket or lock."""
        for pidfd, (_, conn) in self.children.items():
            os.close(pidfd)
            conn.close()
        if self.listener is not None:
            self.listener.close()
        if self.lock >= 0:
            os.close(self.lock)
        if self.spare is not None:
            self.spare[1].close()
        if self.notify >= 0:
            os.close(self.notify)
        self.children, self.listener, self.lock, self.spare = {}, None, -1, None
        self.notify = -1


class Forked(BaseException):
    """Raised in a newly forked child, so that it leaves the server's frames (none of
    which catch it) and runs its call at the top of the process (run_call), not inside
    the server's loop."""

    def __init__(self, conn: Socket, fds: list[int], fields: list[bytes]) -> None:
        super().__init__()
        self.conn, self.fds, self.fields = conn, fds, fields


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
    for name in (
        "json",
        "tomllib",
        "subprocess",
        "hashlib",
        "uuid",
        "traceback",
        "shutil",
        "resource",
    ):
        importlib.import_module(name)
    from .run import build_parser, prebuild

    build_parser(None)  # argparse's own lazy imports
    prebuild()
    from .. import markers

    markers.prime()  # what recall, boot and the hooks would each build again
    from ..storage import embeddings

    embeddings.available()  # known to every child while sys.path's folders stay as they are


def _signature() -> Iterator[tuple[str, tuple[int, int]]]:
    """(file, (mtime, size)) of each memdir module this process holds (this one too,
    which runs as __main__)."""
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(path).startswith(package):
            try:
                info = os.stat(path)
            except OSError:
                yield path, (0, 0)
            else:
                yield path, (info.st_mtime_ns, info.st_size)


# inotify(7): what changes a module's folder (an edit in place, a replace, an install)
IN_CHANGES = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800


def _notifier(paths: list[str]) -> int:
    """An inotify descriptor (non-blocking) watching the folders of `paths`, or -1 where
    there is none: then every call stats every module."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return -1
    if fd < 0:
        return -1
    for folder in sorted({os.path.dirname(path) for path in paths}):
        if libc.inotify_add_watch(fd, os.fsencode(folder), IN_CHANGES) < 0:
            os.close(fd)
            return -1
    return int(fd)


def _take(conn: Socket, server: Server) -> int | None:
    """Read one call and fork its child: the child's pid, or None when the call went back
    to its caller (`fallback`) or the caller was not our user."""
    import contextlib
    import socket

    fds: list[int] = []
    try:
        conn.settimeout(5)
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        if int.from_bytes(cred[4:8], sys.byteorder) != os.getuid():
            return None  # not our user: closed without a word
        data, fds = _receive(conn)
        fields = _fields(data)
        if fields[0] != PROTOCOL or fields[1] != key().encode() or fields[2] != server.own:
            conn.sendall(b"fallback\n")
            return None
        conn.settimeout(None)
        return server.launch(conn, fds, fields)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            conn.sendall(b"fallback\n")
        return None
    finally:
        if os.getpid() == server.pid:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _receive(conn: Socket, count: int = 3) -> tuple[bytes, list[int]]:
    """(the body, the descriptors) of one message: a length, then the body, with `count`
    descriptors (the caller's three streams; the spare's call has its connection too)."""
    import socket

    data, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(count * 4))
    fds = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [
                int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, len(payload), 4)
            ]
    if len(fds) != count:
        for fd in fds:
            os.close(fd)
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


def _send(sock: RawSocket, data: bytes, fds: list[int]) -> None:
    """`data` with `fds` attached (SCM_RIGHTS): a caller's call to the server, the
    server's to its spare."""
    import _socket

    attached = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
    sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, attached)])
    if sent < len(data):
        sock.sendall(data[sent:])


def _spare(end: Socket, objects: list[object]) -> None:
    """The spare: copy the pages of the server's objects (touching an object writes its
    reference count, which copies its page: ~1,500 pages, ~6 ms), a slice at a time, then
    wait for a call on `end` and raise Forked with it, up to the top of the process. A
    call that comes before the copy is done stops it: the call copies the rest as it
    touches it."""
    import select
    import signal
    import socket

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    server_name = _rename(SPARE_NAME)
    for start in range(0, len(objects), TOUCH_SLICE):
        if select.select([end], [], [], 0)[0]:
            break
        for _ in objects[start : start + TOUCH_SLICE]:
            pass  # (their referents too would cost 3x this for ~1 ms less a call)
    try:
        data, fds = _receive(end, 4)
    except (OSError, ValueError):
        os._exit(0)  # the server is gone, or dropped us
    end.close()
    _rename(server_name)
    raise Forked(socket.socket(fileno=fds[0]), fds[1:], _fields(data))


def _ready(listener: Socket) -> None:
    """In the server, while no call runs: ready the stores the last calls used, newest
    first, writing nothing (Memory.warm: the entry listing and the search's sync checked
    through a read-only look and kept under the server's watch, storage/watched.py), so
    that a call forked from it lists no folder that did not change. A call waiting stops
    it between two stores. Whatever fails is left to the call."""
    import json
    import select

    from ..memory import Memory

    try:
        with open(_recent_file, "rb") as handle:
            recent = json.loads(handle.read(65536))
    except (OSError, ValueError):
        return
    try:
        for place in recent if isinstance(recent, list) else ():
            if select.select([listener], [], [], 0)[0]:
                return
            try:
                state, root = place
                # the root as the call found it (its config, or MEMDIR_MEMORY_DIR)
                memory = Memory(state, env={"MEMDIR_MEMORY_DIR": root}, cwd="/")
                if memory.layout.memory_dir == root:
                    memory.warm()
            except Exception:  # a store gone or broken is the call's to report
                continue
    finally:
        process.forget_opened_stores()  # readied, not opened for a call: not the call's list


def _remember() -> None:
    """In a call's child, once its caller has its answer: the stores it opened go first
    in the list the server readies (at most 4), in the runtime folder."""
    import contextlib
    import json

    if not _recent_file or not process.opened_stores():
        return
    places = [list(place) for place in reversed(process.opened_stores())]
    try:
        with open(_recent_file, "rb") as handle:
            known = json.loads(handle.read(65536))
    except (OSError, ValueError):
        known = []
    for place in known if isinstance(known, list) else ():
        if place not in places and len(places) < 4:
            places.append(place)
    temp = f"{_recent_file}.{os.getpid()}"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(places))
        os.replace(temp, _recent_file)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def recent_file(sock: str) -> str:
    """Where the stores the last calls opened are listed, beside the server's socket."""
    return sock.removesuffix(".sock") + ".recent"


_recent_file = ""  # in the server and its children: recent_file(its socket)


def _rename(name: str) -> str:
    """Set this process's name (what ps and /proc/PID/stat show); the name it had."""
    try:
        with open("/proc/self/comm", "r+") as handle:
            old = handle.read().strip()
            handle.seek(0)
            handle.write(name)
        return old
    except OSError:
        return name


def _fields(body: bytes) -> list[bytes]:
    fields, at = [], 0
    while at < len(body):
        size = int.from_bytes(body[at : at + 4], "big")
        fields.append(body[at + 4 : at + 4 + size])
        at += 4 + size
    if len(fields) != 12:
        raise ValueError("a call of another shape")
    return fields


def run_call(job: Forked) -> int:
    """In the child: take the caller's place, say `pid N`, and run its call; its exit
    code (the server reports how the child ended). What cannot be taken over sends the
    call back."""
    import signal

    conn, fds = job.conn, job.fds
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _, _, _, limits, cwd, umask, ppid, stdin, stdout, stderr, argv, env = job.fields
    try:
        os.chdir(cwd)
        _take_limits(limits)
    except (OSError, ValueError):
        conn.sendall(b"fallback\n")
        os._exit(0)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
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
    _REPORT.append(conn)  # leave() says how the call ended, before this process is torn down
    from .run import main

    try:
        code = main(args)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    leave(code)
    return code  # not reached


def leave(code: int) -> None:
    """End the child as its interpreter would end, but for the teardown of every module
    the server imported: that touches every object, so copies the server's whole heap
    page by page (copy-on-write), ~15 ms a call. What a process's end does that a caller
    can see is done here: the non-daemon threads joined, the exit handlers run, every
    file the call left open flushed (what the objects' finalizers would have written),
    the standard streams flushed (a failure is exit 120, as Python's), then closed and
    the exit code sent to the caller. The stores the call opened are left to os._exit
    (cli/common.close_opened says why)."""
    import atexit
    import contextlib
    import gc
    import io
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at exit
    atexit._run_exitfuncs()
    for obj in gc.get_objects():  # what the call made: the server's are frozen apart
        if isinstance(obj, io.IOBase) and obj not in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    if _REPORT:  # the caller may go now: what it must see is written
        for fd in (0, 1, 2):  # and a host reading its pipes sees them end with it
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            _REPORT[0].sendall(f"exit {code & 0xFF}\n".encode())
        with contextlib.suppress(Exception):  # only a hint for the next spare
            _remember()
    os._exit(code)


# the caller's connection, in a forked call's child: leave() reports the exit code on it
# itself, since the server learns of it only once the kernel has torn this process down
# (its whole address space: up to ~10 ms); an end that skips leave() (a signal, a hook's
# watchdog) is reported by the server
_REPORT: list[Socket] = []


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _take_limits(limits: bytes) -> None:
    """The caller's resource limits and niceness (ValueError, OSError: one this process
    may not take, such as a hard limit above its own)."""
    import resource

    for item in limits.decode().split():
        name, _, value = item.partition("=")
        if name == "nice":
            if int(value) != os.getpriority(os.PRIO_PROCESS, 0):
                os.setpriority(os.PRIO_PROCESS, 0, int(value))
            continue
        soft, _, hard = value.partition(",")
        wanted = (int(soft), int(hard))
        if resource.getrlimit(int(name)) != wanted:
            resource.setrlimit(int(name), wanted)


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


def main() -> int:
    try:
        return serve()
    except Forked as job:  # the child of a call, out of the server's frames
        return run_call(job)


if __name__ == "__main__":
    sys.exit(main())
