"""What a folder's files give, kept while the kernel says nothing in the folder changed (C1).

Recall, boot and the session hooks list global/ every call: a stat of each entry file to
see that the kept listing still holds (~1 µs a file in a warm process, ~6 µs in a freshly
forked one, whose every allocation copies a page: 6 ms at 1,000 entries). A process that
lives on (the MCP server, the browser, a library caller, the fork server) asks
inotify(7) instead: a watch on the folder, added before the value is computed, and the
value kept until an event names the folder (a file written, replaced, created, deleted,
renamed, its mode or times changed) or the watch ends (the folder deleted or moved). One
read of the queue and one stat of the folder (the same folder still at that path) a call.
The fork server keeps values for its calls: each child uses them read-only while the queue
it inherited is empty (FIONREAD), and never reads it (share_with_children).

What inotify does not see is not trusted to it: a change made through a symlink's target
or another hard link of a file (the caller keeps values only for folders of plain files),
and a folder on a network or FUSE file system (changes made on another machine raise no
event here: only local file systems are watched). A process forked from a watching one
shares its queue, so it must not read it: it starts with watches of its own.

Linux only, through libc (ctypes, loaded on the first watch: 1.6 ms, so a one-call
process never watches); elsewhere nothing is kept and every call computes.
"""

from __future__ import annotations

import contextlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any  # libc through ctypes: its functions are found by name

# inotify(7): modified, attributes, closed after writing, moved out, moved in, created,
# deleted, the folder itself deleted or moved; and only if it is a folder, not followed
_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x01000000 | 0x02000000
_OVERFLOW = 0x4000  # events were lost: nothing kept holds
_IGNORED = 0x8000  # the watch ended (its folder deleted, moved, or its file system gone)
# statfs(2) f_type of the local file systems whose changes all raise events here
_LOCAL = frozenset(
    {
        0xEF53,  # ext2, ext3, ext4
        0x58465342,  # xfs
        0x9123683E,  # btrfs
        0x01021994,  # tmpfs
        0x794C7630,  # overlayfs (a container's root)
        0x2FC12FC1,  # zfs
        0xF2F52010,  # f2fs
        0xCA451A4E,  # bcachefs
        0x52654973,  # reiserfs
        0x3153464A,  # jfs
    }
)


class _Folder:
    __slots__ = ("identity", "values", "wd")

    def __init__(self, wd: int, identity: tuple[int, int]) -> None:
        self.wd = wd
        self.identity = identity  # (st_dev, st_ino) of the folder watched
        self.values: dict[str, object] = {}


class _Watcher:
    """This process's inotify queue and what is kept under its watches. One folder can
    be reached by more than one path (a symlinked root, a bind mount): the kernel gives
    them one watch, and an event drops what every one of those paths kept."""

    def __init__(self, libc: Any, fd: int) -> None:
        import threading

        self.lock = threading.Lock()  # a server's threads share the queue and what it keeps
        self.libc = libc
        self.fd = fd
        self.folders: dict[str, _Folder] = {}
        self.by_wd: dict[int, set[str]] = {}  # a watch -> the paths that reach its folder
        self.changes = 0  # events read: a value computed across one is not kept
        self.kept = 0  # values kept

    def drain(self) -> None:
        """Read every queued event, forgetting what each one's folder held."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                return
            at = 0
            while at + 16 <= len(data):
                wd = int.from_bytes(data[at : at + 4], "little", signed=True)
                mask = int.from_bytes(data[at + 4 : at + 8], "little")
                size = int.from_bytes(data[at + 12 : at + 16], "little")
                at += 16 + size
                self.changes += 1
                if mask & _OVERFLOW:  # lost events may have ended watches: start again
                    for path in list(self.folders):
                        self.forget(path)
                    continue
                for path in list(self.by_wd.get(wd, ())):
                    if mask & _IGNORED:
                        self.forget(path)
                    else:
                        self.folders[path].values.clear()

    def forget(self, path: str) -> None:
        """Stop trusting `path`; its watch ends with the last path that reaches it."""
        folder = self.folders.pop(path, None)
        if folder is None:
            return
        folder.values.clear()
        paths = self.by_wd.get(folder.wd, set())
        paths.discard(path)
        for other in paths:
            self.folders[other].values.clear()  # what they kept rode on the same watch
        if not paths:
            self.by_wd.pop(folder.wd, None)
            self.libc.inotify_rm_watch(self.fd, folder.wd)

    def folder(self, path: str) -> _Folder | None:
        """The watched folder at `path`, its watch added now if need be; None when it
        cannot be watched (missing, not local, no watches left)."""
        try:
            info = os.stat(path)
        except OSError:
            self.forget(path)
            return None
        identity = (info.st_dev, info.st_ino)
        known = self.folders.get(path)
        if known is not None:
            if known.identity == identity:
                return known
            self.forget(path)  # another folder at that path now (its parent moved)
        if not _local(self.libc, path):
            return None
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
        if wd < 0:
            return None
        wd = int(wd)
        try:
            again = os.stat(path)
        except OSError:
            again = None
        if again is None or (again.st_dev, again.st_ino) != identity:
            # replaced while the watch was added: the next call starts again
            if wd not in self.by_wd:
                self.libc.inotify_rm_watch(self.fd, wd)
            return None
        self.drain()  # what was queued before the watch concerns what this holds no more
        known = self.folders[path] = _Folder(wd, identity)
        self.by_wd.setdefault(wd, set()).add(path)
        return known


_watcher: _Watcher | None = None
_unavailable = False  # no inotify here (not Linux, or a kernel without it)
# True: watch (a process that lives on); False: a process that makes one call (the
# CLI's own); None: a library caller, watched once it asks for a value a second time
_mode: bool | None = None
_asked: set[str] = set()
_share = False  # the fork server: its children use what it keeps (share_with_children)
_inherited: _Watcher | None = None  # in such a child: the server's watcher, read-only


def enable() -> None:
    """This process lives on to make many calls: watch the folders values are kept for."""
    global _mode
    _mode = True


def one_call() -> None:
    """This process makes one call and ends: a watch would cost more than it saves."""
    global _mode
    if _mode is None:
        _mode = False


def _current(key: str) -> _Watcher | None:
    global _watcher, _unavailable, _mode
    if _mode is None:
        if key not in _asked:
            _asked.add(key)
            return None
        _mode = True
    if not _mode or _unavailable:
        return None
    if _watcher is not None:
        return _watcher
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        _unavailable = True
        return None
    if fd < 0:
        import errno

        # out of inotify instances (EMFILE) is for now; no inotify at all is for good
        _unavailable = ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL)
        return None
    made = _Watcher(libc, int(fd))
    if _watcher is not None:  # another thread made one first
        os.close(made.fd)
        return _watcher
    _watcher = made
    return made


def _forked() -> None:
    """In a forked child: the queue is its parent's, and reading it would take the
    parent's events. A child of the fork server uses what the server kept, read-only
    (share_with_children); any other closes its copy at once (the parent's stays open)
    and watches on its own when it asks."""
    global _watcher, _inherited, _mode
    if _share:  # a call's process: it uses the server's, or computes; it never watches
        _inherited, _watcher, _mode = _watcher, None, False
        return
    if _watcher is not None:
        with contextlib.suppress(OSError):
            os.close(_watcher.fd)
        _watcher = None
    _inherited = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _local(libc: Any, path: str) -> bool:
    import ctypes

    buffer = ctypes.create_string_buffer(256)  # struct statfs: f_type first, 120 bytes
    if libc.statfs(os.fsencode(path), buffer) != 0:
        return False
    return int.from_bytes(buffer.raw[: ctypes.sizeof(ctypes.c_long)], "little") in _LOCAL


def kept(
    folders: str | tuple[str, ...], key: str, compute: Callable[[], tuple[object, bool]]
) -> object:
    """`compute()`'s value for `folders` (one, or several: a change in any of them counts)
    under `key`, computed again only after a change there. `compute` returns (value,
    keep): keep False when the value must not be trusted to the watch (the folder holds
    links). A value is kept only when no event came while it was computed. Without a
    watch (not enabled, not Linux, a folder missing or not local) it is computed every
    call."""
    paths = (folders,) if isinstance(folders, str) else folders
    if not paths:
        return compute()[0]
    if _inherited is not None:
        return _inherited_value(_inherited, paths, key, compute)
    watcher = _current(key)
    if watcher is None:
        return compute()[0]
    with watcher.lock:
        watcher.drain()  # first: a folder gone and made again at that path is forgotten
        places = [watcher.folder(path) for path in paths]
        held = [None if p is None else p.values.get(key) for p in places]
        first = held[0]
        if isinstance(first, _Kept) and all(h is first for h in held):
            return first.value
        before = watcher.changes
    value, keep = compute()  # outside the lock: another thread's look need not wait
    if keep and all(p is not None for p in places):
        with watcher.lock:
            watcher.drain()
            if watcher.changes == before and all(
                watcher.folders.get(path) is p for path, p in zip(paths, places, strict=True)
            ):
                made = _Kept(value)
                for place in places:
                    assert place is not None
                    place.values[key] = made
                watcher.kept += 1
    return value


def _inherited_value(
    watcher: _Watcher, paths: tuple[str, ...], key: str, compute: Callable[[], tuple[object, bool]]
) -> object:
    """kept() in a child of the fork server, which holds the watch: what the server kept
    holds while the queue they share is empty (the server drained it, then forked this
    process; an event since, this call's own writes too, stays queued). The child never
    reads the queue nor adds a watch: that is the server's."""
    if _pending(watcher.fd):  # (it stays queued: one event and nothing kept is trusted)
        return compute()[0]
    held = []
    for path in paths:
        place = watcher.folders.get(path)
        try:
            info = os.stat(path)
        except OSError:
            return compute()[0]
        if place is None or place.identity != (info.st_dev, info.st_ino):
            return compute()[0]
        held.append(place.values.get(key))
    first = held[0]
    if isinstance(first, _Kept) and all(h is first for h in held):
        return first.value
    return compute()[0]


def _pending(fd: int) -> bool:
    """Whether an event waits on the inotify queue `fd` (FIONREAD), without reading it."""
    import fcntl

    try:
        count = fcntl.ioctl(fd, 0x541B, b"\0\0\0\0")  # FIONREAD
    except OSError:
        return True
    return int.from_bytes(count, sys.byteorder) > 0


def share_with_children() -> None:
    """This process (the fork server) keeps values for the calls it forks: each child
    uses them read-only while the queue it inherits is empty (_inherited_value)."""
    global _share
    _share = True
    enable()


def changes() -> int:
    """Events read and values kept so far: the fork server forks a new spare when this
    moved (its old one holds a copy from before)."""
    return 0 if _watcher is None else _watcher.changes + _watcher.kept


class _Kept:
    """A value kept under the watches of one or more folders: the same object in each."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def forget_all() -> None:
    """Drop every kept value (a test, or a caller that knows better than the kernel)."""
    if _watcher is not None:
        with _watcher.lock:
            for place in _watcher.folders.values():
                place.values.clear()
