"""Memorize markers (M1-M6, R4): how an agent writes memory from its output.

    MEMDIR_MEMORIZE_BEGIN
    {"scope": "global", "name": "ci-duration", "description": "CI takes ~12 min", "content": "..."}
    MEMDIR_MEMORIZE_END

`parse` is pure: it finds every block, validates what it carries, and returns the output
with every block removed, the valid requests, and one warning per rejected block. It never
raises on any input. Applying the requests is Memory.ingest's job.

What is live. The parser is the one definition: a marker is the exact, case-sensitive text
`<PREFIX>_MEMORIZE_BEGIN` or `<PREFIX>_MEMORIZE_END` for the configured prefix, anywhere in
the output (blanks around it, CRLF, inside a word or a code fence alike: M1 says anywhere,
and agents often fence what they emit). A BEGIN is closed by the next marker when that is
an END; a BEGIN with no END after it, or another BEGIN first, and an END with no open BEGIN
are not blocks: they stay in the output as text (defanged, below) with a warning, and
nothing is applied from them, so an agent that mentions a marker in prose loses no word.

Why recalled memory is inert (R4, X4): no surface emits a live marker, by construction.
Memory cannot be kept free of markers at write time alone: HOT.md, entries, notes and logs
are files a person edits by hand (G4), and their text is theirs, kept as written. So every
read surface renders through `defang` (`inert` for structured results) at its edge: the
CLI's one print of a result, error and warning; the MCP server's tool results, errors,
resources, prompts, instructions and tool list; `tools.call_tool` for direct function
calling; recall and boot in the library. `defang` is deliberately wider than the parser, so
that what it leaves can be live for no prefix and no echo: it matches the keyword
`_MEMORIZE_BEGIN` / `_MEMORIZE_END` (any prefix or none) in any letter case, with invisible
format characters (zero-width space or joiner, soft hyphen, BOM, bidi controls, variation
selectors) anywhere inside, compatibility forms (full-width, mathematical, circled: any
character NFKC folds into one of the keyword), and any character spelt as a JSON escape
(`MEMDIR\\u005fMEMORIZE_BEGIN`, also with doubled backslashes) — an agent that decodes
JSON output, drops an invisible character or folds width or case still gets no marker. It
replaces the match (with the prefix before it) by a visible, readable label that a person
can turn back: `[MEMDIR memorize-begin marker, defanged]`. The label holds no keyword, so
defang is idempotent and nothing it leaves joins into one.

What memorize stores from a block is defanged as well: a block's JSON can decode to a
marker (`\\u005f`, or another prefix's), and the files memorize writes then hold none, for a
reader that opens them directly. Text written by the other paths (hot, facts, entries,
procedures, logs) and by hand is stored as given; the surfaces above make it inert.

No hint memdir emits decodes to a live marker either: a hint that tells an MCP
client to write an entry names the memorize tool with structured `blocks` (advice.py), and
the memorize tool is the only input meant to hold live markers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .names import NAME_MAX, is_name
from .records import Record

SCOPES = ("task", "global")
DEFANGED = "[{prefix}memorize-{which} marker, defanged]"
FENCE_RE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)

# Characters an echo may drop without a trace: format (Cf) characters, variation selectors,
# combining grapheme joiner, Hangul fillers. Between any two letters of a keyword.
_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff"
)
_ESCAPE = r"\\+u"  # a JSON escape, its backslash doubled any number of times


# Every character whose NFKC form is one letter of the keyword (or "_"), in either case:
# full-width, mathematical, circled, modifier and Roman-numeral forms. Generated from
# unicodedata (Unicode 14): {c: cp for cp in range(0x80, 0x110000) if
# len(n := normalize("NFKC", chr(cp))) == 1 and n.lower() == c}, as class ranges.
_COMPAT = {
    "_": "\ufe33-\ufe34\ufe4d-\ufe4f\uff3f",
    "b": (
        "\u1d2e\u1d47\u212c\u24b7\u24d1\uff22\uff42\U0001d401\U0001d41b\U0001d435\U0001d44f"
        "\U0001d469\U0001d483\U0001d4b7\U0001d4d1\U0001d4eb\U0001d505\U0001d51f\U0001d539"
        "\U0001d553\U0001d56d\U0001d587\U0001d5a1\U0001d5bb\U0001d5d5\U0001d5ef\U0001d609"
        "\U0001d623\U0001d63d\U0001d657\U0001d671\U0001d68b\U0001f131"
    ),
    "d": (
        "\u1d30\u1d48\u2145-\u2146\u216e\u217e\u24b9\u24d3\uff24\uff44\U0001d403\U0001d41d"
        "\U0001d437\U0001d451\U0001d46b\U0001d485\U0001d49f\U0001d4b9\U0001d4d3\U0001d4ed"
        "\U0001d507\U0001d521\U0001d53b\U0001d555\U0001d56f\U0001d589\U0001d5a3\U0001d5bd"
        "\U0001d5d7\U0001d5f1\U0001d60b\U0001d625\U0001d63f\U0001d659\U0001d673\U0001d68d"
        "\U0001f133"
    ),
    "e": (
        "\u1d31\u1d49\u2091\u212f-\u2130\u2147\u24ba\u24d4\uff25\uff45\U0001d404\U0001d41e"
        "\U0001d438\U0001d452\U0001d46c\U0001d486\U0001d4d4\U0001d4ee\U0001d508\U0001d522"
        "\U0001d53c\U0001d556\U0001d570\U0001d58a\U0001d5a4\U0001d5be\U0001d5d8\U0001d5f2"
        "\U0001d60c\U0001d626\U0001d640\U0001d65a\U0001d674\U0001d68e\U0001f134"
    ),
    "g": (
        "\u1d33\u1d4d\u210a\u24bc\u24d6\uff27\uff47\U0001d406\U0001d420\U0001d43a\U0001d454"
        "\U0001d46e\U0001d488\U0001d4a2\U0001d4d6\U0001d4f0\U0001d50a\U0001d524\U0001d53e"
        "\U0001d558\U0001d572\U0001d58c\U0001d5a6\U0001d5c0\U0001d5da\U0001d5f4\U0001d60e"
        "\U0001d628\U0001d642\U0001d65c\U0001d676\U0001d690\U0001f136"
    ),
    "i": (
        "\u1d35\u1d62\u2071\u2110-\u2111\u2139\u2148\u2160\u2170\u24be\u24d8\uff29\uff49"
        "\U0001d408\U0001d422\U0001d43c\U0001d456\U0001d470\U0001d48a\U0001d4be\U0001d4d8"
        "\U0001d4f2\U0001d526\U0001d540\U0001d55a\U0001d574\U0001d58e\U0001d5a8\U0001d5c2"
        "\U0001d5dc\U0001d5f6\U0001d610\U0001d62a\U0001d644\U0001d65e\U0001d678\U0001d692"
        "\U0001f138"
    ),
    "m": (
        "\u1d39\u1d50\u2098\u2133\u216f\u217f\u24c2\u24dc\uff2d\uff4d\U0001d40c\U0001d426"
        "\U0001d440\U0001d45a\U0001d474\U0001d48e\U0001d4c2\U0001d4dc\U0001d4f6\U0001d510"
        "\U0001d52a\U0001d544\U0001d55e\U0001d578\U0001d592\U0001d5ac\U0001d5c6\U0001d5e0"
        "\U0001d5fa\U0001d614\U0001d62e\U0001d648\U0001d662\U0001d67c\U0001d696\U0001f13c"
    ),
    "n": (
        "\u1d3a\u207f\u2099\u2115\u24c3\u24dd\uff2e\uff4e\U0001d40d\U0001d427\U0001d441"
        "\U0001d45b\U0001d475\U0001d48f\U0001d4a9\U0001d4c3\U0001d4dd\U0001d4f7\U0001d511"
        "\U0001d52b\U0001d55f\U0001d579\U0001d593\U0001d5ad\U0001d5c7\U0001d5e1\U0001d5fb"
        "\U0001d615\U0001d62f\U0001d649\U0001d663\U0001d67d\U0001d697\U0001f13d"
    ),
    "o": (
        "\u00ba\u1d3c\u1d52\u2092\u2134\u24c4\u24de\uff2f\uff4f\U0001d40e\U0001d428\U0001d442"
        "\U0001d45c\U0001d476\U0001d490\U0001d4aa\U0001d4de\U0001d4f8\U0001d512\U0001d52c"
        "\U0001d546\U0001d560\U0001d57a\U0001d594\U0001d5ae\U0001d5c8\U0001d5e2\U0001d5fc"
        "\U0001d616\U0001d630\U0001d64a\U0001d664\U0001d67e\U0001d698\U0001f13e"
    ),
    "r": (
        "\u02b3\u1d3f\u1d63\u211b-\u211d\u24c7\u24e1\uff32\uff52\U0001d411\U0001d42b"
        "\U0001d445\U0001d45f\U0001d479\U0001d493\U0001d4c7\U0001d4e1\U0001d4fb\U0001d52f"
        "\U0001d563\U0001d57d\U0001d597\U0001d5b1\U0001d5cb\U0001d5e5\U0001d5ff\U0001d619"
        "\U0001d633\U0001d64d\U0001d667\U0001d681\U0001d69b\U0001f12c\U0001f141"
    ),
    "z": (
        "\u1dbb\u2124\u2128\u24cf\u24e9\uff3a\uff5a\U0001d419\U0001d433\U0001d44d\U0001d467"
        "\U0001d481\U0001d49b\U0001d4b5\U0001d4cf\U0001d4e9\U0001d503\U0001d537\U0001d56b"
        "\U0001d585\U0001d59f\U0001d5b9\U0001d5d3\U0001d5ed\U0001d607\U0001d621\U0001d63b"
        "\U0001d655\U0001d66f\U0001d689\U0001d6a3\U0001f149"
    ),
}


def _unit(char: str) -> str:
    """One character of the keyword: itself in either case, a compatibility form, or a
    JSON escape of it (or of its full-width form)."""
    forms = sorted({char.lower(), char.upper()})
    codes = "|".join(f"{ord(c):04x}" for c in forms + [chr(ord(c) + 0xFEE0) for c in forms])
    literal = "".join(re.escape(c) for c in forms)
    return f"(?:[{literal}{_COMPAT[char.lower()]}]|{_ESCAPE}(?:{codes}))"


def _keyword(word: str) -> str:
    return f"[{_INVISIBLE}]*".join(_unit(c) for c in word)


_COMPILED: dict[str, re.Pattern[str]] = {}


def _wide() -> re.Pattern[str]:
    """The keyword in every spelling; compiled on first need (~4 ms: not on every CLI call,
    whose output is mostly plain ASCII with no marker in it)."""
    if "wide" not in _COMPILED:
        _COMPILED["wide"] = re.compile(
            f"{_keyword('_memorize_')}[{_INVISIBLE}]*"
            f"(?P<which>{_keyword('begin')}|{_keyword('end')})",
            re.IGNORECASE,
        )
        _COMPILED["invisible"] = re.compile(f"[{_INVISIBLE}]")
    return _COMPILED["wide"]


_NARROW = re.compile(r"_memorize_(?P<which>begin|end)", re.IGNORECASE)  # plain ASCII text

# Besides the compatibility forms and the invisible characters, the non-ASCII characters
# that match a letter of the keyword when case is ignored (İ, ı: i; ſ: s; K: k). A text
# with none of these and no backslash can spell the keyword in plain ASCII letters only,
# which _NARROW finds: it never needs the wide pattern (tests/test_markers.py checks the
# set against the wide pattern over every code point).
_CASE_ONLY = "\u0130\u0131\u017f\u212a"


def _plain_only(text: str) -> bool:
    """Whether every marker `text` can hold is one _NARROW finds: no JSON escape (a
    backslash before u: JSON text is full of other escapes, a hook's reply included) and no
    character only the wide pattern matches."""
    if "\\" in text and ("\\u" in text or "\\U" in text):
        return False
    return text.isascii() or not _spellable(text)


def _spellable(text: str) -> bool:
    """Whether `text` holds a character that only the wide pattern matches: a set test
    (~1 ms for 50 KB) instead of the wide pattern's ~5 ms compile, which an index line's
    em dash would otherwise cost every recall, boot and SessionStart."""
    if not _KEYS:
        prime()
    return not _KEYS.isdisjoint(text)


def prime() -> None:
    """Build the set _spellable tests against (~3 ms in a fresh child): the fork server
    builds it once for all its calls."""
    _KEYS.update(_expand(_INVISIBLE + "".join(_COMPAT.values()) + _CASE_ONLY))


_KEYS: set[str] = set()  # filled on first use from the class bodies above


def _expand(body: str) -> set[str]:
    """The characters of a regex class body made of literals and `a-b` ranges."""
    found: set[str] = set()
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            found.update(chr(c) for c in range(ord(body[i]), ord(body[i + 2]) + 1))
            i += 3
        else:
            found.add(body[i])
            i += 1
    return found


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
    said_begin, said_end = _said(prefix, "begin"), _said(prefix, "end")  # warnings are inert
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
            warnings.append(
                f"line {line}: a {said_end} without a {said_begin} before it; kept as text, "
                "defanged"
            )
            kept.append(output[pos : found.end()])
            pos = found.end()
            continue
        closing = marker.search(output, found.end())
        if closing is None or closing.group() == begin:
            # Not a block: the marker is text the agent wrote (prose about markers, a block
            # cut off). It stays, inert, and nothing is applied from it.
            why = f"no {said_end}" if closing is None else f"another {said_begin}"
            warnings.append(
                f"line {line}: a {said_begin} followed by {why}, so not a block; kept as "
                "text, defanged, and nothing stored from it"
            )
            stop = len(output) if closing is None else _span_start(output, closing.start(), pos)
            kept.append(output[pos:stop])
            pos = stop
            if closing is None:
                break
            continue
        blocks += 1
        body = output[found.end() : closing.start()]
        problems = _requests(body, max_bytes, requests)
        warnings.extend(f"memorize block at line {line}: {p}; not stored" for p in problems)
        start, stop = _span(output, found.start(), closing.end(), pos)
        kept.append(output[pos:start])
        pos = stop
    # R4: what memorize returns is a surface too: no marker in it is live, whatever its
    # prefix (a marker that formed no block, one joined when a block between its halves
    # went, another prefix's)
    return Parsed(defang("".join(kept)), requests, warnings, blocks)


def defang(text: str) -> str:
    """R4: every marker keyword made inert and visible, whatever its prefix, case, width,
    invisible characters or JSON escapes (see the module docstring). Text without one is
    returned as it is."""
    if _plain_only(text):
        if not _NARROW.search(text):
            return text
        pattern = _NARROW
    else:
        pattern = _wide()
    out: list[str] = []
    pos = 0
    for found in pattern.finditer(text):
        start = _prefix_start(text, pos, found.start())
        prefix = _plain(text[start : found.start()]).strip("_")
        which = "begin" if "b" in _plain(found.group("which")).lower() else "end"
        out.append(text[pos:start])
        out.append(DEFANGED.format(prefix=f"{prefix} " if prefix else "", which=which))
        pos = found.end()
    out.append(text[pos:])
    return "".join(out)


def _prefix_start(text: str, floor: int, stop: int) -> int:
    """Where the word before a keyword starts (at most 64 characters back, not before
    `floor`), for the label only: correctness rests on the keyword, which no live marker
    of any prefix lacks."""
    start = stop
    while start > max(floor, stop - 64):
        char = text[start - 1]
        if not (char.isalnum() or char == "_" or _wide() and _COMPILED["invisible"].match(char)):
            break
        start -= 1
    return start


def _said(prefix: str, which: str) -> str:
    return DEFANGED.format(prefix=f"{prefix} ", which=which)[1:].split(",")[0]


def has_marker(text: str) -> bool:
    """Whether `defang` would change `text`."""
    return (_NARROW if _plain_only(text) else _wide()).search(text) is not None


def inert(value: object) -> object:
    """`value` (a JSON-ready result: dicts, lists, strings) with every string defanged,
    keys included: what a structured surface hands an agent (R4). A str subclass (the
    CLI's Raw) comes back as a plain str only when its text changed."""
    if isinstance(value, str):
        text = defang(value)
        return value if text == value else text
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a Record keeps its type
        make = type(value)._make  # type: ignore[attr-defined]  # a NamedTuple's constructor
        return make(inert(v) for v in value)
    if isinstance(value, list | tuple):
        return [inert(v) for v in value]
    return value


def _plain(text: str) -> str:
    """_decoded, skipped for plain ASCII (the usual marker): 100k markers in a 5 MB file."""
    return text if text.isascii() and "\\" not in text else _decoded(text)


def _decoded(text: str) -> str:
    """The text as an agent would read it: escapes decoded, invisibles dropped, NFKC."""
    import unicodedata  # only once a marker was found

    text = re.sub(_ESCAPE + "([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    return unicodedata.normalize("NFKC", re.sub(f"[{_INVISIBLE}]", "", text))


def requests_from(
    items: Iterable[object], max_bytes: int = 16384
) -> tuple[list[Request], list[str]]:
    """M2 for structured input (the memorize tool's `blocks`): the same checks as a block's
    JSON, one warning per item refused."""
    requests: list[Request] = []
    warnings: list[str] = []
    for number, item in enumerate(items, 1):
        try:
            requests.append(_request(item, max_bytes))
        except ValueError as exc:
            warnings.append(f"block {number}: {exc}; not stored")
    return requests, warnings


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
    # A block's JSON may decode to a marker (`\\u005f`, another prefix's): what memorize
    # stores is inert too, so the files it writes hold none (the cap is on what is stored)
    content = defang(content)
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
    return Request("global", content, name, defang(" ".join(description.split())))


def _check_unicode(field: str, text: str) -> None:
    """A JSON escape such as \\ud800 decodes to a lone surrogate, which no file can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = f"\\u{ord(text[exc.start]):04x}"
        raise ValueError(f"'{field}' holds {bad}, a lone surrogate that is not text") from None
