"""Claude Code's memory (N4) -> global entries.

Claude Code reads instructions from CLAUDE.md files in a project (`CLAUDE.md`,
`CLAUDE.local.md`, `.claude/CLAUDE.md`) and keeps an auto-memory folder per project
(`~/.claude/projects/<project>/memory/`): `MEMORY.md`, an index whose first 200 lines are
loaded each session, beside topic files (`debugging.md`, ...) it reads on demand; a topic
file may open with YAML frontmatter (name, description, type).

PATH may be a project folder, an auto-memory folder, a folder holding `memory/`, or one of
those files. Each CLAUDE.md becomes an entry (`claude-md`, ...); each topic file an entry
named from its file name; MEMORY.md an entry too, unless it is nothing but links to the
topic files (then it is reported as skipped: the topic files carry its content).
"""

from __future__ import annotations

import os
import re

from ...errors import MemdirError, ValidationError
from ...storage import frontmatter
from .plan import Plan, is_only_headings, listing, one_line, read_or_skip, read_source, title_of

EXPECTED = (
    "a Claude Code project folder (CLAUDE.md, CLAUDE.local.md, .claude/CLAUDE.md) or an "
    "auto-memory folder (MEMORY.md and topic files, e.g. ~/.claude/projects/<project>/memory)"
)

INSTRUCTIONS = (
    ("CLAUDE.md", "claude-md", "Project instructions from CLAUDE.md"),
    ("CLAUDE.local.md", "claude-local-md", "Personal project instructions from CLAUDE.local.md"),
    (".claude/CLAUDE.md", "claude-md", "Project instructions from .claude/CLAUDE.md"),
)
INDEX = "MEMORY.md"
# `- [Title](topic.md)` with an optional hook after it: an index line of MEMORY.md
_LINK_LINE = re.compile(r"^\s*(?:[-*+]|\d+[.)])?\s*\[[^\]]*\]\(([^)\s]+)\)")


def read(path: str) -> Plan:
    plan = Plan()
    project, memory_dir = _locate(path)
    if project is None and memory_dir is None:
        raise ValidationError(f"{path} is not Claude Code memory: expected {EXPECTED}")
    if project is not None:
        for rel, name, description in INSTRUCTIONS:
            file = os.path.join(project, rel)
            if os.path.isfile(file):
                text = read_or_skip(plan, "entry", file, _shown(file, path), "a CLAUDE.md file")
                if text is None:
                    continue
                if text.strip():
                    plan.entry(name, description, text, _shown(file, path))
                else:
                    plan.skip("entry", _shown(file, path), "empty file")
    if memory_dir is not None:
        _read_auto_memory(plan, memory_dir, path)
    return plan


def _locate(path: str) -> tuple[str | None, str | None]:
    """(the project folder holding CLAUDE.md files, the auto-memory folder), either None."""
    if os.path.isfile(path):
        base, folder = os.path.basename(path), os.path.dirname(path)
        if base == INDEX:
            return None, folder
        if base in ("CLAUDE.md", "CLAUDE.local.md"):
            parent = os.path.dirname(folder) if os.path.basename(folder) == ".claude" else folder
            return parent, None
        return None, None
    if not os.path.isdir(path):
        return None, None
    has_instructions = any(os.path.isfile(os.path.join(path, r)) for r, _, _ in INSTRUCTIONS)
    project = path if has_instructions else None
    memory_dir = None
    nested = os.path.join(path, "memory")
    if os.path.isfile(os.path.join(path, INDEX)):
        memory_dir = path
    elif os.path.isdir(nested) and _has_markdown(nested):
        memory_dir = nested
    elif project is None and _has_markdown(path) and os.path.basename(path) == "memory":
        memory_dir = path  # an auto-memory folder whose MEMORY.md is gone: its topic files
    return project, memory_dir


def _has_markdown(folder: str) -> bool:
    return any(name.endswith(".md") for name in listing(folder))


def _read_auto_memory(plan: Plan, folder: str, root: str) -> None:
    names = listing(folder)
    topics = [n for n in names if n.endswith(".md") and n != INDEX]
    for name in names:
        file = os.path.join(folder, name)
        shown = _shown(file, root)
        if name == INDEX or name.startswith("."):
            continue
        if os.path.isdir(file):
            plan.skip("entry", shown + "/", "a folder: only the topic files beside MEMORY.md")
        elif not name.endswith(".md"):
            plan.skip("entry", shown, "not a markdown topic file")
    for name in topics:
        file = os.path.join(folder, name)
        _topic(plan, file, _shown(file, root))
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        shown = _shown(index, root)
        text = read_or_skip(plan, "entry", index, shown, "Claude Code's MEMORY.md")
        if text is None:
            return
        if _only_links(text, topics):
            plan.skip("entry", shown, "index of the topic files (each imported on its own)")
        else:
            plan.entry("claude-memory", "Claude Code auto memory (MEMORY.md)", text, shown)


def _topic(plan: Plan, file: str, shown: str) -> None:
    stem = os.path.splitext(os.path.basename(file))[0]
    try:
        text = read_source(file, "a Claude Code topic file")
        meta, body = frontmatter.parse(text, shown)
    except MemdirError as exc:
        plan.skip("entry", shown, str(exc))
        return
    if not body.strip():
        plan.skip("entry", shown, "empty file")
        return
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        description = title_of(body, stem)
    kind = meta.get("type")
    if isinstance(kind, str) and kind.strip():
        description = f"{kind.strip()}: {description}"
    name = meta.get("name") if isinstance(meta.get("name"), str) else None
    plan.entry(name or stem, one_line(description), body.strip("\n") + "\n", shown)


def _only_links(text: str, topics: list[str]) -> bool:
    """MEMORY.md holds nothing but headings, blank lines and links to the topic files."""
    for line in text.splitlines():
        if not line.strip() or is_only_headings(line):
            continue
        match = _LINK_LINE.match(line)
        if match is None or os.path.basename(match.group(1).split("#")[0]) not in topics:
            return False
    return True


def _shown(file: str, root: str) -> str:
    """A source file as the report shows it: relative to what the user pointed at."""
    base = root if os.path.isdir(root) else os.path.dirname(root)
    rel = os.path.relpath(file, base)
    return file if rel.startswith("..") else rel
