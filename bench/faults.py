"""Faults: a writer process SIGKILLed at random instants, over and over, on every write
path (H4, L3, Z).

One writer loops over every write path in random order: fact add / supersede / remove,
hot set / append, procedure write, global entry upsert, task note, daily append (plain and
Evolution Log), session start / end and heartbeat mark. It logs each write once it has
returned (one JSON line: acknowledged). It is SIGKILLed at a random instant and started
again, `--kills` times. After every kill:

- every file of the memory root is a complete version: HOT.md and HOT.md.bak are one
  whole `hot set` version plus whole appended lines, procedures and entries are one whole
  version (entries parse with frontmatter), MEMORY.md lines are well formed, task notes
  and daily logs parse (Evolution Log last), heartbeat-state.json is JSON;
- PRAGMA integrity_check is ok;
- every acknowledged write is there (acknowledged means durable).

MEMORY.md is derived (G3): a kill between an entry's rename and the index rewrite may
leave it stale until the next write, so staleness is counted, not failed, mid-run. At the
end one more normal write per path must sweep every temp file a killed writer left and
bring MEMORY.md back in line. Prints a table and writes JSON.

    python bench/faults.py [--kills 200] [--max-delay 0.15]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import common

NAME = "faults"
HOT_BODY_LINES = 20
PROC_NAMES = ("proc-one", "proc-two")
ENTRY_NAMES = ("entry-one", "entry-two")
TASK = "task-faults"
CHECK = "faults"
TEMP_PREFIX = ".tmp-"

# Recognisable versions: every one names its sequence number on every line, and ends with
# an END line, so a torn or mixed file cannot pass for a complete one.
VERSIONS = r"""
HOT_BODY_LINES = 20

def hot_text(seq):
    tag = f"v{seq}"
    body = "".join(f"{tag} line {i:02d} " + "h" * 30 + "\n" for i in range(HOT_BODY_LINES))
    return f"# Hot {tag}\n{body}END {tag}\n"

def procedure_text(name, seq):
    tag = f"v{seq}"
    steps = "".join(f"{i}. {name} step {i:02d} of {tag} " + "p" * 30 + "\n" for i in range(40))
    return f"# {name} {tag}\n{steps}END {tag}\n"

def entry_body(name, seq):
    tag = f"v{seq}"
    lines = "".join(f"{name} detail {i:02d} of {tag} " + "e" * 30 + "\n" for i in range(30))
    return f"entry {tag}\n{lines}END {tag}\n"
"""

WRITER = (
    VERSIONS
    + r"""
import json, random, sqlite3, sys
from memdir import Memory, MemdirError

state, log_path, base, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
db = sqlite3.connect(os.path.join(state, "memory", "memory.db"))
mine = [r[0] for r in db.execute("SELECT id FROM facts WHERE status = 'active'")]
db.close()
log = open(log_path, "a", buffering=1)  # one write() per line: a SIGKILL cannot tear it
mem = Memory(state)
OPS = ["fact", "supersede", "remove", "hot_set", "hot_append", "procedure", "entry", "note",
       "daily", "evolution", "session", "heartbeat"]

def ack(op, seq, **data):
    log.write(json.dumps({"op": op, "seq": seq, **data}) + "\n")

print("ready", flush=True)
n = 0
while True:
    seq = base + n
    n += 1
    op = rng.choice(OPS)
    try:
        if op == "fact" or (op in ("supersede", "remove") and not mine):
            fact = mem.add_fact(f"fault fact f{seq} about crashes", "learning")
            mine.append(fact.id)
            ack("fact", seq, id=fact.id, content=fact.content)
        elif op == "supersede":
            old = mine.pop(rng.randrange(len(mine)))
            new = mem.supersede_fact(old, f"fault fact f{seq} replaces {old}")
            mine.append(new.id)
            ack(op, seq, old=old, id=new.id, content=new.content)
        elif op == "remove":
            old = mine.pop(rng.randrange(len(mine)))
            mem.remove_fact(old)
            ack(op, seq, id=old)
        elif op == "hot_set":
            mem.hot_set(hot_text(seq))
            ack(op, seq)
        elif op == "hot_append":
            mem.hot_append(f"- hot a{seq}")
            ack(op, seq)
        elif op == "procedure":
            name = rng.choice(PROC_NAMES)
            mem.write_procedure(name, procedure_text(name, seq))
            ack(op, seq, name=name)
        elif op == "entry":
            name = rng.choice(ENTRY_NAMES)
            mem.write_entry(name, f"{name} version v{seq}", entry_body(name, seq))
            ack(op, seq, name=name)
        elif op == "note":
            mem.add_note(TASK, f"note n{seq}")
            ack(op, seq)
        elif op == "daily":
            mem.daily_append(f"daily d{seq}")
            ack(op, seq, text=f"daily d{seq}")
        elif op == "evolution":
            mem.daily_append(f"evolved e{seq}", section="Evolution Log")
            ack(op, seq, text=f"evolved e{seq}")
        elif op == "session":
            session = mem.start_session(surface="daemon")
            ack("session_start", seq, id=session.id)
            mem.end_session(session.id)
            ack("session_end", seq, id=session.id)
        elif op == "heartbeat":
            check = mem.heartbeat_mark(CHECK)
            ack(op, seq, last=check.last)
    except MemdirError as exc:
        log.write(json.dumps({"op": op, "seq": seq, "error": str(exc)}) + "\n")
"""
)

_ns: dict[str, Any] = {}
exec(VERSIONS, _ns)  # the parent builds the same versions to compare against
hot_text, procedure_text, entry_body = _ns["hot_text"], _ns["procedure_text"], _ns["entry_body"]


def writer_code() -> str:
    consts = (
        f"import os\nPROC_NAMES = {PROC_NAMES!r}\nENTRY_NAMES = {ENTRY_NAMES!r}\n"
        f"TASK = {TASK!r}\nCHECK = {CHECK!r}\n"
    )
    return consts + WRITER


# -- checks ----------------------------------------------------------------------------


class Torn(Exception):
    """A file that is not one complete version."""


def parse_hot(text: str) -> tuple[int, list[int]]:
    """(the `hot set` version, the appended sequence numbers) of a complete HOT.md."""
    first = text.split("\n", 1)[0]
    match = re.fullmatch(r"# Hot v(\d+)", first)
    if not match:
        raise Torn(f"first line {first[:60]!r}")
    seq = int(match.group(1))
    head = hot_text(seq)
    if not text.startswith(head):
        raise Torn(f"version v{seq} is not whole")
    rest = text[len(head) :]
    if rest and not rest.endswith("\n"):
        raise Torn("the last appended line is cut")
    appended = []
    for line in rest.split("\n")[:-1]:
        found = re.fullmatch(r"- hot a(\d+)", line)
        if not found:
            raise Torn(f"stray line {line[:60]!r}")
        appended.append(int(found.group(1)))
    return seq, appended


def versioned(text: str, pattern: str) -> int:
    match = re.search(pattern, text)
    if not match:
        raise Torn(f"no version in {text[:60]!r}")
    return int(match.group(1))


def verify(state: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Torn files, integrity, and every acknowledged write looked for."""
    from memdir.storage import frontmatter
    from memdir.tasks import parse_notes

    memory_dir = os.path.join(state, "memory")
    torn: list[str] = []
    temps: list[str] = []
    acked = [r for r in records if "error" not in r]
    lost: list[str] = []
    kinds: Counter[str] = Counter()

    def check(kind: str, ok: bool, what: str) -> None:
        kinds[kind] += 1
        if not ok:
            lost.append(f"{kind} {what}")

    def last_acked(op: str, **match: Any) -> int:
        seqs = [
            r["seq"]
            for r in acked
            if r["op"] == op and all(r.get(k) == v for k, v in match.items())
        ]
        return max(seqs, default=-1)

    # every file of the memory root
    texts: dict[str, str] = {}
    for folder, dirs, names in os.walk(memory_dir):
        dirs[:] = [d for d in dirs if d != ".locks"]
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, memory_dir)
            if name.startswith(TEMP_PREFIX):
                temps.append(rel)
                continue
            if name.startswith("memory.db"):
                continue
            with open(path, encoding="utf-8", errors="strict") as handle:
                text = handle.read()
            texts[rel] = text
            try:
                if rel in ("HOT.md", "HOT.md.bak"):
                    parse_hot(text)
                elif rel.startswith("procedures/"):
                    seq = versioned(text, r"^# \S+ v(\d+)\n")
                    if text != procedure_text(name[:-3], seq):
                        raise Torn(f"v{seq} is not whole")
                elif rel.startswith("global/"):
                    meta, body = frontmatter.parse(text, rel)
                    seq = versioned(body, r"^entry v(\d+)\n")
                    if (
                        body != entry_body(name[:-3], seq)
                        or meta.get("description") != f"{name[:-3]} version v{seq}"
                    ):
                        raise Torn(f"v{seq} is not whole")
                elif rel == "MEMORY.md":
                    if not all(re.fullmatch(r"- \S+ — .+", line) for line in text.splitlines()):
                        raise Torn("a malformed index line")
                elif rel.startswith("tasks/"):
                    notes = parse_notes(name[:-3], text)
                    if len(notes) != len(text.splitlines()) or not text.endswith("\n"):
                        raise Torn("a line that is not a note")
                elif rel.startswith("daily/"):
                    if not text.endswith("\n"):
                        raise Torn("no final line break")
                    if "## Evolution Log" in text and not text.rsplit("\n## ", 1)[-1].startswith(
                        "Evolution Log"
                    ):
                        raise Torn("Evolution Log is not last")
                elif rel == "heartbeat-state.json":
                    json.loads(text)
                else:
                    raise Torn("an unexpected file")
            except (Torn, ValueError, Exception) as exc:  # noqa: B014 - any failure is torn
                torn.append(f"{rel}: {exc}")

    # the database
    db = sqlite3.connect(os.path.join(memory_dir, "memory.db"))
    try:
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        facts = {
            row[0]: row[1:]
            for row in db.execute("SELECT id, content, status, superseded_by FROM facts")
        }
        sessions = dict(db.execute("SELECT id, ended FROM sessions"))
    finally:
        db.close()

    contents = Counter(row[0] for row in facts.values())
    for r in acked:
        if r["op"] in ("fact", "supersede"):
            row = facts.get(r["id"])
            check(
                "fact",
                row is not None and row[0] == r["content"] and contents[r["content"]] == 1,
                f"{r['id']}",
            )
        if r["op"] == "supersede":
            row = facts.get(r["old"])
            check(
                "fact",
                row is not None and row[1] == "superseded" and row[2] == r["id"],
                f"{r['old']} superseded",
            )
        elif r["op"] == "remove":
            row = facts.get(r["id"])
            check("fact", row is not None and row[1] == "removed", f"{r['id']} removed")
        elif r["op"] == "session_start":
            check("session", r["id"] in sessions, r["id"])
        elif r["op"] == "session_end":
            check("session", sessions.get(r["id"]) is not None, f"{r['id']} ended")

    try:
        current, appended = parse_hot(texts.get("HOT.md", ""))
    except Torn:
        current, appended = -1, []
    for r in acked:
        if r["op"] == "hot_set":
            check("hot", current >= r["seq"], f"set v{r['seq']}")
        elif r["op"] == "hot_append" and r["seq"] > current:
            check("hot", appended.count(r["seq"]) == 1, f"append a{r['seq']}")
        elif r["op"] == "hot_append":
            kinds["hot"] += 1  # acknowledged, then legitimately replaced by a later set
    for folder, op, names, pattern in (
        ("procedures", "procedure", PROC_NAMES, r"^# \S+ v(\d+)\n"),
        ("global", "entry", ENTRY_NAMES, r"\nentry v(\d+)\n"),
    ):
        for name in names:
            wanted = last_acked(op, name=name)
            text = texts.get(f"{folder}/{name}.md")
            try:
                have = -1 if text is None else versioned(text, pattern)
            except Torn:
                have = -1
            for r in acked:
                if r["op"] == op and r["name"] == name:
                    check(op, have >= wanted, f"{name} v{r['seq']} (file has v{have})")

    notes = texts.get(f"tasks/{TASK}.md", "")
    daily = "".join(t for rel, t in sorted(texts.items()) if rel.startswith("daily/"))
    # one pass over each text, not one search per record: the log grows with every kill
    note_counts = Counter(re.findall(r"(?:^| )(note n\d+)$", notes, re.M))
    daily_counts = Counter(re.findall(r"(?:^| )((?:daily d|evolved e)\d+)$", daily, re.M))
    for r in acked:
        if r["op"] == "note":
            check("note", note_counts[f"note n{r['seq']}"] == 1, f"n{r['seq']}")
        elif r["op"] in ("daily", "evolution"):
            check("daily", daily_counts[r["text"]] == 1, r["text"])
    beats = [r for r in acked if r["op"] == "heartbeat"]
    if beats:
        try:
            last = json.loads(texts["heartbeat-state.json"])["lastChecks"].get(CHECK, -1)
        except (KeyError, ValueError):
            last = -1
        for r in beats:
            check("heartbeat", last >= r["last"], f"mark at {r['last']}")

    entries = (
        sorted(
            n[:-3]
            for n in os.listdir(os.path.join(memory_dir, "global"))
            if not n.startswith(TEMP_PREFIX)
        )
        if os.path.isdir(os.path.join(memory_dir, "global"))
        else []
    )
    index_names = [line.split(" — ")[0][2:] for line in texts.get("MEMORY.md", "").splitlines()]
    index_descriptions = [
        line.split(" — ", 1)[-1] for line in texts.get("MEMORY.md", "").splitlines()
    ]
    wanted_descriptions = []
    for name in entries:
        try:
            meta, _ = frontmatter.parse(texts[f"global/{name}.md"], name)
            wanted_descriptions.append(meta.get("description"))
        except Exception:  # noqa: BLE001 - already counted as torn
            wanted_descriptions.append(None)
    return {
        "torn": torn,
        "temps": temps,
        "integrity": integrity,
        "lost": lost,
        "kinds": dict(kinds),
        "index_fresh": index_names == entries and index_descriptions == wanted_descriptions,
    }


# -- the run ---------------------------------------------------------------------------


def read_log(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    # a line is written with one write(); a kill cannot cut one, but be strict anyway
    return [json.loads(line) for line in lines if line.strip()]


def final_writes(state: str) -> None:
    """One normal write per path, so every writer sweeps what a killed one left."""
    from memdir import Memory

    seq = 10**9
    with Memory(state) as mem:
        fact = mem.add_fact(f"fault fact f{seq} final", "learning")
        mem.supersede_fact(fact.id, f"fault fact f{seq + 1} final")
        mem.hot_set(hot_text(seq))
        mem.hot_append(f"- hot a{seq + 1}")
        for name in PROC_NAMES:
            mem.write_procedure(name, procedure_text(name, seq))
        for name in ENTRY_NAMES:
            mem.write_entry(name, f"{name} version v{seq}", entry_body(name, seq))
        mem.add_note(TASK, f"note n{seq}")
        mem.daily_append(f"daily d{seq}")
        mem.daily_append(f"evolved e{seq}", section="Evolution Log")
        mem.end_session(mem.start_session(surface="daemon").id)
        mem.heartbeat_mark(CHECK)


def run(
    kills: int, max_delay: float, seed: int, workdir: str, progress: bool = True
) -> dict[str, Any]:
    from memdir import Memory

    state = os.path.join(workdir, "state")
    os.makedirs(state)
    with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
        # nothing may be cut: every acknowledged hot line must be found again; writers
        # leave vectors (derived, rebuilt by reindex) to later, so the kills land on the
        # writes themselves rather than on each new process's ~0.4 s model load
        handle.write(
            "[memory]\nhot_cap_chars = 100000000\nmax_entry_bytes = 100000\n"
            '[search]\nembed_on_write = "loaded"\n'
        )
    with Memory(state) as mem:
        mem.start_task(TASK)
        mem.hot_set(hot_text(0))
    log_path = os.path.join(workdir, "acks.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    rng = random.Random(seed)
    code = writer_code()
    torn: set[str] = set()
    lost: set[str] = set()
    integrity_failures, stale_index, crashed, temps_seen = 0, 0, [], 0
    started = time.perf_counter()
    checked: dict[str, Any] = {}
    for k in range(1, kills + 1):
        proc = subprocess.Popen(
            [sys.executable, "-c", code, state, log_path, str(k * 1_000_000), str(seed + k)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready != "ready\n":
            proc.wait()
            raise SystemExit(f"the writer did not start: {proc.stderr.read()[-2000:]}")
        time.sleep(rng.uniform(0, max_delay))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        if proc.returncode != -signal.SIGKILL:
            crashed.append(f"run {k}: exit {proc.returncode}: {err[-500:]}")
        checked = verify(state, read_log(log_path))
        torn.update(f"after kill {k}: {t}" for t in checked["torn"])
        lost.update(checked["lost"])
        integrity_failures += checked["integrity"] != "ok"
        stale_index += not checked["index_fresh"]
        temps_seen += len(checked["temps"])
        if progress and k % 25 == 0:
            print(
                f"  {k} kills, {len(read_log(log_path))} log lines, "
                f"{len(lost)} lost, {len(torn)} torn",
                file=sys.stderr,
                flush=True,
            )
    final_writes(state)
    records = read_log(log_path)
    final = verify(state, records)
    lost.update(final["lost"])
    torn.update(f"at the end: {t}" for t in final["torn"])
    integrity_failures += final["integrity"] != "ok"
    return {
        "seconds": time.perf_counter() - started,
        "records": records,
        "kinds": final["kinds"],
        "torn": sorted(torn),
        "lost": sorted(lost),
        "integrity_failures": integrity_failures,
        "stale_index_after_kill": stale_index,
        "index_fresh_at_end": final["index_fresh"],
        "temps_seen_after_kills": temps_seen,
        "temps_left_at_end": final["temps"],
        "crashed": crashed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument(
        "--max-delay",
        type=float,
        default=0.15,
        help="seconds the writer runs at most before it is killed",
    )
    parser.add_argument("--seed", type=int, default=common.DEFAULT_SEED)
    parser.add_argument("--cache-dir", help="unused: every run starts from an empty store")
    parser.add_argument("--out-dir", default=common.RESULTS_DIR)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memdir-faults-") as workdir:
        outcome = run(args.kills, args.max_delay, args.seed, workdir)
    records = outcome["records"]
    acked = [r for r in records if "error" not in r]
    errors = [r for r in records if "error" in r]
    checks = sum(outcome["kinds"].values())
    summary = {
        "kills": args.kills,
        "writes_acknowledged": len(acked),
        "checks": checks,
        "found": checks - len(outcome["lost"]),
        "lost": len(outcome["lost"]),
        "torn_files": len(outcome["torn"]),
        "integrity_failures": outcome["integrity_failures"],
        "errors": len(errors),
        "crashed": len(outcome["crashed"]),
        "stale_index_after_kill": outcome["stale_index_after_kill"],
        "index_fresh_at_end": outcome["index_fresh_at_end"],
        "temps_seen_after_kills": outcome["temps_seen_after_kills"],
        "temps_left_at_end": len(outcome["temps_left_at_end"]),
        "seconds": outcome["seconds"],
    }
    summary["ok"] = (
        summary["lost"] == 0
        and summary["torn_files"] == 0
        and summary["integrity_failures"] == 0
        and not errors
        and not outcome["crashed"]
        and summary["index_fresh_at_end"]
        and summary["temps_left_at_end"] == 0
        and len(acked) > 0
    )
    common.print_table(
        f"faults: a writer SIGKILLed {args.kills} times at random instants",
        [
            ("kills", "kills", ",d"),
            ("writes_acknowledged", "writes acknowledged", ",d"),
            ("found", "found", ",d"),
            ("lost", "lost", ",d"),
            ("torn_files", "torn files", ",d"),
            ("integrity_failures", "integrity failures", ",d"),
            ("temps_left_at_end", "temps left at end", ",d"),
            ("ok", "ok", ""),
        ],
        [summary],
    )
    by_op = Counter(r["op"] for r in acked)
    rows = [{"op": op, "acknowledged": count} for op, count in sorted(by_op.items())]
    common.print_table(
        "acknowledged writes per path",
        [("op", "op", ""), ("acknowledged", "acknowledged", ",d")],
        rows,
    )
    print(json.dumps(summary, indent=2))
    for line in [
        *outcome["lost"][:10],
        *outcome["torn"][:10],
        *outcome["crashed"][:5],
        *(f"error in {e['op']}: {e['error']}" for e in errors[:5]),
    ]:
        print(f"  {line}")
    common.write_result(NAME, args.out_dir, vars(args), rows, summary)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
