"""`memdir eval` (Q5): a user's labelled questions scored on their own memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.curation import evaluate
from memdir.errors import ValidationError
from memdir.storage import embeddings


def _store(memory: Memory) -> dict[str, Any]:
    kiwi = memory.add_fact("The kiwi harvest starts in March on the north farm", "learning")
    memory.add_fact("Tractor fuel is ordered every second Monday", "learning")
    printer = memory.add_fact("The office printer lives on floor two", "learning")
    memory.write_entry(
        "deploy", "# Deploy\n\nShip with make ship after the staging check.\n", "how we deploy"
    )
    return {"kiwi": kiwi.id, "printer": printer.id}


def _lines(*items: dict[str, Any]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def test_eval_scores_each_question_by_where_its_answers_rank(memory: Memory) -> None:  # Q5
    ids = _store(memory)
    questions = evaluate.parse(
        _lines(
            {"question": "kiwi harvest", "answers": [ids["kiwi"]]},
            {"question": "how do we ship a deploy", "answers": ["global/deploy.md"]},
            {"question": "where is the printer", "answers": [ids["printer"], 999]},
            {"question": "volcano eruption", "answers": [ids["kiwi"]]},
        ),
        "q.jsonl",
    )
    result = evaluate.run(memory, questions, source="q.jsonl", modes=["lexical"])
    [lexical] = result.scores
    by_question = []
    for question in questions:
        hits = memory.search(question.text, mode="lexical", limit=10)
        ranks = [
            next((r for r, h in enumerate(hits) if a.found_by(h)), None) for a in question.answers
        ]
        by_question.append(ranks)
    assert by_question[0] == [0] and by_question[1] == [0] and by_question[3] == [None]
    assert by_question[2][1] is None  # fact 999 does not exist
    printer_rank = by_question[2][0]
    assert printer_rank is not None
    assert lexical.r10 == pytest.approx((1 + 1 + 0.5 + 0) / 4, abs=1e-4)
    assert lexical.mrr == pytest.approx((1 + 1 + 1 / (printer_rank + 1)) / 4, abs=1e-4)
    assert lexical.missed == [4]  # the line of the question nothing answered
    assert result.unknown == ["line 3: fact 999"]
    assert lexical.p50_ms > 0 and lexical.p95_ms >= lexical.p50_ms


def test_an_answer_with_lines_is_found_only_by_a_hit_over_them(memory: Memory) -> None:  # Q5
    memory.write_entry(
        "farm",
        "# Farm\n\n## Kiwis\n\nThe kiwi harvest starts in March.\n\n"
        "## Tractors\n\nTractor fuel comes on Mondays.\n",
        "the farm",
    )
    [hit] = [h for h in memory.search("kiwi harvest", mode="lexical") if h.path]
    assert hit.lines is not None
    start, end = hit.lines
    inside = evaluate.parse(_lines({"question": "kiwi", "answers": [f"global/farm.md:{end}"]}), "q")
    outside = evaluate.parse(
        _lines({"question": "kiwi", "answers": [f"global/farm.md:{end + 1}-{end + 3}"]}), "q"
    )
    assert inside[0].answers[0].found_by(hit)
    assert not outside[0].answers[0].found_by(hit)


def test_eval_records_no_hits(memory: Memory) -> None:  # Q5 N2
    """Asking the test questions is not using the memory: doctor's facts never recalled
    stay what they were."""
    ids = _store(memory)
    questions = evaluate.parse(_lines({"question": "kiwi", "answers": [ids["kiwi"]]}), "q")
    evaluate.run(memory, questions, source="q", modes=["lexical"])
    memory.flush_hits()
    rows = memory.store._require().execute("SELECT count(*) FROM fact_usage").fetchone()
    assert rows == (0,)
    assert not Path(f"{memory.layout.db}-hits").exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "q.jsonl line 2: not JSON"),
        ('{"answers": [1]}', 'q.jsonl line 2: needs "question"'),
        ('{"question": "x", "answers": []}', 'q.jsonl line 2: needs "answers"'),
        ('{"question": "x", "answers": [{"id": 1}]}', "an answer is a fact id or a path"),
        ('{"question": "x", "answers": ["../etc/passwd"]}', "not a path under the memory root"),
        ('{"question": "x", "answers": ["daily/a.md:9-3"]}', "bad line range"),
    ],
)
def test_a_bad_line_is_named_and_nothing_is_asked(line: str, message: str) -> None:  # Q5 Z
    good = json.dumps({"question": "kiwi", "answers": [1]})
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        evaluate.parse(f"{good}\n{line}\n", "q.jsonl")


def test_an_empty_file_is_an_error() -> None:  # Q5 Z
    with pytest.raises(ValidationError, match="no questions"):
        evaluate.parse("\n\n", "q.jsonl")


def test_memdir_eval_prints_a_row_per_mode(
    memory: Memory, run: Any, tmp_path: Path
) -> None:  # Q5 C
    ids = _store(memory)
    memory.close()
    file = tmp_path / "q.jsonl"
    file.write_text(_lines({"question": "kiwi harvest", "answers": [ids["kiwi"]]}))
    shown = run("eval", str(file))
    assert shown.code == 0, shown.err
    rows = {line.split()[0]: line.split() for line in shown.out.splitlines()[2:]}
    installed = ["lexical"] + (["semantic", "hybrid"] if embeddings.available() else [])
    assert [mode for mode in rows if mode in evaluate.MODES] == installed
    assert rows["lexical"][1:4] == ["1.000", "1.000", "1.000"]
    as_json = run("eval", str(file), "--mode", "lexical", "--json")
    assert as_json.code == 0, as_json.err
    data = as_json.json()
    assert [s["mode"] for s in data["scores"]] == ["lexical"] and data["questions"] == 1
    assert data["scores"][0]["r5"] == 1.0 and data["unknown"] == []
    bad = run("eval", str(tmp_path / "missing.jsonl"))
    assert bad.code != 0 and "cannot read" in bad.err and "Traceback" not in bad.err
