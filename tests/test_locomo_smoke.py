"""bench/locomo.py runs end to end on a tiny conversation file in LoCoMo's format and writes
the metrics it promises. No thresholds: retrieval quality comes from the real data, which
never enters this repository (CC BY-NC, test data only)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir.storage import embeddings

pytestmark = pytest.mark.slow  # the LoCoMo bench runs end to end

BENCH = Path(__file__).resolve().parent.parent / "bench"
METRICS = {"r1", "r5", "r10", "mrr", "s_r1", "s_r3"}

SESSION_1 = [
    ("Ann", "Hi Bob! I finally started violin lessons last week."),
    ("Bob", "That's great, Ann! How are the lessons going?"),
    ("Ann", "Slowly, but I practise the violin every evening after work."),
    ("Bob", "I went hiking in the mountains on Saturday, it was beautiful."),
    ("Ann", "I love hiking too! Let's go together sometime."),
]
SESSION_2 = [
    ("Bob", "Guess what, I adopted a puppy yesterday!"),
    ("Ann", "No way! What's its name?"),
    ("Bob", "Her name is Pepper, look at her.", "a photo of a small brown dog on a couch"),
    ("Ann", "She is adorable. Does she like long walks?"),
    ("Bob", "Yes, we walk by the river every morning."),
]


def conversation() -> dict[str, Any]:
    def turns(session: int, rows: list[tuple[str, ...]]) -> list[dict[str, str]]:
        out = []
        for i, row in enumerate(rows, start=1):
            turn = {"speaker": row[0], "dia_id": f"D{session}:{i}", "text": row[1]}
            if len(row) > 2:
                turn["blip_caption"] = row[2]
            out.append(turn)
        return out

    return {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns(1, SESSION_1),
            "session_2_date_time": "10:04 am on 20 May, 2023",
            "session_2": turns(2, SESSION_2),
            "session_3_date_time": "9:00 am on 1 June, 2023",  # a date with no session
        },
        "qa": [
            {
                "question": "What instrument does Ann play?",
                "answer": "violin",
                "evidence": ["D1:1", "D1:3"],
                "category": 4,
            },
            {
                "question": "When did Bob adopt a puppy?",
                "answer": "19 May 2023",
                "evidence": ["D:2:1"],
                "category": 2,
            },  # malformed, normalised to D2:1
            {
                "question": "What outdoor activities do Ann and Bob enjoy?",
                "answer": "hiking, walks",
                "evidence": ["D1:4; D2:05", "D"],
                "category": 1,
            },
            {
                "question": "Would Pepper like the mountains?",
                "answer": "probably",
                "evidence": [],
                "category": 3,
            },  # no evidence: skipped and counted
            {
                "question": "What is Bob's cat called?",
                "adversarial_answer": "Pepper",
                "evidence": ["D2:3"],
                "category": 5,
            },  # adversarial: not asked
        ],
    }


def run_locomo(tmp_path: Path, modes: str) -> dict[str, Any]:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([conversation()]), encoding="utf-8")
    out = tmp_path / "locomo.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "locomo.py"),
            str(data),
            "--modes",
            modes,
            "--json",
            str(out),
            "--vector-cache",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| bm25" in proc.stdout and "| lexical" in proc.stdout  # the tables
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def check_result(result: dict[str, Any], systems: set[str]) -> None:
    assert {"name", "params", "env", "rows", "summary"} <= set(result)
    assert result["name"] == "locomo"
    summary = result["summary"]
    assert summary["questions"] == 3 and summary["turns"] == 10
    assert set(summary["overall"]) == systems
    for metrics in summary["overall"].values():
        assert set(metrics) == METRICS
        assert all(0.0 <= v <= 1.0 and math.isfinite(v) for v in metrics.values())
    counts = summary["counts"]
    assert counts["evidence ids normalised: 'D:2:1' -> 'D2:1'"] == 1
    assert counts["evidence ids normalised: 'D2:05' -> 'D2:5'"] == 1
    assert counts["evidence ids unreadable (skipped): 'D'"] == 1
    assert counts["evidence strings holding several ids (split)"] == 1
    assert counts["questions skipped: empty evidence"] == 1
    categories = {"all", "multi-hop", "temporal", "open-domain", "single-hop"}
    for system in systems:
        rows = [r for r in result["rows"] if r["system"] == system]
        assert {r["category"] for r in rows} == categories
        for row in rows:
            assert METRICS <= set(row)
        assert next(r for r in rows if r["category"] == "all")["questions"] == 3


def test_lexical_run_writes_the_metrics(tmp_path: Path) -> None:  # Q4
    """Both layouts by default: LoCoMo sessions as memdir sessions (plain labels) and the
    turns as daily-log entries, each found back by the lines its hit covers."""
    result = run_locomo(tmp_path, "lexical")
    check_result(result, {"bm25", "lexical", "lexical · daily"})
    assert result["params"]["layouts"] == ["sessions", "daily"]
    daily = result["summary"]["overall"]["lexical · daily"]
    assert daily["r10"] > 0  # chunks map back to turns (a wrong map finds no gold at all)


@pytest.mark.embeddings
@pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")
def test_lexical_and_hybrid_run_writes_the_metrics(tmp_path: Path) -> None:  # Q4
    result = run_locomo(tmp_path, "lexical,hybrid")
    hybrid = {s for s in result["summary"]["overall"] if s.startswith("hybrid")}
    assert len(hybrid) == 2 and sum(s.endswith(" · daily") for s in hybrid) == 1
    check_result(result, {"bm25", "lexical", "lexical · daily", *hybrid})
    assert result["summary"]["best_hybrid"] in hybrid
