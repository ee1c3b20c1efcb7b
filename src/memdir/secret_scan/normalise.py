"""Undo the simple ways a secret is hidden from a pattern (X2), so the patterns see it:
Unicode compatibility forms (full-width letters and punctuation), invisible format
characters (zero-width spaces, soft hyphens, joiners), look-alike Cyrillic and Greek
letters, escapes (JSON `\\u0041`, `\\x41`, HTML entities, URL `%41`), and a key split
across lines, by a `\\` continuation or by string concatenation (`"AKIA" "IOSF..."`).

Runs of base64, base64url or hex long enough to hide a key are decoded too, but only a
bounded number of them and only when they decode to text, so a big text stays linear.
Every function here is total: any str in, a str (or strs) out, never an exception."""

from __future__ import annotations

import binascii
import re
import unicodedata
from collections.abc import Iterator

MIN_RUN = 20  # base64 of the shortest key worth hiding (~16 bytes) is ~22 characters
MAX_RUN = 16_384  # a base64 PEM key is ~3 KB; longer runs are images or blobs: not decoded
MAX_RUNS = 32  # runs decoded per text (per depth): a bounded cost whatever the text

# Letters of other scripts drawn like Latin ones (a subset of Unicode's confusables).
_LOOKALIKES = str.maketrans(
    "АВЕКМНОРСТУХаеорсуххіјѕԁӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοаνρ",
    "ABEKMHOPCTYXaeopcyxxijsdlABEZHIKMNOPTYXoavp",
)
_PUNCTUATION = {  # dashes and quotes NFKC leaves alone
    **{ord(c): "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63"},
    **{ord(c): "'" for c in "\u2018\u2019\u201a\u201b\u2032"},
    **{ord(c): '"' for c in "\u201c\u201d\u201e\u201f\u2033"},
}
_FOLD: dict[int, str] = {
    **{code: chr(target) for code, target in _LOOKALIKES.items()},
    **_PUNCTUATION,
}
_FOLDABLE = re.compile("[" + "".join(re.escape(chr(c)) for c in _FOLD) + "]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_DROP = {"Cf", "Mn", "Me", "Cs", "Co"}  # format, combining, surrogate, private use
_ESCAPE = re.compile(
    r"\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\x([0-9a-fA-F]{2})"
    r"|\\([nrt/\\\"'])"
)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2})+")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Pieces of one string literal put back together: "ab" "cd", 'ab' + 'cd', "ab" . "cd",
# "ab" & "cd", "ab" || "cd", across a line break too.
_CONCAT = re.compile(r"([\"'])[ \t]*(?:\+|\.\.?|&|\|\||,)?[ \t]*\\?\r?\n?[ \t]*(?:\+[ \t]*)?\1")
_CONTINUATION = re.compile(r"\\\r?\n[ \t]*")
# A line break and the indentation, quote or comment marks that start the next line.
_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*(?:(?:#|//|--|;|>|\*)[ \t]*)?")
# Eight or more single characters with a space between each: a key spelled out.
_SPACED = re.compile(r"(?<!\S)(?:[A-Za-z0-9_+/=-] ){7,}[A-Za-z0-9_+/=-](?!\S)")
# What every _SPACED match holds (" a b " of "a b c d e f g h"): a cheap search first.
_SPACED_HINT = re.compile(r" \S \S ")
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{" + str(MIN_RUN) + r",}={0,2}")
_HEX_RUN = re.compile(
    r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}){" + str(MIN_RUN // 2) + r",}(?![0-9a-fA-F])"
)
RUN_MIN = min(MIN_RUN, 2 * (MIN_RUN // 2))  # the shortest run either regex matches


def normalise(text: str) -> str:
    """One canonical form for matching: compatibility forms folded (NFKC), invisible and
    combining characters dropped, look-alike letters mapped to Latin, and escapes (JSON,
    HTML, URL) decoded. Idempotent on its own output for the forms it folds."""
    for _ in range(3):  # an escape of an escape (%2541, \\u0041): until stable
        plain = unescape(text)
        if plain == text:
            break
        text = plain
    return fold(text)


def fold(text: str) -> str:
    """The Unicode part: NFKC, invisible and combining characters dropped, look-alike
    letters mapped to Latin. Idempotent."""
    if text.isascii():
        return text
    for _ in range(3):  # NFKC can yield a character it would drop or map: until stable
        before = text
        text = unicodedata.normalize("NFKC", text)
        text = _NON_ASCII.sub(_kept, text)  # only the non-ASCII characters are looked at
        if _FOLDABLE.search(text):
            text = text.translate(_FOLD)
        if text == before:
            break
    return text


def unescape(text: str) -> str:
    """Escapes decoded: `\\u0041`, `\\x41`, `\\n`, HTML entities, `%41`. One pass each."""
    if "\\" in text:
        text = _ESCAPE.sub(_escaped, text)
    if "&" in text and ";" in text and _ENTITY.search(text):
        import html  # only for text that holds an entity

        text = html.unescape(text)
    if "%" in text:
        text = _PERCENT.sub(_percent, text)
    return text


def joined(text: str) -> str:
    """The text with its lines and its string literals joined: a key split across lines,
    continued with `\\`, or concatenated from pieces reads whole."""
    text = _CONTINUATION.sub("", text)
    if "'" in text or '"' in text:
        text = _CONCAT.sub("", text)
    if "\n" in text:
        text = _BREAK.sub("", text)
    if " " in text and _SPACED_HINT.search(text):
        # (_SPACED tries every position; its hint jumps from space to space, and prose
        # rarely holds two one-character words in a row)
        text = _SPACED.sub(lambda m: m.group(0).replace(" ", ""), text)
    return text


def decoded_runs(text: str) -> Iterator[str]:
    """The text hidden in base64, base64url or hex runs of `text`: at most MAX_RUNS of
    each, each at most MAX_RUN long, and only those that decode to printable UTF-8."""
    if max(map(len, text.split()), default=0) < RUN_MIN:
        return  # a run is unbroken by whitespace: no word this long, no run (most prose)
    seen = 0
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        if len(run) > MAX_RUN or run.isdigit() or run.isalpha() and run.islower():
            continue
        seen += 1
        if seen > MAX_RUNS:
            break
        plain = _base64(run)
        if plain is not None:
            yield plain
    seen = 0
    for match in _HEX_RUN.finditer(text):
        run = match.group(0)
        if len(run) > MAX_RUN:
            continue
        seen += 1
        if seen > MAX_RUNS:
            break
        plain = _printable(binascii.unhexlify(run))
        if plain is not None:
            yield plain


def _base64(run: str) -> str | None:
    body = run.rstrip("=").replace("-", "+").replace("_", "/")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    try:
        data = binascii.a2b_base64(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    return _printable(data)


def _printable(data: bytes) -> str | None:
    """Text when `data` is UTF-8 that is nearly all printable (a hidden key), else None."""
    if len(data) < 8:
        return None
    try:
        plain = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    good = sum(1 for ch in plain if ch.isprintable() or ch in "\n\r\t")
    return plain if good >= 0.95 * len(plain) else None


def _kept(match: re.Match[str]) -> str:
    ch = match.group(0)
    return "" if unicodedata.category(ch) in _DROP else ch


def _escaped(match: re.Match[str]) -> str:
    braced, four, eight, two, simple = match.groups()
    if simple is not None:
        return _SIMPLE[simple]
    code = int(braced or four or eight or two, 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return match.group(0)
    return chr(code)


def _percent(match: re.Match[str]) -> str:
    data = bytes.fromhex(match.group(0).replace("%", ""))
    return data.decode("utf-8", "replace")
