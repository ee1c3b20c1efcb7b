"""How `memdir serve` stops (U3, A2): SIGTERM and SIGINT, at any instant.

One policy from the moment `memdir serve` starts until the process is gone, installed
before the SDK's second of imports: the first signal asks the server to stop, gracefully,
through the hook the running server set (stdio: cancel the session; HTTP: uvicorn's
should_exit); a signal before the server runs is remembered, and the server does not
start. Every later signal is ignored: the stop is bounded (uvicorn's grace period, the
background threads' JOIN_TIMEOUT), and a second Ctrl+C that cut it short is what left
a thread inside onnxruntime at exit (abort, 134), a session unrecorded, or a traceback
from an uncancelled lifespan. Handlers are never put back to the default while the
process exits, so no late signal kills it with -15 or -2 instead of its exit code.

The exit code says why it stopped: 0 when the client left, 128 + the first signal.

A signal sent to the process may be delivered to any of its threads (the stdin reader,
the embedder, onnxruntime's pool). Python runs its handler only on the main thread, and
only once that thread runs bytecode again: a server idle in its event loop's select, no
timer due, slept on with the signal pending — the stdio stop that hung. So while a loop
runs, the C handler also writes the signal's number to a socket the loop watches
(`waking`), as asyncio's own signal handling does, and the loop acts on it at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterator
    from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stop:
    """The first stop signal, and what to do when it comes."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._hook: Callable[[], object] | None = None

    @property
    def asked(self) -> bool:
        return self.signum is not None

    @property
    def code(self) -> int:
        return 0 if self.signum is None else 128 + self.signum

    def when_asked(self, hook: Callable[[], object] | None) -> None:
        """Run `hook` at the first signal, or now if it came already; None: no hook."""
        self._hook = hook
        if hook is not None and self.signum is not None:
            hook()

    def handle(self, signum: int, frame: FrameType | None = None) -> None:
        if self.signum is not None:
            return  # stopping already
        self.signum = signum
        if self._hook is not None:
            self._hook()

    def settle(self) -> None:
        """The server is done: from here to the end, these signals are ignored. The
        interpreter's finalisation puts a Python handler back to the default, so one
        more SIGTERM then killed the exiting process (-15 instead of its code)."""
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                signal.signal(sig, signal.SIG_IGN)


_installed: Stop | None = None


def install() -> Stop:
    """The process's Stop, its handlers installed for SIGTERM and SIGINT (main thread
    only: elsewhere signals cannot be caught, and nothing is installed)."""
    global _installed
    if _installed is None:
        _installed = Stop()
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                signal.signal(sig, _installed.handle)
    return _installed


@contextlib.contextmanager
def waking(loop: asyncio.AbstractEventLoop, stop: Stop) -> Iterator[None]:
    """While inside, a stop signal wakes `loop` (the main thread's) whichever thread the
    kernel delivered it to: the C handler writes its number to a socket the loop reads,
    and the loop calls `stop.handle` (which ignores a repeat of what the Python handler
    already did). Off the main thread, where no wakeup fd can be set, it does nothing."""
    import socket

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wake_read, wake_write = socket.socketpair()
    for sock in (wake_read, wake_write):
        sock.setblocking(False)

    def numbers() -> None:
        with contextlib.suppress(OSError):
            for signum in wake_read.recv(64):
                if signum in SIGNALS:
                    stop.handle(signum)

    loop.add_reader(wake_read.fileno(), numbers)
    before = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
        loop.remove_reader(wake_read.fileno())
        wake_read.close()
        wake_write.close()
