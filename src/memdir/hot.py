"""Hot memory (H1-H6): HOT.md, the few lines every turn needs, under a hard character cap.

Every change is a read-modify-write under one lock, so appends from several processes are
never lost (L3); the previous content goes to HOT.md.bak and the new one lands atomically (H4).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable

from . import advice
from .errors import NotFoundError, StorageError, ValidationError
from .models import HotWrite
from .paths import HOT_OVERFLOW as OVERFLOW
from .paths import Layout
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .storage.documents import Documents

KEEP_CHARS = 600  # H3: the head of HOT.md is never cut
WARN_RATIO = 0.8  # H3: from here on, writes warn
MARKER = "<!-- HOT TRUNCATED: {n} chars cut; keep details in the fact archive -->"
MARKER_RE = re.compile(
    r"\n?<!-- HOT TRUNCATED: (\d+) chars cut; keep details in the fact archive -->\s*\Z"
)
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def overflow_path(layout: Layout) -> str:
    return os.path.join(layout.memory_dir, OVERFLOW)


def shown(text: str, cap: int) -> str:
    """What is injected of HOT.md (recall, boot, the MCP instructions and resource): at
    most `cap` chars whatever a hand edit put on disk, and a last line saying so."""
    if len(text) <= cap:
        return text
    notice = (
        f"<!-- HOT.md holds {len(text):,} chars, over its cap of {cap:,}: only its start is "
        f"shown; see it all with {advice.hot_show()} and move the rest out -->"
    )
    room = max(0, cap - len(notice) - 2)  # the two line breaks
    end = text.rfind("\n", 0, room + 1)
    head = text[: end if end > room // 2 else room].rstrip("\n")
    return f"{head}\n{notice}\n"


def read(layout: Layout, docs: Documents | None = None) -> str:
    """HOT.md; in team mode (`docs` shared) the view refreshed first from the stored row."""
    if docs is not None:
        return docs.read(layout.hot) or ""
    return files.read_text(layout.hot, root=layout.memory_dir) or ""


def update(
    layout: Layout,
    cap: int,
    change: Callable[[str], str],
    *,
    replace: bool = False,
    now: str = "",
    docs: Documents | None = None,
) -> HotWrite:
    """Apply `change` to the current text under the lock, cap it, back up, write atomically.

    Unless the whole file is replaced, an earlier cut stays announced (its count carried
    on), so a later append cannot slip into the marker's room and hide that text was lost.
    What the cap cuts is appended to HOT.overflow.md first (never only to HOT.md.bak, which
    the next write overwrites), and the warning says so.
    In team mode (`docs` shared) see _update_shared.
    """
    if docs is not None and docs.shared:
        return _update_shared(layout, docs, cap, change, replace=replace, now=now)
    from .storage.documents import Documents

    done: dict[str, object] = {}

    def apply(current: str | None) -> str:
        carried = 0 if replace else cut_so_far(current or "")
        text, cut, removed = _truncate(change(current or ""), cap, carried)
        if removed.strip():
            _keep_overflow(layout, removed, now)
        files.sweep_temps(layout.hot, root=layout.memory_dir)
        files.sweep_temps(layout.hot + ".bak", root=layout.memory_dir)
        backup = (
            files.read_text(layout.hot + ".bak", root=layout.memory_dir)
            if current is not None
            else None
        )
        if current is not None:  # H4: the backup is written before HOT.md
            files.atomic_write(layout.hot + ".bak", current, root=layout.memory_dir)
        done.update(current=current, backup=backup, text=text, cut=cut)
        return text

    with files.locked(layout.locks_dir, "HOT.md"):
        try:
            Documents(layout.memory_dir).change(layout.hot, None, apply, now)
        except StorageError:
            # HOT.md is unchanged (a full disk, say), so its previous backup stays too:
            # "nothing was changed" must hold for HOT.md.bak as well (`done` is empty when
            # the write was refused before the backup was touched)
            current, backup = done.get("current"), done.get("backup")
            with contextlib.suppress(OSError, StorageError):
                if done and current is not None and backup is None:
                    files.unlink(layout.hot + ".bak", root=layout.memory_dir)
                elif done and isinstance(backup, str) and backup != current:
                    files.atomic_write(layout.hot + ".bak", backup, root=layout.memory_dir)
            raise
    text, cut = str(done["text"]), int(str(done["cut"]))
    return HotWrite(len(text), cap, cut, _warning(len(text), cap, cut))


def _update_shared(
    layout: Layout,
    docs: Documents,
    cap: int,
    change: Callable[[str], str],
    *,
    replace: bool,
    now: str,
) -> HotWrite:
    """Team mode: the change and the cap are applied to the stored row inside its locked
    transaction (a compare-and-swap on what is stored, never on a stale view), so writers
    on two machines at once both land and the stored text never exceeds the cap. What the
    cap cut and the previous text (HOT.md.bak) are kept in this machine's root, as before."""
    done: dict[str, object] = {}

    def apply(current: str | None) -> str:
        carried = 0 if replace else cut_so_far(current or "")
        text, cut, removed = _truncate(change(current or ""), cap, carried)
        done.update(previous=current, text=text, cut=cut, removed=removed)
        return text

    with files.locked(layout.locks_dir, "HOT.md"):  # the local .bak and overflow files
        docs.change(layout.hot, "HOT.md", apply, now)
        text, cut, removed = str(done["text"]), int(str(done["cut"])), str(done["removed"])
        previous = done["previous"]
        if removed.strip():
            _keep_overflow(layout, removed, now)
        if isinstance(previous, str) and previous != text:
            files.sweep_temps(layout.hot + ".bak", root=layout.memory_dir)
            files.atomic_write(layout.hot + ".bak", previous, root=layout.memory_dir)
    return HotWrite(len(text), cap, cut, _warning(len(text), cap, cut))


def _keep_overflow(layout: Layout, removed: str, now: str) -> None:
    """Append what a cap cut to HOT.overflow.md, verbatim, after a comment line saying
    when; under HOT.md's lock (held by update). Nothing parses this file: it is for people."""
    path = overflow_path(layout)
    current = (
        files.read_for_rewrite(path, root=layout.memory_dir)
        or "# Cut from HOT.md by its cap, oldest first\n"
    )
    if not current.endswith("\n"):
        current += "\n"
    stamp = f"<!-- cut from HOT.md{' at ' + now if now else ''}: {len(removed):,} chars -->"
    files.sweep_temps(path, root=layout.memory_dir)
    files.atomic_write(
        path, f"{current}\n{stamp}\n{removed.strip(chr(10))}\n", root=layout.memory_dir
    )


def truncate(text: str, cap: int, carried: int = 0) -> tuple[str, int]:
    """H3: (text within `cap`, chars cut now); see _truncate."""
    kept, cut, _removed = _truncate(text, cap, carried)
    return kept, cut


def _truncate(text: str, cap: int, carried: int = 0) -> tuple[str, int, str]:
    """H3: (text within `cap`, chars cut now, the text cut). The end goes first, at a line
    break when that spares the first 600 chars, and a one-line marker closes the file
    inside the cap. `carried`: chars cut by earlier writes, still announced by the marker."""
    if carried:
        marked = text.rstrip("\n") + "\n" + MARKER.format(n=carried)
        if len(marked) <= cap:
            return marked, 0, ""
        text = text.rstrip("\n")
    elif len(text) <= cap:
        return text, 0, ""
    # Room for the marker is reserved with the widest count it could carry, so one pass
    # suffices and the result never exceeds the cap.
    room = cap - len("\n" + MARKER.format(n=carried + len(text)))
    end = text.rfind("\n", 0, room + 1)
    if end < KEEP_CHARS:
        end = room  # the last line break would eat into the protected head: cut mid-line
    cut = len(text) - end
    return text[:end] + "\n" + MARKER.format(n=carried + cut), cut, text[end:]


def cut_so_far(text: str) -> int:
    match = MARKER_RE.search(text)
    return int(match.group(1)) if match else 0


def strip_marker(text: str) -> str:
    return MARKER_RE.sub("", text)


def appended(current: str, addition: str) -> str:
    from .quoting import hot_text

    addition = hot_text(addition.strip("\n"))
    if not addition.strip():
        raise ValidationError("nothing to append: give the text to add to hot memory")
    base = strip_marker(current)
    if base and not base.endswith("\n"):
        base += "\n"
    return f"{base}{addition}\n"


def without_line(current: str, line: str) -> str:
    """Drop the one line equal to `line` (or, failing that, the one line containing it)."""
    wanted = line.strip()
    if not wanted:
        raise ValidationError("give the line to remove from hot memory")
    _not_empty(current, f"no line contains {wanted!r}")
    lines = strip_marker(current).split("\n")
    exact = [i for i, text in enumerate(lines) if _bare(text) in (wanted, _bare(wanted))]
    found = exact or [i for i, text in enumerate(lines) if wanted in text]
    if not found:
        raise NotFoundError(
            f"no line of HOT.md contains {wanted!r}: see its lines with {advice.hot_show()}",
            kind="hot line",
            key=wanted,
        )
    if len(found) > 1:
        raise ValidationError(
            f"{len(found)} lines of HOT.md contain {wanted!r}: give the whole line to remove"
        )
    del lines[found[0]]
    return "\n".join(lines)


def without_section(current: str, heading: str) -> str:
    """Drop a markdown section: its heading and everything up to the next heading of the
    same or a higher level."""
    wanted = heading.strip().lstrip("#").strip().lower()
    _not_empty(current, f"no section is headed {heading!r}")
    lines = strip_marker(current).split("\n")
    for start, text in enumerate(lines):
        match = HEADING_RE.match(text)
        if match and match.group(2).strip().lower() == wanted:
            level = len(match.group(1))
            end = start + 1
            while end < len(lines):
                nxt = HEADING_RE.match(lines[end])
                if nxt and len(nxt.group(1)) <= level:
                    break
                end += 1
            return "\n".join(lines[:start] + lines[end:])
    raise NotFoundError(
        f"HOT.md has no section headed {heading!r}: see its lines with {advice.hot_show()}",
        kind="hot section",
        key=heading,
    )


def _not_empty(current: str, what: str) -> None:
    """Nothing to remove, and nothing to look at either (a pointer to it would fail)."""
    if not strip_marker(current).strip():
        raise NotFoundError(f"hot memory is empty: {what}", kind="hot")


def _bare(line: str) -> str:
    return line.strip().lstrip("-*").strip()


def _warning(chars: int, cap: int, cut: int) -> str | None:
    if cut:
        return (
            f"HOT.md was over its cap of {cap:,} chars: {cut:,} chars were cut from the end "
            f"and kept in {OVERFLOW} (see it with {advice.get(OVERFLOW)}); keep hot memory to "
            "what every turn needs and put details in the fact archive"
        )
    if chars >= WARN_RATIO * cap:
        return (
            f"hot memory is {100 * chars // cap}% full ({chars:,}/{cap:,} chars): move details "
            f"to the fact archive ({advice.fact_add()}) before it is cut"
        )
    return None
