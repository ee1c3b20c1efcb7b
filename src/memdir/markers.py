"""Memorize markers (M1-M6, R4): how an agent writes memory from its output.

    MEMDIR_MEMORIZE_BEGIN
    {"scope": "global", "name": "ci-duration", "description": "CI takes ~12 min", "content": "..."}
    MEMDIR_MEMORIZE_END

`parse` is pure: it finds every block, validates what it carries, and returns the output
with every block (and every stray marker) removed, the valid requests, and one warning per
rejected block. It never raises on any input. Applying the requests is Memory.ingest's job.

A block's markers on lines of their own take those whole lines with them; markers inside a
line take only the span between them, so text outside blocks is left exactly as it was.
"""

from __future__ import annotations

import re

from .paths import NAME_MAX, is_name
from .records import Record

SCOPES = ("task", "global")
DEFANGED = "[{prefix} memorize-{which} marker, defanged]"
ANY_MARKER_RE = re.compile(r"([A-Z][A-Z0-9_]*)_MEMORIZE_(BEGIN|END)")
FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)


class Request(Record):
    scope: str  # task | global
    content: str
    name: str | None = None
    description: str | None = None


class Parsed(Record):
    output: str
    requests: list[Request]
    warnings: list[str]
    blocks: int


def parse(output: str, prefix: str = "MEMDIR", max_bytes: int = 16384) -> Parsed:
    begin, end = f"{prefix}_MEMORIZE_BEGIN", f"{prefix}_MEMORIZE_END"
    marker = re.compile(re.escape(begin) + "|" + re.escape(end))
    kept: list[str] = []
    requests: list[Request] = []
    warnings: list[str] = []
    pos = blocks = 0
    line, counted = 1, 0  # line numbers carried forward: counting from 0 each time is O(n²)
    while True:
        found = marker.search(output, pos)
        if found is None:
            kept.append(output[pos:])
            break
        line += output.count("\n", counted, found.start())
        counted = found.start()
        if found.group() == end:
            warnings.append(f"line {line}: {end} without a {begin} before it; removed")
            start, stop = _span(output, found.start(), found.end(), pos)
            kept.append(output[pos:start])
            pos = stop
            continue
        blocks += 1
        closing = marker.search(output, found.end())
        if closing is None or closing.group() == begin:
            if closing is None:
                warnings.append(
                    f"memorize block at line {line} is never closed with {end}; "
                    "it was removed and not stored"
                )
            else:
                # Blocks do not nest: this one was cut off. Drop it, keep the next one.
                warnings.append(
                    f"memorize block at line {line} is not closed before the next "
                    f"{begin}; it was removed and not stored"
                )
            kept.append(output[pos : _span_start(output, found.start(), pos)])
            pos = len(output) if closing is None else closing.start()
            continue
        body = output[found.end() : closing.start()]
        problems = _requests(body, max_bytes, requests)
        warnings.extend(f"memorize block at line {line}: {p}; not stored" for p in problems)
        start, stop = _span(output, found.start(), closing.end(), pos)
        kept.append(output[pos:start])
        pos = stop
    cleaned = "".join(kept)
    if marker.search(cleaned):  # only when removing a block joined two halves of a marker
        cleaned = defang(cleaned)
    return Parsed(cleaned, requests, warnings, blocks)


def defang(text: str) -> str:
    """R4: make every marker keyword inert, whatever its prefix, so recalled text that an
    agent echoes back can never open or close a block."""
    return ANY_MARKER_RE.sub(
        lambda m: DEFANGED.format(prefix=m.group(1), which=m.group(2).lower()), text
    )


def _span_start(output: str, index: int, floor: int) -> int:
    """Back up to the start of the line if only blanks stand before the marker on it."""
    line_start = output.rfind("\n", 0, index) + 1
    return max(line_start, floor) if output[line_start:index].strip(" \t") == "" else index


def _span(output: str, start: int, stop: int, floor: int) -> tuple[int, int]:
    """What removing output[start:stop] (a block or a stray marker) takes: its whole lines,
    line break included, when only blanks share them; otherwise exactly that span, so the
    text around it keeps its line breaks."""
    line_start = output.rfind("\n", 0, start) + 1
    newline = output.find("\n", stop)
    line_end = len(output) if newline < 0 else newline + 1
    if output[line_start:start].strip(" \t") or output[stop:line_end].strip(" \t\r\n"):
        return start, stop
    return max(line_start, floor), line_end


def _requests(body: str, max_bytes: int, out: list[Request]) -> list[str]:
    import json  # only when there is a block: json is not on the plain CLI path

    text = body.strip()
    fenced = FENCE_RE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return [f"not valid JSON ({str(exc)[:80]})"]
    items = data if isinstance(data, list) else [data]
    if not items:
        return ["an empty list"]
    problems = []
    for number, item in enumerate(items, 1):
        where = f"item {number}: " if isinstance(data, list) else ""
        try:
            out.append(_request(item, max_bytes))
        except ValueError as exc:
            problems.append(f"{where}{exc}")
    return problems


def _request(item: object, max_bytes: int) -> Request:
    if not isinstance(item, dict):
        raise ValueError("expected a JSON object with at least 'content'")
    scope = item.get("scope", "task")
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is neither 'task' nor 'global'")
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValueError("'content' is missing or empty")
    _check_unicode("content", content)
    size = len(content.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise ValueError(f"content is {size:,} bytes, over the cap of {max_bytes:,}")
    if scope == "task":
        return Request("task", content)
    name, description = item.get("name"), item.get("description")
    if not is_name(name):
        raise ValueError(f"name {name!r} is not a kebab-case name of at most {NAME_MAX} chars")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("a global entry needs a one-line 'description'")
    _check_unicode("description", description)
    return Request("global", content, name, " ".join(description.split()))


def _check_unicode(field: str, text: str) -> None:
    """A JSON escape such as \\ud800 decodes to a lone surrogate, which no file can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"\\u{ord(text[exc.start]):04x}"
        raise ValueError(f"'{field}' holds {bad}, a lone surrogate that is not text") from None
