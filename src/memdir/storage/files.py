"""Files that survive crashes and concurrent writers.

atomic_write: a unique temp file in the target's folder, flushed and fsynced, renamed over
the target, then the folder fsynced. Two writers never share a temp file, and a crash at any
instant leaves the old or the new complete file (H4).

locked: an exclusive fcntl.flock on a lock file under `.locks/`. The kernel drops it when the
process dies, so a killed writer never leaves a stale lock. fcntl rather than the filelock
package: it is in the standard library and costs nothing at import, where filelock costs
~60 ms on every CLI call.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator

from ..errors import StorageError, ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

TEMP_PREFIX = ".tmp-"


def confined(root: str, path: str, what: str = "the memory root") -> str:
    """X1: the real location of `path`, which must lie under `root`, with every symlink on
    the way checked: a link that stays inside the root is followed, one that leaves it (a
    file link or any folder link on the way) is refused with one clear error, left in
    place, never followed. `root` itself may be a link the user made on purpose: what lies
    below it is checked against its real path. Every read and write of memdir's files goes
    through here (read_text, atomic_write, listdir, unlink, locked)."""
    return _resolve(root, path, what)[1]


def _resolve(root: str, path: str, what: str = "the memory root") -> tuple[str, str]:
    """(the root's real path, `path`'s real location): what confined() checks."""
    import stat

    real_root = os.path.realpath(root)
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel.split(os.sep)[0] == os.pardir:  # named through the root's real path, perhaps
        rel = os.path.relpath(os.path.abspath(path), real_root)
        if rel.split(os.sep)[0] == os.pardir:
            raise ValidationError(f"{path} is not under {what} {root}: it was not touched")
    current = real_root
    parts = [] if rel == os.curdir else rel.split(os.sep)
    for depth, part in enumerate(parts):
        step = os.path.join(current, part)
        try:
            mode = os.lstat(step).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return real_root, os.path.join(step, *parts[depth + 1 :])  # the rest is not there yet
        except OSError as exc:
            raise _storage_error(f"cannot read {step}", exc) from exc
        if stat.S_ISLNK(mode):
            target = os.path.realpath(step)
            if not _under(real_root, target):
                raise _link_out(root, os.path.join(*parts[: depth + 1]), what)
            step = target
        current = step
    return real_root, current


def _open_folder(real_root: str, real_folder: str, root: str, what: str = "the memory root") -> int:
    """A descriptor of `real_folder`, reached from `real_root` one name at a time with
    O_NOFOLLOW: a folder swapped for a link after _resolve() checked the path is refused
    here, not followed (X1). FileNotFoundError when a folder on the way is missing."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    rel = os.path.relpath(real_folder, real_root)
    if rel.split(os.sep)[0] == os.pardir:
        raise ValidationError(f"{real_folder} is not under {root}: it was not touched")
    fd = os.open(real_root, flags)
    try:
        walked = []
        for part in [] if rel == os.curdir else rel.split(os.sep):
            walked.append(part)
            try:
                step = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                    os.path.join(real_root, *walked)
                ):
                    raise _link_out(root, os.path.join(*walked), what) from None
                raise
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def no_follow(path: str, flags: int) -> int:
    """An `opener` for open(): the final component is never followed (X1)."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)


def _under(real_root: str, real: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _link_out(root: str, rel: str, what: str) -> ValidationError:
    shown = rel.replace(os.sep, "/")
    return ValidationError(
        f"{shown} is a symlink pointing outside {what} {root}: it was left in place and not "
        "followed (nothing was read or written through it); replace it with the file or "
        "folder itself"
    )


def read_text(path: str, *, root: str, what: str = "the memory root") -> str | None:
    """The file's text, or None when it does not exist. Undecodable bytes become U+FFFD.
    The one reader of memdir's files: confined to `root` (X1), named `what` in errors."""
    data = _read_bytes(path, root, what)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_for_rewrite(path: str, *, root: str) -> str | None:
    """The text of a file about to be rewritten, or None when it does not exist. A file
    that is not UTF-8 (binary junk, another encoding) is refused rather than rewritten:
    decoding it with replacement characters would destroy bytes someone put there."""
    data = _read_bytes(path, root)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{path} is not UTF-8 text (byte {exc.start}): it was left as it is; fix or move "
            "it, then write again"
        ) from None


def read_inside(root: str, path: str, shown: str = "") -> str | None:
    """read_text confined to `root` (kept for callers that name the root first)."""
    return read_text(path, root=root)


def _read_bytes(path: str, root: str, what: str = "the memory root") -> bytes | None:
    """The one place memdir reads a file's bytes. Confined to `root` (X1), and only a
    regular file is read: a folder named x.md, a named pipe (whose open would block for
    ever) or a device is refused with one error naming it, so one odd file never breaks or
    hangs the rest."""
    import stat

    real_root, real = _resolve(root, path, what)
    folder = -1
    try:
        # every name from the root down opened with O_NOFOLLOW: a link swapped in after
        # the check, for the file or a folder on the way, is refused, not followed (X1)
        folder = _open_folder(real_root, os.path.dirname(real), root, what)
        fd = os.open(
            os.path.basename(real),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
            dir_fd=folder,
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_out(root, os.path.relpath(path, root), what) from None
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        if folder >= 0:
            os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"cannot read {path}: it is not a regular file")
        with os.fdopen(fd, "rb") as handle:
            fd = -1  # the handle owns it now
            return handle.read()
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        if fd != -1:
            os.close(fd)


def listdir(folder: str, *, root: str) -> list[str]:
    """The names in `folder` (confined to `root`, X1); [] when it does not exist."""
    real = confined(root, folder)
    try:
        return os.listdir(real)
    except (FileNotFoundError, NotADirectoryError):
        return []


def scandir(folder: str, *, root: str) -> list[os.DirEntry[str]]:
    """os.scandir of `folder`, confined to `root` (X1); [] when it does not exist."""
    real = confined(root, folder)
    try:
        with os.scandir(real) as listing:
            return list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return []


def unlink(path: str, *, root: str) -> None:
    """Remove a file of memory (FileNotFoundError when it is gone): confined to `root`, so
    a link out is refused and left in place (X1)."""
    os.unlink(confined(root, path))


def read_lines(path: str, start: int, count: int | None, *, root: str) -> tuple[list[str], int]:
    """E4: (lines start..start+count-1, 1-based, without their line breaks; total lines).
    A file with NUL bytes is not text and is refused; so is a folder (IsADirectoryError)."""
    if os.path.isdir(confined(root, path)):
        raise IsADirectoryError(path)  # read_text would turn it into a StorageError
    text = read_text(path, root=root)
    if text is None:
        raise FileNotFoundError(path)
    if "\0" in text:
        raise ValueError("not a text file")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line break ends the last line; it starts no new one
    end = len(lines) if count is None else start - 1 + count
    return lines[start - 1 : end], len(lines)


def atomic_write(path: str, text: str, *, root: str) -> None:
    data = _encoded(path, text)  # before the temp file: a failure here leaves nothing
    ensure_dir(os.path.dirname(confined(root, path)))
    with atomic_output(path, root=root) as handle:
        handle.write(data)


def _encoded(path: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"cannot write {path}: the text holds {text[exc.start]!r}, a lone surrogate "
            "that is not valid Unicode; nothing was changed"
        ) from None


def _folder_of(path: str, root: str) -> tuple[str, str, int]:
    """(the folder, the name, the folder opened) of `path`, each name on the way
    unfollowed: a temp file and a rename land in the folder that was checked, whatever is
    swapped in meanwhile (X1)."""
    real_root, real = _resolve(root, path)
    folder, name = os.path.dirname(real), os.path.basename(real)
    try:
        return folder, name, _open_folder(real_root, folder, root)
    except OSError as exc:
        raise _storage_error(f"cannot create a file in {folder}", exc) from exc


@contextlib.contextmanager
def atomic_output(path: str, *, root: str) -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` complete or not at all (H4): a unique temp
    file in the same folder, fsynced, renamed over `path`, the folder fsynced. An exception
    inside leaves `path` as it was and no temp file. The folder must exist. Confined to
    `root` (X1): a link out on the way is refused; a link inside is written through, so
    the link stays. A link swapped in at the last instant is replaced, never followed:
    rename does not follow the name it replaces."""
    folder, name, dir_fd = _folder_of(path, root)
    try:
        fd, temp = _temp_file(folder, name, dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            if isinstance(exc, OSError):
                raise _storage_error(f"cannot write {path}", exc) from exc
            raise
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)  # the rename is durable: the folder's entry is data too
    finally:
        os.close(dir_fd)


def probe_write(path: str, text: str, *, root: str) -> None:
    """Write `text` into a temp file beside `path` and delete it again, `path` untouched:
    whatever atomic_write(path, text) would meet now (a full disk, a size limit, a quota, a
    read-only folder, a lone surrogate) is raised here, before the caller commits what the
    file will then show (the team view, storage/documents.py). Not fsynced: a disk that
    takes the bytes and fails only at fsync is not found out."""
    data = _encoded(path, text)
    ensure_dir(os.path.dirname(confined(root, path)))
    folder, name, dir_fd = _folder_of(path, root)
    try:
        fd, temp = _temp_file(folder, name, dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
        except OSError as exc:
            raise _storage_error(f"cannot write {path}", exc) from exc
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def sweep_temps(path: str, *, root: str) -> None:
    """Delete temp files a killed writer of `path` left behind. Call it only while holding
    the lock every writer of `path` takes: then no live writer can own one of them."""
    real = confined(root, path)
    folder, prefix = os.path.dirname(real), f"{TEMP_PREFIX}{os.path.basename(real)}."
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def ensure_dir(folder: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise _storage_error(f"cannot create the folder {folder}", exc) from exc


def fsync_dir(folder: str) -> None:
    """Make a rename durable: the folder's entry is data too."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems (tmpfs on old kernels) refuse fsync on folders; nothing to do
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(locks_dir: str, name: str, wait_ms: int | None = None, busy: str = "") -> Iterator[None]:
    """Hold the exclusive lock `name` (one per file that is read-modified-written). The
    locks' folder lies in the memory root: a link out of it is refused like any (X1).
    `wait_ms`: wait at most this long (tried again and again, never blocked on), then
    StorageError(`busy`); None: wait for as long as it takes."""
    path = confined(os.path.dirname(locks_dir), os.path.join(locks_dir, name + ".lock"))
    ensure_dir(os.path.dirname(path))
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise _storage_error(f"cannot open the lock file {path}", exc) from exc
    try:
        if wait_ms is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _flock_within(fd, wait_ms, busy)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _flock_within(fd: int, wait_ms: int, busy: str) -> None:
    """flock `fd` exclusively, trying again (5 ms, doubling to 100 ms) until `wait_ms` have
    passed: a blocking flock has no time bound, and a holder stuck on a network call would
    keep every other process waiting behind it for ever."""
    import time

    deadline = time.monotonic() + wait_ms / 1000
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StorageError(busy or "a lock is held by another process") from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)


@contextlib.contextmanager
def folder_locked(folder: str, *, exclusive: bool = True) -> Iterator[None]:
    """An flock on the folder itself, for a file outside any memory root (an agent host's
    config): every memdir writer of a file in `folder` takes it, and no lock file is left
    in a folder that is not memdir's. The kernel drops it when the process dies."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _storage_error(f"cannot open the folder {folder}", exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _temp_file(folder: str, base: str, dir_fd: int) -> tuple[int, str]:
    """A temp name (in the folder `dir_fd` holds) no other writer can hold: pid plus
    random bytes, created with O_EXCL (which never follows a link)."""
    name = f"{TEMP_PREFIX}{base}.{os.getpid()}.{os.urandom(6).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        return os.open(name, flags, 0o644, dir_fd=dir_fd), name
    except OSError as exc:
        raise _storage_error(f"cannot create a file in {folder}", exc) from exc


def _storage_error(what: str, exc: OSError) -> StorageError:
    reasons = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up",
        errno.EROFS: "the filesystem is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    reason = reasons.get(exc.errno or 0, exc.strerror or str(exc))
    return StorageError(f"{what}: {reason}; nothing was changed")
