"""Reaching the warm worker of a store (Q2): where its socket is, how to ask it, how to
start it. The worker (memdir/vector_worker.py) is one process per store that holds the
embedding model and the vector matrix, so a CLI call or a hook that searches by meaning
costs a question over a local socket instead of loading the model (~0.35 s) and reading
every vector (~0.5 s at 110k) again.

Cheap on purpose: socket, json and struct only (no numpy: a CLI search that goes through
the worker imports nothing heavy). A request is one connection: a 4-byte big-endian
length, then that many bytes of JSON; the answer comes back the same way.

Where: <state>/worker/ (mode 0700) holds the lock, the log and the socket. A Unix socket
path has at most 107 bytes, so a deep state dir puts its socket under $XDG_RUNTIME_DIR/
memdir/ or /tmp/memdir-<uid>/ (0700, checked to be the user's own) instead, named by a
hash of the state dir.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time

from ..errors import StorageError
from ..process import SUN_PATH_MAX, private_dir, runtime_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    Key = tuple[str, int | str]

MAX_FRAME = 64 * 2**20
MODULE = "memdir.vector_worker"
# The workers this process started, until they exit: kept so that none is garbage collected
# while it runs (Popen warns then); each is reaped at the next start or look (running), so
# at most the last ones started wait as zombies in a process that lives on.
_STARTED: list[subprocess.Popen[bytes]] = []


class Places:
    """The files of one store's worker."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = os.path.realpath(state_dir)
        self.dir = os.path.join(self.state_dir, "worker")
        self.lock = os.path.join(self.dir, "lock")
        self.guard_lock = os.path.join(self.dir, "guard.lock")  # guard_worker.py's
        self.log = os.path.join(self.dir, "log")
        here = os.path.join(self.dir, "sock")
        if len(os.fsencode(here)) <= SUN_PATH_MAX:
            self.socket_dir, self.socket = self.dir, here
        else:
            import hashlib

            digest = hashlib.sha256(os.fsencode(self.state_dir)).hexdigest()[:20]
            self.socket_dir, self.socket = runtime_path(digest + ".sock")

    def make_dirs(self, *, in_store: bool = True) -> None:
        """The worker's directories, owner-only; a shared one that is not the user's own
        alone is refused (another user could reach or replace the socket). Without
        `in_store` (the worker, started by a call that made them): <state>/worker/ is
        not made again where it has gone with its store, which is left as it is, and
        StorageError says so."""
        if not in_store and not os.path.isdir(self.dir):
            raise StorageError(f"{self.dir} is gone: its store was removed")
        for path in dict.fromkeys((self.dir, self.socket_dir)):
            if not private_dir(path):
                info = os.lstat(path)
                if path == self.dir and info.st_uid == os.getuid():
                    os.chmod(path, 0o700)
                    continue
                raise StorageError(f"{path} is not private to this user: no worker socket there")


def call(places: Places, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """The worker's answer, or None when no worker listens (not started, exited, or one
    that did not answer within `timeout` seconds)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(places.socket)
        send(sock, request)
        answer = receive(sock)
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return answer


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def receive(sock: socket.socket) -> dict[str, Any]:
    """One framed message; ValueError on a short, oversized or malformed one."""
    (size,) = struct.unpack(">I", _exactly(sock, 4))
    if size > MAX_FRAME:
        raise ValueError(f"a message of {size} bytes")
    message = json.loads(_exactly(sock, size))
    if not isinstance(message, dict):
        raise ValueError("a message that is not an object")
    return message


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = sock.recv(min(left, 2**20))
        if not part:
            raise ValueError("the connection closed mid-message")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def start(places: Places, module: str = MODULE, *args: str) -> subprocess.Popen[bytes]:
    """Start the store's worker (or `module` with `args`, the duplicate guard's), detached:
    its own session (a signal to this process's group does not reach it), no terminal,
    output to its log. Two started at once are fine: the second finds the lock taken and
    exits."""
    import subprocess
    import sys

    places.make_dirs()
    _STARTED[:] = [child for child in _STARTED if child.poll() is None]
    with open(places.log, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", module, places.state_dir, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    _STARTED.append(child)
    return child


def folder_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the folder at `path`, None when there is none. A worker's store is
    gone when this changes: a folder removed and made again at the same path (a team view
    rendering into the removed store's root) is not the store it served."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def running(lock: str) -> bool:
    """Whether a worker holds `lock` (a look that costs no process start)."""
    import fcntl

    _STARTED[:] = [child for child in _STARTED if child.poll() is None]
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (and the shared lock with it)
    return False


def retire(places: Places, deadline: float) -> None:
    """Q2: ask a worker that serves another model than the configured one to exit, and
    wait (until `deadline`, a time.monotonic) until it has let go of its lock (it exits
    right after answering), so that the worker started next takes the lock and loads the
    configured model. The lock, not the pid: an exited child that nobody reaped yet still
    has its pid, but no longer its lock."""
    import fcntl

    call(places, {"op": "exit"}, timeout=max(0.1, deadline - time.monotonic()))
    try:
        lock = os.open(places.lock, os.O_RDWR)
    except OSError:
        return
    try:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.02)
                continue
            fcntl.flock(lock, fcntl.LOCK_UN)
            return
    finally:
        os.close(lock)


def wait_up(
    places: Places, deadline: float, started: subprocess.Popen[bytes] | None = None
) -> dict[str, Any] | None:
    """The worker's status once it answers, or None at the deadline (a time.monotonic),
    or as soon as the worker `started` failed (exit 1: its model cannot load; exit 0 is
    one that found the lock taken, so another is starting)."""
    while True:
        status = call(places, {"op": "status"}, timeout=max(0.1, deadline - time.monotonic()))
        if status is not None or time.monotonic() >= deadline:
            return status
        if started is not None and started.poll() not in (None, 0):
            return None
        time.sleep(0.05)


class Remote:
    """Semantic ranking through the worker, as search/__init__.py asks for it."""

    def __init__(self, places: Places, timeout: float, model: str) -> None:
        """`model`: the id of the model the caller's vectors are of ([embeddings]); a
        worker serving another model refuses the question rather than answer in its space."""
        self.places, self.timeout, self.model = places, timeout, model

    def rank(
        self, text: str, want: int, keys: list[Key]
    ) -> tuple[list[tuple[Key, float]], dict[Key, float]] | None:
        """The `want` stored vectors nearest the question's, best first, with their
        cosines, and the cosines of `keys` that have a vector; None when the worker did
        not answer (the caller ranks by words)."""
        answer = call(
            self.places,
            {
                "op": "query",
                "model": self.model,
                "text": text,
                "want": want,
                "keys": [list(k) for k in keys],
            },
            self.timeout,
        )
        if answer is None:
            return None
        try:
            top = [((str(o), i), float(score)) for o, i, score in answer["top"]]
            cosines = {
                (str(o), i): float(score)
                for (o, i), score in zip(keys, answer["cosines"], strict=True)
                if score is not None
            }
        except (KeyError, TypeError, ValueError):
            return None  # an error answer, or one of another version: by words, then
        return top, cosines
