"""An OpenClaw-style workspace (N4) -> entries, daily logs, identity files (E1, E2).

The workspace holds `MEMORY.md` (curated long-term memory), `memory/YYYY-MM-DD.md` (one
log a day; the session hook also writes `memory/YYYY-MM-DD-<slug>.md`),
`memory/heartbeat-state.json` and the identity files SOUL.md, USER.md, IDENTITY.md,
AGENTS.md, TOOLS.md, beside files that are not memory (HEARTBEAT.md, BOOTSTRAP.md).

MEMORY.md is split into one global entry per `## ` section (the text before the first
heading is one more entry); daily logs and identity files are kept whole; any other
markdown file under memory/ becomes an entry named after it, so nothing is lost.
"""

from __future__ import annotations

import json
import os
import re

from ...errors import ValidationError
from ...identity import IDENTITY_FILES
from .plan import (
    FileItem,
    Plan,
    is_only_headings,
    listing,
    read_or_skip,
    read_source,
    sections,
    title_of,
)

EXPECTED = (
    "an OpenClaw workspace folder (MEMORY.md, memory/YYYY-MM-DD.md, SOUL.md, USER.md, AGENTS.md...)"
)
DATE_FILE = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.md")
HEARTBEAT_STATE = "heartbeat-state.json"
NOT_MEMORY = {
    "HEARTBEAT.md": "OpenClaw's heartbeat checklist, not memory (memdir keeps only the "
    "heartbeat state)",
    "BOOTSTRAP.md": "OpenClaw's first-run ritual, not memory",
}


def read(path: str) -> Plan:
    if not os.path.isdir(path):
        raise ValidationError(f"{path} is not a folder: expected {EXPECTED}")
    names = listing(path)
    memory_dir = os.path.join(path, "memory")
    known = {"MEMORY.md", "memory.md", *IDENTITY_FILES}
    if not (known & set(names)) and not os.path.isdir(memory_dir):
        raise ValidationError(f"{path} is not an OpenClaw workspace: expected {EXPECTED}")
    plan = Plan()
    for name in names:
        file = os.path.join(path, name)
        if name in ("MEMORY.md", "memory.md") and os.path.isfile(file):
            text = read_or_skip(plan, "entry", file, name, "OpenClaw's MEMORY.md")
            if text is not None:
                _long_term(plan, text, name)
        elif name in IDENTITY_FILES and os.path.isfile(file):
            text = read_or_skip(plan, "identity", file, name, f"OpenClaw's {name}")
            if text is None:
                continue
            if text.strip():
                plan.items.append(FileItem("identity", name, text, name))
            else:
                plan.skip("identity", name, "empty file", name)
        elif name in NOT_MEMORY:
            plan.skip("file", name, NOT_MEMORY[name])
        elif name.endswith(".md") and os.path.isfile(file):
            plan.skip("file", name, "not part of an OpenClaw workspace's memory")
    if os.path.isdir(memory_dir):
        _memory_folder(plan, memory_dir)
    return plan


def _long_term(plan: Plan, text: str, source: str) -> None:
    for heading, body in sections(text):
        if heading is None:
            if body.strip() and not is_only_headings(body):
                description = f"Long-term memory from {source}: {title_of(body, 'preamble')}"
                plan.entry("memory-md", description, body + "\n", source)
            continue
        where = f"{source} ## {heading}"
        if not body.strip():
            plan.skip("entry", where, "empty section")
            continue
        plan.entry(
            heading or "memory-md-section",
            heading or "Untitled section of MEMORY.md",
            body + "\n",
            where,
        )


def _memory_folder(plan: Plan, folder: str) -> None:
    for name in listing(folder):
        file = os.path.join(folder, name)
        shown = f"memory/{name}"
        if name.startswith("."):
            continue
        if os.path.isdir(file):
            plan.skip("file", shown + "/", "a folder: only memory/*.md files are imported")
            continue
        if name == HEARTBEAT_STATE:
            _heartbeat(plan, file, shown)
            continue
        if not name.endswith(".md"):
            plan.skip("file", shown, "not a markdown file")
            continue
        text = read_or_skip(plan, "daily", file, shown, "an OpenClaw memory file")
        if text is None:
            continue
        if not text.strip():
            plan.skip("daily", shown, "empty file")
            continue
        day = DATE_FILE.fullmatch(name)
        if day:
            plan.items.append(FileItem("daily", day.group(1), text, shown))
        else:
            stem = name[:-3]
            plan.entry(stem, title_of(text, stem), text, shown)


def _heartbeat(plan: Plan, file: str, shown: str) -> None:
    """B1: `{"lastChecks": {check: unix-time | null}}`; anything else is left out."""
    try:
        data = json.loads(read_source(file, "OpenClaw's heartbeat state"))
    except (ValidationError, ValueError) as exc:
        plan.skip("heartbeat", shown, f"not valid JSON: {exc}")
        return
    checks = data.get("lastChecks") if isinstance(data, dict) else None
    if not isinstance(checks, dict) or not all(
        isinstance(v, int | float | type(None)) and not isinstance(v, bool) for v in checks.values()
    ):
        plan.skip("heartbeat", shown, 'expected {"lastChecks": {"check": unix-time or null}}')
        return
    text = json.dumps({"lastChecks": checks}, indent=2, sort_keys=True) + "\n"
    plan.items.append(FileItem("heartbeat", HEARTBEAT_STATE, text, shown))
