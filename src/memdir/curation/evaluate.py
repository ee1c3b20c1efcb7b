"""`memdir eval` (Q5): a user's own labelled questions asked of their own memory, in each
search mode, scored the way bench/locomo.py scores LoCoMo — recall of the answers in the
top 5 and top 10, the reciprocal rank of the first one, and the latency of each search —
so a change of settings, model or ranking can be judged on the memory it serves.

The questions are JSON lines: {"question": "...", "answers": [12, "global/deploy.md",
"daily/2026-11-30.md:10-14"]}. An answer is a fact id (a number), or a path relative to
the memory root, found by any hit in that file, or, with `:START-END`, by a hit whose lines
overlap those. The searches record no hits: asking the test questions is not using the
memory (doctor's facts never recalled stay what they were)."""

from __future__ import annotations

import json
import math
import os
import time

from ..errors import MemdirError, NotFoundError, ValidationError
from ..records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..memory import Memory
    from ..models import Hit
    from ..types import Kind, SearchMode

MODES: tuple[SearchMode, ...] = ("lexical", "semantic", "hybrid")
DEPTHS = (5, 10)  # the recalls reported: R@5 and R@10


class Answer(Record):
    """One thing that answers a question: a fact, or a file (or some of its lines)."""

    label: str  # as the file gave it, for messages
    fact: int | None = None
    path: str | None = None
    lines: tuple[int, int] | None = None

    def found_by(self, hit: Hit) -> bool:
        if self.fact is not None:
            return hit.kind == "fact" and hit.id == self.fact
        if hit.path != self.path:
            return False
        if self.lines is None or hit.lines is None:
            return True
        return hit.lines[0] <= self.lines[1] and self.lines[0] <= hit.lines[1]


class Question(Record):
    text: str
    answers: tuple[Answer, ...]
    line: int  # its line in the file


class ModeScore(Record):
    """How one search mode did over every question."""

    mode: str
    r5: float
    r10: float
    mrr: float
    p50_ms: float
    p95_ms: float
    missed: list[int]  # lines of the questions none of whose answers came back

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


class Evaluation(Record):
    source: str
    questions: int
    limit: int
    scores: list[ModeScore]
    unknown: list[str]  # answers that name nothing in this memory: "line 3: fact 99"
    skipped: list[str]  # modes not run, and why

    def to_dict(self) -> dict[str, object]:
        data = self._asdict()
        data["scores"] = [score.to_dict() for score in self.scores]
        return data


def parse(text: str, source: str) -> list[Question]:
    """The questions of a JSON-lines file; a line that is not one is a clear error naming
    it (nothing is asked of a file that is half wrong). Blank lines are skipped."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{where}: not JSON ({exc.msg})") from None
        question = item.get("question") if isinstance(item, dict) else None
        answers = item.get("answers") if isinstance(item, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise ValidationError(f'{where}: needs "question", the text to search for')
        if not isinstance(answers, list) or not answers:
            raise ValidationError(
                f'{where}: needs "answers", a list of fact ids or paths under the memory root'
            )
        out.append(Question(question, tuple(_answer(a, where) for a in answers), number))
    if not out:
        raise ValidationError(f"{source}: no questions (one JSON object a line)")
    return out


def _answer(value: object, where: str) -> Answer:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return Answer(f"fact {value}", fact=value)
    if isinstance(value, str) and value.strip().isdigit():
        return Answer(f"fact {int(value)}", fact=int(value))
    if isinstance(value, str) and value.strip():
        path, lines = value.strip(), None
        head, colon, span = path.rpartition(":")
        start, dash, end = span.partition("-")
        if colon and start.isdigit() and (not dash or end.isdigit()):
            first = int(start)
            path, lines = head, (first, int(end) if dash else first)
            if first < 1 or lines[1] < first:
                raise ValidationError(f"{where}: bad line range in {value!r}: use START-END")
        path = os.path.normpath(path.removeprefix("./"))
        if os.path.isabs(path) or path.startswith(".."):
            raise ValidationError(f"{where}: {value!r} is not a path under the memory root")
        return Answer(value, path=path, lines=lines)
    raise ValidationError(
        f"{where}: an answer is a fact id or a path under the memory root, not {value!r}"
    )


def run(
    memory: Memory,
    questions: Sequence[Question],
    *,
    source: str,
    modes: Sequence[SearchMode] | None = None,
    limit: int = 10,
    kinds: list[Kind] | None = None,
) -> Evaluation:
    """Ask every question in each mode (default: every mode this install can run) and
    score the answers that came back in the top `limit` (at least 10)."""
    limit = max(limit, max(DEPTHS))
    wanted: list[SearchMode] = list(modes) if modes else list(MODES)
    skipped = []
    scores = []
    for mode in dict.fromkeys(wanted):
        try:
            memory.search(questions[0].text, limit=limit, kinds=kinds, mode=mode, record=False)
        except MemdirError as exc:  # not installed: the other modes still run
            if modes:
                raise
            skipped.append(f"{mode}: {exc}")
            continue
        scores.append(_score_mode(memory, questions, mode, limit, kinds))
    return Evaluation(source, len(questions), limit, scores, _unknown(memory, questions), skipped)


def _score_mode(
    memory: Memory,
    questions: Sequence[Question],
    mode: SearchMode,
    limit: int,
    kinds: list[Kind] | None,
) -> ModeScore:
    recalls = {depth: 0.0 for depth in DEPTHS}
    reciprocal = 0.0
    took: list[float] = []
    missed = []
    for question in questions:
        start = time.perf_counter()
        hits = memory.search(question.text, limit=limit, kinds=kinds, mode=mode, record=False)
        took.append(time.perf_counter() - start)
        ranks = [_first(answer, hits) for answer in question.answers]
        found = [rank for rank in ranks if rank is not None]
        for depth in DEPTHS:
            recalls[depth] += sum(rank < depth for rank in found) / len(ranks)
        if found:
            reciprocal += 1.0 / (min(found) + 1)
        else:
            missed.append(question.line)
    count = len(questions)
    took.sort()
    return ModeScore(
        mode,
        round(recalls[5] / count, 4),
        round(recalls[10] / count, 4),
        round(reciprocal / count, 4),
        round(_percentile(took, 0.5) * 1000, 3),
        round(_percentile(took, 0.95) * 1000, 3),
        missed,
    )


def _first(answer: Answer, hits: list[Hit]) -> int | None:
    """The rank (0 = first) of the first hit that is this answer."""
    return next((rank for rank, hit in enumerate(hits) if answer.found_by(hit)), None)


def _percentile(ordered: list[float], share: float) -> float:
    """Nearest-rank percentile of sorted values."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _unknown(memory: Memory, questions: Sequence[Question]) -> list[str]:
    """The answers that name no fact or file of this memory: such a question can only
    miss, and the user should hear why."""
    out = []
    for question in questions:
        for answer in question.answers:
            if answer.fact is not None:
                try:
                    memory.get_fact(answer.fact)
                    continue
                except NotFoundError:
                    pass
            elif answer.path is not None and os.path.isfile(os.path.join(memory.path, answer.path)):
                continue
            out.append(f"line {question.line}: {answer.label}")
    return out


__all__ = ["Answer", "Evaluation", "ModeScore", "Question", "parse", "run"]
