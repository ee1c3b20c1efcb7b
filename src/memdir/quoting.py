"""User text cannot forge the structure of a file memdir parses (E1, H3, T1): a line of an
entry that the file's parser would take as structure is quoted visibly, never dropped.
Each parser names its structure here, next to the writer that has to respect it."""

from __future__ import annotations

import re

# daily logs (daily._parse): a line starting `## ` opens a section, `## Evolution Log` too
DAILY_HEADING = re.compile(r"^## ")
# HOT.md (hot.MARKER_RE): the truncation marker that closes the file
HOT_MARKER = re.compile(r"<!--(\s*)HOT TRUNCATED", re.IGNORECASE)


def quote_lines(text: str, structure: re.Pattern[str]) -> str:
    r"""Each line `structure` matches gets a leading backslash, markdown's own escape:
    `## Evolution Log` in an entry is kept and shown as `\## Evolution Log`."""
    return "\n".join("\\" + line if structure.match(line) else line for line in text.split("\n"))


def hot_text(text: str) -> str:
    """Text for HOT.md with any truncation marker it spells quoted, so a write cannot fake
    the count of what was cut nor have its own end stripped as a marker."""
    return HOT_MARKER.sub(lambda m: f"<!--{m.group(1)}(quoted) HOT TRUNCATED", text)


def one_line(value: str) -> str:
    """A provenance tag written inside a line (a task note's `[workflow/step] (agent)`):
    line breaks fold into spaces and the brackets that close the tag become look-alikes."""
    return " ".join(value.split()).replace("]", "］").replace(")", "）")
