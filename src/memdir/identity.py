"""Identity files and the boot sequence (E2, E3): the text a new session starts from.

Identity files live in the state dir beside config.toml, all optional: SOUL.md (who the
agent is), USER.md (who it helps), IDENTITY.md, AGENTS.md (how it works), TOOLS.md. The
boot sequence is configurable (`[boot] files`); its names are an identity file or any file
under the state dir, `HOT.md` and `MEMORY.md` (the memory root's), and `daily:today`,
`daily:yesterday` (the local days' logs). Parts in `[boot] main_only` are left out of
subagent and group sessions. Missing or empty parts are skipped. Everything is defanged
(R4): booted text is recalled text.
"""

from __future__ import annotations

import os

from . import daily
from .errors import ValidationError
from .markers import defang
from .paths import Layout
from .records import Record
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IDENTITY_FILES = ("SOUL.md", "USER.md", "IDENTITY.md", "AGENTS.md", "TOOLS.md")
PART_CHARS = 64_000  # a boot part at most: a hand-written 10 MB file is not a context
CHARS_PER_TOKEN = 4  # the usual estimate for English prose with a BPE tokenizer


class BootPart(Record):
    name: str
    path: str
    text: str

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "chars": self.chars,
            "tokens": self.tokens,
            "text": self.text,
        }


class Boot(Record):
    parts: list[BootPart]
    subagent: bool

    @property
    def chars(self) -> int:
        return sum(p.chars for p in self.parts)

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "parts": [p.to_dict() for p in self.parts],
            "subagent": self.subagent,
            "chars": self.chars,
            "tokens": self.tokens,
        }


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def boot(
    layout: Layout,
    names: tuple[str, ...],
    main_only: tuple[str, ...],
    now: float,
    subagent: bool,
    index_text: str,
    hot_cap: int = 5250,
) -> Boot:
    """Each part is bounded whatever is on disk (E3, H3): HOT.md by its cap, any other
    file by PART_CHARS, with a last line saying what was left out and where it is."""
    from . import hot

    parts = []
    for name in names:
        if subagent and name in main_only:
            continue
        path, text = _part(layout, name, now, index_text)
        if name == "HOT.md":
            text = hot.shown(text, hot_cap)
        else:
            text = _bounded(text, path)
        if text.strip():
            parts.append(BootPart(_label(name, path, layout), path, defang(text)))
    return Boot(parts, subagent)


def _bounded(text: str, path: str) -> str:
    if len(text) <= PART_CHARS:
        return text
    end = text.rfind("\n", 0, PART_CHARS)
    head = text[: end if end > PART_CHARS // 2 else PART_CHARS].rstrip("\n")
    return (
        f"{head}\n<!-- {os.path.basename(path)} holds {len(text):,} chars: only the first "
        f"{len(head):,} are shown at boot; the whole file is {path} -->\n"
    )


def _part(layout: Layout, name: str, now: float, index_text: str) -> tuple[str, str]:
    if name == "HOT.md":
        return layout.hot, files.read_text(layout.hot, root=layout.memory_dir) or ""
    if name == "MEMORY.md":
        return layout.index_file, index_text  # fresh from the entry files (G3, G4)
    if name in ("daily:today", "daily:yesterday"):
        date = daily.resolve_date(name.split(":")[1], now)
        path = daily.path_of(layout, date)
        return path, files.read_text(path, root=layout.memory_dir) or ""
    parts = name.replace(os.sep, "/").split("/")
    if not name or os.path.isabs(name) or "\0" in name or ".." in parts:
        raise ValidationError(
            f"[boot] files: {name!r} is not a file under the state dir {layout.state_dir}: "
            "give a path relative to it"
        )
    path = os.path.join(layout.state_dir, name)
    # identity files: X1 holds relative to the state dir (a link out of it is refused)
    try:
        return path, files.read_text(path, root=layout.state_dir, what="the state dir") or ""
    except ValidationError as exc:
        raise ValidationError(f"[boot] files: {name!r}: {exc}") from None


def _label(name: str, path: str, layout: Layout) -> str:
    if name.startswith("daily:"):
        return f"{name[6:]}'s log ({os.path.basename(path)})"
    return name
