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


def read_text(path: str) -> str | None:
    """The file's text, or None when it does not exist. Undecodable bytes become U+FFFD."""
    data = _read_bytes(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_for_rewrite(path: str) -> str | None:
    """The text of a file about to be rewritten, or None when it does not exist. A file
    that is not UTF-8 (binary junk, another encoding) is refused rather than rewritten:
    decoding it with replacement characters would destroy bytes someone put there."""
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{path} is not UTF-8 text (byte {exc.start}): it was left as it is; fix or move "
            "it, then write again"
        ) from None


def read_inside(root: str, path: str, shown: str) -> str | None:
    """read_text, refusing a file that resolves outside `root` (a symlink out of the
    memory root, X1): it is left in place and never read. `shown` names it in the error."""
    from ..paths import is_inside

    if os.path.lexists(path) and not is_inside(root, path):
        raise ValidationError(
            f"{shown} is a symlink pointing outside the memory root; it is left in place "
            "and not read"
        )
    return read_text(path)


def _read_bytes(path: str) -> bytes | None:
    """The one place memdir reads a file's bytes. Only a regular file is read (issue 12):
    a folder named x.md, a named pipe (whose open would block for ever) or a device is
    refused with one error naming it, so one odd file never breaks or hangs the rest."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
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


def read_lines(path: str, start: int, count: int | None) -> tuple[list[str], int]:
    """E4: (lines start..start+count-1, 1-based, without their line breaks; total lines).
    A file with NUL bytes is not text and is refused; so is a folder (IsADirectoryError)."""
    if os.path.isdir(path):
        raise IsADirectoryError(path)  # read_text would turn it into a StorageError
    text = read_text(path)
    if text is None:
        raise FileNotFoundError(path)
    if "\0" in text:
        raise ValueError("not a text file")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final line break ends the last line; it starts no new one
    end = len(lines) if count is None else start - 1 + count
    return lines[start - 1 : end], len(lines)


def atomic_write(path: str, text: str) -> None:
    try:
        data = text.encode("utf-8")  # before the temp file: a failure here leaves nothing
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"cannot write {path}: the text holds {text[exc.start]!r}, a lone surrogate "
            "that is not valid Unicode; nothing was changed"
        ) from None
    ensure_dir(os.path.dirname(os.path.abspath(path)))
    with atomic_output(path) as handle:
        handle.write(data)


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """A binary file that appears at `path` complete or not at all (H4): a unique temp
    file in the same folder, fsynced, renamed over `path`, the folder fsynced. An exception
    inside leaves `path` as it was and no temp file. The folder must exist."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = _temp_file(folder, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise _storage_error(f"cannot write {path}", exc) from exc
        raise
    fsync_dir(folder)


def sweep_temps(path: str) -> None:
    """Delete temp files a killed writer of `path` left behind. Call it only while holding
    the lock every writer of `path` takes: then no live writer can own one of them."""
    folder, prefix = os.path.dirname(path), f"{TEMP_PREFIX}{os.path.basename(path)}."
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
def locked(locks_dir: str, name: str) -> Iterator[None]:
    """Hold the exclusive lock `name` (one per file that is read-modified-written)."""
    ensure_dir(locks_dir)
    path = os.path.join(locks_dir, name + ".lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _storage_error(f"cannot open the lock file {path}", exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _temp_file(folder: str, base: str) -> tuple[int, str]:
    """A temp name no other writer can hold: pid plus random bytes, created with O_EXCL."""
    path = os.path.join(folder, f"{TEMP_PREFIX}{base}.{os.getpid()}.{os.urandom(6).hex()}")
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), path
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
