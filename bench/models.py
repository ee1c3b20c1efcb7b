"""The embedding models (Q2), side by side in one run: each provider this install can
load, its load time, its throughput on the shipped calibration set (209 one-line
memories), a question's embedding (what a semantic search adds), and a re-embed after a
change of model (`Memory.reindex` from another model's vectors, with the old ones dropped)
at --facts facts, with the calibration it has (shipped for the bundled model; measured
once, within that re-embed, for a configured one).

The OpenAI-compatible endpoint is measured against memdir.testing's stand-in on loopback,
whose vectors cost next to nothing to make: its figures are memdir's client (JSON, HTTP,
batches of 64) and no model's. fastembed and sentence-transformers are measured when their
extra is installed and a local model is given (--fastembed-path, a folder of ONNX files;
--st-model, a name or folder), since the Hugging Face hub may not be reachable. The sides
take turns in each run (rotated), so machine load hits them alike.

    python bench/models.py [--facts 2000] [--runs 20]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any

import common
from memdir import Memory
from memdir.search import calibration
from memdir.storage import embedders, embeddings
from memdir.testing import EmbeddingsStandIn

NAME = "models"
QUESTIONS = (
    "which database did we pick for billing?",
    "feline pet",
    "where does the deploy script live",
    "what time does the standup start",
)


def config(choice: embedders.Choice) -> str:
    lines = ["[search]", "worker_idle = 0", "[embeddings]", f'provider = "{choice.provider}"']
    if choice.provider != "bundled":
        lines.append(f'model = "{choice.model_name}"')
    if choice.provider == "openai":
        lines.append(f'url = "{choice.url}"')
    if choice.path:
        lines.append(f'path = "{choice.path}"')
    return "\n".join(lines) + "\n"


def sides(args: Any, standin: EmbeddingsStandIn) -> list[tuple[str, embedders.Choice]]:
    found = []
    if embeddings.available():
        found.append(("bundled MiniLM int8", embedders.BUNDLED))
    found.append(
        (
            "endpoint (loopback stand-in)",
            embedders.Choice(provider="openai", model="bench-embed", url=standin.url),
        )
    )
    if args.fastembed_path:
        choice = embedders.Choice(
            provider="fastembed", model=args.fastembed_model, path=args.fastembed_path
        )
        if embedders.available(choice):
            found.append((f"fastembed {args.fastembed_model}", choice))
    if args.st_model:
        choice = embedders.Choice(provider="sentence-transformers", model=args.st_model)
        if embedders.available(choice):
            found.append(("sentence-transformers", choice))
    return found


def build(folder: str, facts: list[tuple[str, str]], choice: embedders.Choice) -> str:
    """A store of `facts` with vectors of `choice` (the model changed from)."""
    state = os.path.join(folder, "state")
    os.makedirs(state)
    with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
        handle.write(config(choice))
    with Memory(state) as memory:
        with memory.bulk():
            memory.add_facts(facts)
        memory.embed_pending()
    return state


def main() -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--facts", type=int, default=2000, help="facts re-embedded after a change")
    p.add_argument("--runs", type=int, default=20, help="timed runs of each measure")
    p.add_argument("--fastembed-path", default="", help="a folder holding a fastembed model")
    p.add_argument("--fastembed-model", default="sentence-transformers/all-MiniLM-L6-v2")
    p.add_argument("--st-model", default="", help="a sentence-transformers model name or folder")
    args = p.parse_args()
    data = os.path.join(os.path.dirname(embeddings.__file__), "..", "data", "calibration.txt")
    with open(data, encoding="utf-8") as handle:
        texts = [line.strip() for line in handle if line.strip()]
    facts = common.make_facts(args.facts, args.seed)
    rows: list[dict[str, Any]] = []
    with EmbeddingsStandIn() as standin, tempfile.TemporaryDirectory() as tmp:
        found = sides(args, standin)
        models: dict[str, Any] = {}
        for label, choice in found:
            took, models[label] = common.timed(embedders.load, choice)
            rows.append({"model": label, "id": embedders.model_id(choice), "load_s": took})
        throughput: dict[str, list[float]] = {label: [] for label, _ in found}
        question: dict[str, list[float]] = {label: [] for label, _ in found}
        for run in range(args.runs):
            for label, _ in common.rotate(run, found):
                model = models[label]
                if run < max(2, args.runs // 4):  # the whole set: fewer runs, each is long
                    took, _ = common.timed(model.embed, texts)
                    throughput[label].append(len(texts) / took)
                took, _ = common.timed(model.embed, [QUESTIONS[run % len(QUESTIONS)]])
                question[label].append(took)
        # a change of model: from the endpoint's vectors (another model id) to each side's
        before = embedders.Choice(provider="openai", model="bench-before", url=standin.url)
        base = build(os.path.join(tmp, "base"), facts, before)
        for row, (label, choice) in zip(rows, found, strict=True):
            copy = os.path.join(tmp, f"copy-{len(os.listdir(tmp))}")
            shutil.copytree(os.path.dirname(base), copy)
            state = os.path.join(copy, "state")
            with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
                handle.write(config(choice))
            with Memory(state) as memory:
                started = time.perf_counter()
                done = memory.reindex()
                took = time.perf_counter() - started
                left = memory.store.vector_models()
                mean, p99 = calibration(memory.model_id(), memory.store)
            if done.embedded != args.facts or left != {memory.model_id(): args.facts}:
                print(f"{NAME}: {label}: reindex left {left}", file=sys.stderr)
                return 1
            stats = common.stats_ms(question[label])
            row.update(
                texts_per_s=common.median(throughput[label]),
                question_p50_ms=stats["p50"],
                question_p95_ms=stats["p95"],
                reindex_s=took,
                reindex_per_s=args.facts / took,
                dropped=done.dropped,
                mean=mean,
                p99=p99,
            )
    common.print_table(
        f"Embedding models: load, throughput, a question, a re-embed of {args.facts:,} facts",
        [
            ("model", "model", ""),
            ("load_s", "load s", ".2f"),
            ("texts_per_s", "texts/s", ",.0f"),
            ("question_p50_ms", "question p50 ms", ".2f"),
            ("question_p95_ms", "question p95 ms", ".2f"),
            ("reindex_s", "reindex s", ".2f"),
            ("reindex_per_s", "reindex items/s", ",.0f"),
            ("mean", "μ0", ".3f"),
            ("p99", "p99", ".3f"),
        ],
        rows,
    )
    summary = {
        "facts": args.facts,
        "models": [row["id"] for row in rows],
        "by_model": {row["id"]: row for row in rows},
        "ok": all(row["dropped"] == args.facts for row in rows),
    }
    common.write_result(NAME, args.out_dir, vars(args), rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
