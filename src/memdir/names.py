"""The one name rule (X1/P1) and the one way every validator matches: leaf code with no
imports of memdir, so the marker parser (R4) and the layout (paths) share it."""

from __future__ import annotations

import re

# Every pattern that validates a name is used with fullmatch, never match: `$` also matches
# before a trailing newline, so `re.match("^x$", "x\n")` accepts a line break (X1).
NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
NAME_MAX = 64


def full_match(pattern: re.Pattern[str], value: object) -> bool:
    """X1: the one test every validator of a name, id, date or word uses: the whole string
    matches `pattern`, with nothing after it (not even the newline `$` lets through)."""
    return isinstance(value, str) and pattern.fullmatch(value) is not None


# Many names at once, one per line: what `is_name` says of each, in one pass of the engine.
_NAMES_RE = re.compile(rf"(?:(?=[^\n]{{1,{NAME_MAX}}}\n){NAME_RE.pattern}\n)*")


def are_names(names: list[str]) -> bool:
    """Whether every one of `names` is a name (X1): one regex over all of them, for the
    listings that test hundreds of file names a call."""
    text = "".join(name + "\n" for name in names)
    return text.count("\n") == len(names) and _NAMES_RE.fullmatch(text) is not None


def is_name(name: object) -> bool:
    """X1/P1: kebab-case, at most 64 characters, so a name can never be a path."""
    return isinstance(name, str) and len(name) <= NAME_MAX and full_match(NAME_RE, name)
