"""When two texts say the same thing: the duplicate guard's measures, pure functions (X5).

Exact duplicate: the same text once case (casefold), Unicode form (NFC: canonically
equivalent spellings of one character) and spacing are set aside (`normalize`) — and
nothing else. Punctuation, symbols and markdown stay: `credit - debit` / `credit + debit`,
`.5 seconds` / `5 seconds`, `~/bin` / `/bin`, `!= 0` / `= 0`, C++ / C#, `- item` / `item`
are different texts. NFKC would be wrong here: it makes x² and x2 one text. Found through
a 64-bit key of that form (`text_key`) indexed in memory.db (migration 8 recomputed it
for stores written before). Only facts are refused as exact duplicates; entries and
procedures are named, and their name is what identifies them (duplicates.py).

Near duplicate: Jaccard similarity of the two texts' sets of content words (stopwords left
out; sentence punctuation and markdown emphasis trimmed from each word's edges, bullets
and heading marks dropped, so `credit - debit` and `credit + debit` have the same words
and score 1.0: reported, and stored) at or above a threshold (0.7 by default: "The user
prefers dark mode" and "User prefers dark mode in editors" share 4 of 5). A near duplicate
is only ever reported, never refused. Comparing a new fact with 100k others one by one is
too slow for a write, and an FTS5 OR of its words ranks a third of the archive (~60 ms), so
candidates come from MinHash locality-sensitive hashing: 64 hash functions in 16 bands of 4;
two texts share a band key with probability 1 - (1 - J^4)^16, 0.99 at J = 0.7 and 0.002 at
J = 0.1. Candidates are then measured exactly.

Hashes are multiply-shift over 64 bits (Dietzfelbinger et al.), so the pure-Python path of
one write and the numpy path of a bulk import give the same keys.
"""

from __future__ import annotations

import itertools
import unicodedata
import zlib

from .query import STOPWORDS

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms to import: not at run time
    from collections.abc import Callable, Collection
    from typing import Any

BANDS = 16
ROWS = 4  # hash functions per band
MASK64 = (1 << 64) - 1


def _constants(count: int) -> list[tuple[int, int]]:
    """Fixed odd multipliers and offsets: the keys stored in a database must never change,
    so they come from a fixed generator (splitmix64), not from `random`."""
    state, out = 0x6D656D646972, []  # "memdir"
    for _ in range(count):
        pair = []
        for _ in range(2):
            state = (state + 0x9E3779B97F4A7C15) & MASK64
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
            pair.append(z ^ (z >> 31))
        out.append((pair[0] | 1, pair[1]))
    return out


HASHES = _constants(BANDS * ROWS)
_MIX = 0x100000001B3  # the FNV-1 prime: mixes a band's minima into one key


# Sentence punctuation and markdown emphasis, trimmed where a word begins or ends for the
# near-duplicate measure only; what is inside a word or makes it (C++, C#, UTC+2, -1,
# node.js, don't, an emoji) is kept.
EDGE = ".,;:!?\"'`()[]{}«»“”‘’„…_*~"
MARKUP = frozenset({"-", "+", "*", "•", "—", "–", ">", "|"})  # bullets, rules, quotes


def normalize(text: str) -> str:
    """What is compared for an exact duplicate: the text in NFC, case-folded (NFC again:
    folding can decompose, as ǰ does), its words one space apart. Punctuation, symbols
    and markup are kept: they can change what a text says."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
    return " ".join(folded.split())


def text_key(text: str) -> int:
    """A signed 64-bit key of the normalised text (SQLite's INTEGER)."""
    return key_of_normal(normalize(text))


def key_of_normal(normal: str) -> int:
    import hashlib

    digest = hashlib.blake2b(normal.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def words(text: str) -> frozenset[str]:
    """The content words near duplicates are measured on (all words if all are stopwords)."""
    return words_of_normal(normalize(text))


def words_of_normal(normal: str) -> frozenset[str]:
    """words() of a text already normalised: each word without sentence punctuation at
    its edges; bullets, rules and heading marks left out. Each distinct raw word is
    trimmed once and remembered (_WORDS): a bulk import of 100k facts repeats a few
    thousand words, and trimming each occurrence in Python cost more than the insert."""
    bag = frozenset(_WORDS.many(normal.split()))
    if "" in bag:  # (one set built, not three: this runs once a fact in an import)
        bag = bag - _NO_WORD
    return (bag - STOPWORDS) or bag


class Memo:
    """`make(key)` remembered for at most `limit` keys, then forgotten whole: a bulk import
    repeats a few thousand words, and computing each occurrence in Python cost more than
    the insert."""

    def __init__(self, make: Callable[[str], Any], limit: int) -> None:
        self.make, self.limit = make, limit
        self.known: dict[str, Any] = {}

    def many(self, keys: Collection[str]) -> list[Any]:
        known = self.known
        try:
            return list(map(known.__getitem__, keys))
        except KeyError:
            if len(known) > self.limit:
                known = self.known = {}  # rebound, not cleared: a thread using it keeps it
            for key in keys:
                if key not in known:
                    known[key] = self.make(key)
            return list(map(known.__getitem__, keys))


def _word(raw: str) -> str:
    token = raw.strip(EDGE)
    if token and token not in MARKUP and token.strip("#"):
        return token
    return ""


_NO_WORD = frozenset({""})
_WORDS = Memo(_word, 50_000)  # a raw word -> the word it counts as, "" for none (~6 MB)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def word_hashes(bag: frozenset[str]) -> list[int]:
    return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in bag]


def band_keys(bag: frozenset[str]) -> list[int]:
    """The text's 16 LSH band keys (signed 64-bit), empty for a text without words."""
    if not bag:
        return []
    rows = _MINHASHES.many(bag)
    mins = list(map(min, *rows)) if len(rows) > 1 else list(rows[0])
    # the 16 bands mixed side by side, each in its own 128-bit lane of one integer: four
    # multiply-mask-xor steps on one big int instead of 64 on small ones (_band_key's
    # arithmetic: a lane's 64-bit key times the 41-bit _MIX never reaches the next lane)
    key = _BAND_LANES
    for row in range(ROWS):
        minima = int.from_bytes(_LANES.pack.pack(*mins[row::ROWS]), "little")
        key = ((key * _MIX) & _LANES_MASK64) ^ minima
    return list(_LANES.keys.unpack(key.to_bytes(_LANE_BYTES * BANDS, "little")))


# A word -> its value under each of the 64 hash functions: the pure-Python path (no numpy)
# then takes the minima of a text's words lane by lane in C (map(min, ...)) instead of
# 64 multiplications a word in Python, ~5x faster, the same keys. The 64 values come out
# of one multiply-add of 128-bit lanes: lane i holds a_i * h + b_i (< 2**97, no carry into
# the next lane), and its bits 32-63 are the value ((a_i * h + b_i) mod 2**64 >> 32).
def _minhashes(word: str) -> tuple[int, ...]:
    h = zlib.crc32(word.encode("utf-8", "surrogatepass"))
    return _LANES.hashes.unpack(
        (h * _LANES_A + _LANES_B).to_bytes(_LANE_BYTES * ROWS * BANDS, "little")
    )


_LANE_BYTES = 16  # 128-bit lanes
_LANES_A = sum(a << (8 * _LANE_BYTES * i) for i, (a, _) in enumerate(HASHES))
_LANES_B = sum(b << (8 * _LANE_BYTES * i) for i, (_, b) in enumerate(HASHES))
_BAND_LANES = sum(band << (8 * _LANE_BYTES * band) for band in range(BANDS))  # key = band
_LANES_MASK64 = sum(MASK64 << (8 * _LANE_BYTES * band) for band in range(BANDS))


class _Lanes:
    """The lanes' layouts (struct formats), made on first use: a CLI search never sketches."""

    def __getattr__(self, name: str) -> Any:
        import struct

        self.hashes = struct.Struct("<" + "4xI8x" * len(HASHES))  # each lane's bits 32-63
        self.pack = struct.Struct("<" + "Q8x" * BANDS)
        self.keys = struct.Struct("<" + "q8x" * BANDS)  # signed: SQLite's INTEGER
        return getattr(self, name)


_LANES = _Lanes()
_MINHASHES = Memo(_minhashes, 4096)  # ~2.6 KB a word


def band_keys_many(bags: list[frozenset[str]], batch: int = 1024) -> list[list[int]]:
    """band_keys for many texts at once, vectorised (a bulk import): same keys, ~10x
    faster. In batches: 64 hashes of every word of 100k texts would be a 1 GB matrix."""
    out: list[list[int]] = []
    for start in range(0, len(bags), batch):
        out += _band_keys_batch(bags[start : start + batch])
    return out


def _band_keys_batch(bags: list[frozenset[str]]) -> list[list[int]]:
    """Each distinct word of the batch is hashed once (a few thousand of them for a
    thousand facts), then every text's minima are gathered from those rows."""
    import numpy as np

    lengths = [len(bag) for bag in bags]
    vocabulary = list(set().union(*bags))
    if not vocabulary:
        return [[] for _ in bags]
    index = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
    flat = np.fromiter(map(index.__getitem__, itertools.chain.from_iterable(bags)), dtype=np.intp)
    hashed = _hash_rows(vocabulary)
    starts = np.cumsum([0, *lengths[:-1]])
    nonempty = [i for i, n in enumerate(lengths) if n]
    mins = np.minimum.reduceat(hashed[flat], starts[nonempty], axis=0)  # (texts, hashes)
    return _spread(len(bags), nonempty, _bands_of(mins))


def _hash_rows(words: list[str]) -> Any:
    """(words, 64) uint32: each word's value under the 64 hash functions (bits 32-63)."""
    import numpy as np

    values = np.array(
        [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in words], dtype=np.uint64
    )
    mult = np.array([a for a, _ in HASHES], dtype=np.uint64)[None, :]
    add = np.array([b for _, b in HASHES], dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        # 32 bits each after the shift, so half the memory gathered
        return ((values[:, None] * mult + add) >> np.uint64(32)).astype(np.uint32)


def _bands_of(mins: Any) -> list[list[int]]:
    """The 16 signed band keys of each row of minima ((texts, 64) uint32)."""
    import numpy as np

    bands = mins.astype(np.uint64).reshape(len(mins), BANDS, ROWS)
    keys = np.broadcast_to(np.arange(BANDS, dtype=np.uint64), bands.shape[:2]).copy()
    with np.errstate(over="ignore"):
        for row in range(ROWS):
            keys = (keys * np.uint64(_MIX)) ^ bands[:, :, row]
    return keys.view(np.int64).tolist()  # type: ignore[no-any-return]  # 2-d int64


def _spread(count: int, present: list[int], keys: list[list[int]]) -> list[list[int]]:
    """`keys` of the texts at positions `present`, [] for the other texts of `count`."""
    if len(present) == count:
        return keys
    out: list[list[int]] = [[] for _ in range(count)]
    for i, row_keys in zip(present, keys, strict=True):
        out[i] = row_keys
    return out


class Sketcher:
    """band_keys of many normalised texts (a bulk import), vectorised, with no set of words
    built per text: the texts' words are coded all at once (a raw word -> its word's index,
    doubled, plus 1 for a stopword; -1 for no word), and a text's minima are taken over
    its coded words, repeats included (a minimum over a word twice is the same). Each
    distinct word is trimmed and hashed once per Sketcher (one import), up to LIMIT
    words, then it starts again. Same keys as band_keys(words_of_normal(text))."""

    LIMIT = 200_000  # distinct raw words remembered (~60 MB with their hash rows)
    BATCH = 1024  # texts gathered at once: 64 hashes of each word of each text

    def __init__(self) -> None:
        import numpy as np

        self._np = np
        self._codes: dict[str, int] = {}  # a raw word -> its code
        self._index: dict[str, int] = {}  # a word -> its column in _columns
        # (64, words): a word's hash values are a column, so the gather (take) and the
        # minima (reduceat) run along rows, contiguous: ~6x faster than word rows
        self._columns = np.empty((len(HASHES), 1024), dtype=np.uint32)

    def keys(self, normals: list[str]) -> list[list[int]]:
        out: list[list[int]] = []
        for start in range(0, len(normals), self.BATCH):
            out += self._batch(normals[start : start + self.BATCH])
        return out

    def _batch(self, normals: list[str]) -> list[list[int]]:
        np = self._np
        counts = [text.count(" ") + 1 if text else 0 for text in normals]
        tokens = " ".join(normals).split()
        if len(tokens) != sum(counts):  # not normalised after all: the plain way
            return sketches_of([words_of_normal(normalize(text)) for text in normals])
        codes = np.array(self._coded(tokens), dtype=np.int64)
        owner = np.repeat(np.arange(len(normals)), counts)
        word = codes >= 0
        content = word & ((codes & 1) == 0)
        has_content = np.zeros(len(normals), dtype=bool)
        has_content[owner[content]] = True
        used = content | (word & ~has_content[owner])  # all stopwords: all of them count
        rows, owner = codes[used] >> 1, owner[used]
        if not len(rows):
            return [[] for _ in normals]
        starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        mins = np.minimum.reduceat(self._columns.take(rows, axis=1), starts, axis=1)
        return _spread(len(normals), owner[starts].tolist(), _bands_of(mins.T))

    def _coded(self, tokens: list[str]) -> list[int]:
        codes = self._codes
        new = set(tokens).difference(codes)
        if new:
            if len(codes) + len(new) > self.LIMIT:
                codes = self._codes = {}
                self._index = {}
                new = set(tokens)
            self._learn(new)
        return list(map(codes.__getitem__, tokens))

    def _learn(self, raw_words: set[str]) -> None:
        index, fresh = self._index, []
        for raw in raw_words:
            token = _word(raw)
            if not token:
                self._codes[raw] = -1
                continue
            row = index.get(token)
            if row is None:
                row = index[token] = len(index)
                fresh.append(token)
            self._codes[raw] = 2 * row + (token in STOPWORDS)
        if fresh:
            have, known = len(index), len(index) - len(fresh)
            width = self._columns.shape[1]
            if have > width:
                grown = self._np.empty((len(HASHES), max(have, 2 * width)), dtype="uint32")
                grown[:, :known] = self._columns[:, :known]
                self._columns = grown
            self._columns[:, known:have] = _hash_rows(fresh).T


def sketcher(count: int) -> Callable[[list[str]], list[list[int]]]:
    """A function from normalised texts to their band keys, for the parts of one bulk
    import of `count` texts: a Sketcher's when numpy is installed and the texts are more
    than a few (numpy costs ~60 ms to import), else band_keys text by text."""
    if count <= 16:
        return _one_by_one
    try:
        return Sketcher().keys
    except ImportError:
        return _one_by_one


def _one_by_one(normals: list[str]) -> list[list[int]]:
    return [band_keys(words_of_normal(text)) for text in normals]


def sketches(texts: list[str], normal: bool = False) -> list[list[int]]:
    """band_keys of many texts (`normal`: already normalised): vectorised when numpy is
    installed (the embeddings extra)."""
    normals = texts if normal else [normalize(text) for text in texts]
    return sketcher(len(normals))(normals)


def sketches_of(bags: list[frozenset[str]]) -> list[list[int]]:
    if len(bags) > 16:
        try:
            return band_keys_many(bags)
        except ImportError:
            pass
    return [band_keys(bag) for bag in bags]


def fingerprints(texts: list[str]) -> list[tuple[int, str]]:
    """(text_key, band keys space-separated) of each text: what a cache row of a file
    keeps for the duplicate guard (entries, procedures)."""
    return [
        (text_key(text), " ".join(map(str, keys)))
        for text, keys in zip(texts, sketches(texts), strict=True)
    ]


def bands_of(stored: str) -> set[int]:
    """The band keys of a fingerprint as `fingerprints` stored them."""
    return {int(key) for key in stored.split()}


def _band_key(band: int, mins: list[int]) -> int:
    key = band
    for value in mins:
        key = (key * _MIX ^ value) & MASK64
    return key - (1 << 64) if key >= 1 << 63 else key
