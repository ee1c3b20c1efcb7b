"""The duplicate guard (N1): how many injected duplicates it catches, how many
distinct facts it wrongly flags, and what it costs a write.

A store of N synthetic facts (common.make_facts) is built with Memory.add_facts. Then, one
Memory.add_fact call each, in a shuffled order:

- exact duplicates: a stored fact re-cased and re-spaced (X5: only case, Unicode form and
  spacing are set aside). Caught when the answer is `duplicate` naming the fact it repeats.
- punctuated: a stored fact with punctuation added to some words. Another fact (X5): it
  must be stored, and reported as near its source (the same words): caught when it is
  stored with the source in `similar`; refused as a duplicate, it is a false flag.
- near duplicates: a stored fact with k of its words replaced, dropped or added (k = 1, 2,
  4, 8; ~30 words a fact), so their true Jaccard ranges from ~0.95 down to ~0.6. The
  ground truth is the measured Jaccard of the pair against the threshold (0.7): a pair at
  or above it should be reported, with the source among `similar`; one below should not.
  Reported by edit level too, so the LSH's misses near the threshold show.
- distinct facts: new facts from another seed (the negatives). Any duplicate flag or
  `similar` entry on them is a false positive.

Precision = true reports / all reports; recall = true reports / pairs that should be
reported. Cost: add_fact p50/p95 with the guard, against the same insert into a store
without the guard's queries (raw SQLite insert of the same row, one transaction each).

    python bench/duplicates.py [--facts 10000] [--exact 500] [--punctuated 300] [--near 800]
        [--distinct 500]
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from typing import Any

import common
from memdir import similarity

NAME = "duplicates"
EDIT_LEVELS = (1, 2, 4, 8)


def exact_variant(text: str, rng: random.Random) -> str:
    """Same text, other case and spacing."""
    out = [word.upper() if rng.random() < 0.3 else word.lower() for word in text.split()]
    return rng.choice(["  ", " \t", "\n"]).join(out) + rng.choice(["", " ", "\n"])


def punctuated_variant(text: str, rng: random.Random) -> str:
    """Same words, punctuation added: another text (X5), with the same content words."""
    words = text.split()
    out = [w + rng.choice([",", ";", "!", "."]) if rng.random() < 0.2 else w for w in words]
    if out == words:
        out[-1] += "."
    return " ".join(out)


def near_variant(text: str, edits: int, vocab: list[str], rng: random.Random) -> str:
    words = text.split()
    for _ in range(edits):
        op = rng.choice(("replace", "drop", "add"))
        i = rng.randrange(len(words))
        if op == "replace":
            words[i] = rng.choice(vocab)
        elif op == "drop" and len(words) > 3:
            del words[i]
        else:
            words.insert(i, rng.choice(vocab))
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__ or NAME)
    p.add_argument("--facts", type=int, default=10_000)
    p.add_argument("--exact", type=int, default=500)
    p.add_argument("--punctuated", type=int, default=300)
    p.add_argument("--near", type=int, default=800)
    p.add_argument("--distinct", type=int, default=500)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    vocab = common.vocabulary()
    base = common.make_facts(args.facts, args.seed)
    distinct = common.make_facts(args.distinct, args.seed + 1)
    threshold = 0.7

    scratch = tempfile.mkdtemp(prefix="memdir-bench-dups-")
    try:
        state = os.path.join(scratch, "store")
        with common.open_memory(state) as memory:
            started = time.perf_counter()
            common.add_all(memory, base)
            build_s = time.perf_counter() - started
            ids = memory.store._require().execute("SELECT id FROM facts ORDER BY id").fetchall()
            id_of = [row[0] for row in ids]
            probes: list[dict[str, Any]] = []
            for _ in range(args.exact):
                i = rng.randrange(len(base))
                probes.append(
                    {
                        "kind": "exact",
                        "source": id_of[i],
                        "text": exact_variant(base[i][0], rng),
                        "category": base[i][1],
                    }
                )
            for _ in range(args.punctuated):
                i = rng.randrange(len(base))
                probes.append(
                    {
                        "kind": "punctuated",
                        "source": id_of[i],
                        "category": base[i][1],
                        "text": punctuated_variant(base[i][0], rng),
                    }
                )
            for n in range(args.near):
                i = rng.randrange(len(base))
                edits = EDIT_LEVELS[n % len(EDIT_LEVELS)]
                text = near_variant(base[i][0], edits, vocab, rng)
                score = similarity.jaccard(similarity.words(text), similarity.words(base[i][0]))
                probes.append(
                    {
                        "kind": f"near-{edits}",
                        "source": id_of[i],
                        "text": text,
                        "category": base[i][1],
                        "jaccard": score,
                        "should": score >= threshold,
                    }
                )
            for text, category in distinct:
                probes.append(
                    {"kind": "distinct", "source": None, "text": text, "category": category}
                )
            rng.shuffle(probes)
            times = []
            for probe in probes:
                took, fact = common.timed(memory.add_fact, probe["text"], probe["category"])
                times.append(took)
                probe["id"] = fact.id
                probe["duplicate_of"] = fact.id if fact.duplicate else None
                probe["similar"] = [s.ref for s in fact.similar]
            raw_times = raw_single(scratch, base, [p["text"] for p in probes[:500]])
            doctor_row = doctor_on(memory, probes)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    rows = []
    tp = fp = fn = 0
    for kind in ("exact", "punctuated", *(f"near-{k}" for k in EDIT_LEVELS), "distinct"):
        group = [p for p in probes if p["kind"] == kind]
        if not group:
            continue
        if kind == "exact":
            hit = sum(p["duplicate_of"] == p["source"] for p in group)
            wrong = sum(p["duplicate_of"] not in (None, p["source"]) for p in group)
            should = len(group)
        elif kind == "punctuated":
            hit = sum(p["duplicate_of"] is None and p["source"] in p["similar"] for p in group)
            wrong = sum(p["duplicate_of"] is not None for p in group)  # refused: lost
            should = len(group)
        elif kind == "distinct":
            hit, should = 0, 0
            wrong = sum(bool(p["duplicate_of"] or p["similar"]) for p in group)
        else:
            # caught: named as similar, or refused as an exact duplicate of it (an edit can
            # give back the source's words, e.g. a word replaced by itself)
            hit = sum(
                p["should"] and (p["source"] in p["similar"] or p["duplicate_of"] == p["source"])
                for p in group
            )
            # reported while below the threshold against its source (another fact it
            # resembles is judged by the same measure, so it is not counted wrong)
            wrong = sum((not p["should"]) and p["source"] in p["similar"] for p in group)
            should = sum(p["should"] for p in group)
        tp, fp, fn = tp + hit, fp + wrong, fn + (should - hit)
        jaccards = [p["jaccard"] for p in group if "jaccard" in p]
        rows.append(
            {
                "kind": kind,
                "probes": len(group),
                "should_report": should,
                "caught": hit,
                "missed": should - hit,
                "false_reports": wrong,
                "recall": hit / should if should else float("nan"),
                "jaccard_median": common.median(jaccards) if jaccards else float("nan"),
            }
        )
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    cost = common.stats_ms(times)
    raw = common.stats_ms(raw_times)
    common.print_table(
        f"Duplicate guard on {args.facts:,} facts (threshold {threshold})",
        [
            ("kind", "probe", ""),
            ("probes", "n", ","),
            ("should_report", "should flag", ","),
            ("caught", "caught", ","),
            ("missed", "missed", ","),
            ("false_reports", "false flags", ","),
            ("recall", "recall", ".3f"),
            ("jaccard_median", "median Jaccard", ".2f"),
        ],
        rows,
    )
    common.print_table(
        "Cost of one add_fact with the guard",
        [("side", "side", ""), ("p50", "p50 ms", ".2f"), ("p95", "p95 ms", ".2f")],
        [{"side": "memdir add_fact (guarded)", **cost}, {"side": "raw one-row insert", **raw}],
    )
    print(f"precision {precision:.4f}  recall {recall:.4f}  (build {build_s:.1f} s)")
    common.print_table(
        "memdir doctor on the store afterwards (duplicates.near among facts)",
        [
            ("facts", "active facts", ","),
            ("doctor_ms", "doctor ms", ".0f"),
            ("find_all_ms", "duplicates.find_all ms", ".0f"),
            ("pairs", "near pairs stored", ","),
            ("found", "found by doctor", ","),
            ("recall", "recall", ".3f"),
            ("groups", "near groups", ","),
            ("false_groups", "groups without a probe", ","),
        ],
        [doctor_row],
    )
    summary = {
        "facts": args.facts,
        "precision": precision,
        "recall": recall,
        "doctor": doctor_row,
        "true_reports": tp,
        "false_reports": fp,
        "missed": fn,
        "add_fact_ms": cost,
        "raw_insert_ms": raw,
        "threshold": threshold,
        "ok": True,
    }  # no docs/spec.md (Performance) target: ok says the run completed
    common.write_result(NAME, args.out_dir, vars(args), rows, summary)
    return 0


def doctor_on(memory: Any, probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Doctor's whole check on the store the probes left, timed, and whether its near
    duplicate groups hold each stored near-duplicate probe with its source."""
    from memdir.curation import doctor, duplicates

    started = time.perf_counter()
    report = doctor.run(memory)
    doctor_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    groups = [g for g in duplicates.find_all(memory) if g.kind == "fact" and not g.exact]
    find_ms = (time.perf_counter() - started) * 1000
    member_of = {m: i for i, g in enumerate(groups) for m in g.members}
    stored = [
        p
        for p in probes
        if p["kind"].startswith("near") and p["should"] and p["duplicate_of"] is None
    ]
    found = sum(member_of.get(p["id"], -1) == member_of.get(p["source"], -2) for p in stored)
    probe_ids = {p["id"] for p in probes} | {p["source"] for p in probes}
    active = memory.stats().facts_active
    del report
    return {
        "facts": active,
        "doctor_ms": doctor_ms,
        "find_all_ms": find_ms,
        "pairs": len(stored),
        "found": found,
        "recall": found / len(stored) if stored else float("nan"),
        "groups": len(groups),
        "false_groups": sum(not (set(g.members) & probe_ids) for g in groups),
    }


def raw_single(scratch: str, base: list[tuple[str, str]], texts: list[str]) -> list[float]:
    """The baseline: one-row transactions into a bare FTS5 table holding the same facts."""
    db = sqlite3.connect(os.path.join(scratch, "raw.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(
        "CREATE TABLE facts (id INTEGER PRIMARY KEY, category TEXT, content TEXT);"
        "CREATE VIRTUAL TABLE facts_fts USING fts5(content, content='facts', "
        "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');"
        "CREATE TRIGGER facts_ai AFTER INSERT ON facts BEGIN "
        "INSERT INTO facts_fts(rowid, content) VALUES (new.id, new.content); END;"
    )
    db.execute("BEGIN")
    db.executemany("INSERT INTO facts (category, content) VALUES (?, ?)", [(c, t) for t, c in base])
    db.execute("COMMIT")
    times = []
    for text in texts:
        started = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO facts (category, content) VALUES ('learning', ?)", (text,))
        db.execute("COMMIT")
        times.append(time.perf_counter() - started)
    db.close()
    return times


if __name__ == "__main__":
    sys.exit(main())
