"""The benchmark scripts run end to end at a tiny size and write the JSON they promise.
No timing is checked here: figures come from `make bench`, not from tests."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir.storage.embeddings import available as embeddings_available

pytestmark = pytest.mark.slow  # bench scripts run end to end

BENCH = Path(__file__).resolve().parent.parent / "bench"
MODES = ("lexical", "semantic", "hybrid")
TINY = {
    "search_cli": ["--facts", "500", "--runs", "2"],
    "search_inprocess": ["--sizes", "300,500", "--runs", "2"],
    "search_bounded": ["--sizes", "500", "--questions", "5", "--runs", "1"],
    "insert": ["--facts", "600", "--rounds", "2", "--single", "5", "--single-base", "100"],
    "recall": [
        "--entries",
        "30",
        "--notes",
        "15",
        "--runs",
        "2",
        "--edits",
        "2",
        "--touches",
        "1",
        "--profile",
    ],
    "ingest": [
        "--mb",
        "0.05",
        "--blocks",
        "10",
        "--scales",
        "1,2",
        "--runs",
        "2",
        "--rounds",
        "1",
        "--store-entries",
        "30",
        "--profile",
    ],
    "boot": ["--days", "3", "--entries", "20", "--runs", "2", "--profile", "--profile-runs", "1"],
    "hooks": ["--days", "3", "--entries", "20", "--runs", "2"],
    "uprompt": ["--facts", "500", "--runs", "2", "--inprocess-runs", "3"],
    "worker": [
        "--facts",
        "300",
        "--runs",
        "2",
        "--cold-runs",
        "1",
        "--chunks",
        "16",
        "--model-runs",
        "1",
    ],
    "search_scale": [
        "--facts",
        "300",
        "--chunks",
        "60",
        "--index-chunks",
        "30",
        "--runs",
        "2",
        "--hybrid-runs",
        "2",
        "--cli-runs",
        "1",
        "--profile",
        "always",
    ],
    "scale": [
        "--facts",
        "200,400",
        "--chunks",
        "30",
        "--runs",
        "1",
        "--mcp-runs",
        "1",
        "--pool",
        "16",
    ],
    "hybrid_sessions": [
        "--facts",
        "400",
        "--chunks",
        "30",
        "--runs",
        "2",
        "--pool",
        "16",
        "--profile",
        "--profile-calls",
        "2",
    ],
    "ui": ["--facts", "300", "--starts", "1", "--runs", "2"],
    "doctor": [
        "--facts",
        "300",
        "--entries",
        "5",
        "--notes",
        "5",
        "--procedures",
        "2",
        "--runs",
        "1",
        "--no-vectors",
    ],
    "duplicates": ["--facts", "300", "--exact", "20", "--near", "40", "--distinct", "20"],
    "first_search": ["--facts", "60", "--runs", "1"],
    "models": ["--facts", "40", "--runs", "2"],
    "cold": [
        "--facts",
        "500",
        "--entries",
        "30",
        "--notes",
        "15",
        "--boot-entries",
        "20",
        "--days",
        "3",
        "--runs",
        "2",
        "--profile",
        "--profile-runs",
        "1",
    ],
    "team_import": ["--days", "5", "--runs", "1"],
}
SUMMARY_KEYS = {
    "team_import": {"openclaw_p50_s", "archive_p50_s", "prune_p50_s", "times", "ok"},
    "worker": {"search_ratio", "update_ratio", "chunks_per_s", "worker_rss_mib", "ok"},
    "search_cli": {"target_ratio", "worst_ratio", "median_ratio", "memdir_ms", "bare_ms", "ok"},
    "search_inprocess": {"target_ratio_p95", "worst_ratio_p95", "by_size", "ok"},
    "search_bounded": {"target_p95_ms", "bounded_p95_ms", "mean_overlap", "identical_share", "ok"},
    "insert": {"target_ratio", "memdir_per_s", "raw_per_s", "ratio", "single", "ok"},
    "recall": {
        "target_p95_ms",
        "reused_p95_ms",
        "fresh_p95_ms",
        "raw_p50_ms",
        "ratio_p50",
        "output",
        "build",
        "phases",
        "ok",
    },
    "ingest": {
        "parse_p50_ms",
        "regex_p50_ms",
        "parse_ratio",
        "parse_mb_per_s",
        "ingest_p50_ms",
        "ingest_ms_per_block",
        "ingest_store_p50_ms",
        "growth",
        "ok",
    },
    "boot": {
        "boot_p50_ms",
        "boot_p95_ms",
        "subagent_p50_ms",
        "json_p50_ms",
        "bare_p50_ms",
        "ratio_p50",
        "split_p50_ms",
        "chars",
        "tokens",
        "parts",
        "build",
        "imports",
        "ok",
    },
    "hooks": {
        "session_start_p50_ms",
        "session_start_p95_ms",
        "session_start_ratio_p50",
        "session_start_known_p50_ms",
        "subagent_start_p50_ms",
        "pre_tool_use_p50_ms",
        "bare_p50_ms",
        "sessions_recorded",
        "ok",
    },
    "uprompt": {
        "hook_p50_ms",
        "hook_p95_ms",
        "hook_ratio_p50",
        "inprocess_p50_ms",
        "inprocess_p95_ms",
        "inprocess_ratio_p95",
        "off_p50_ms",
        "calls_over_budget",
        "ok",
    },
    "search_scale": {
        "targets",
        "met",
        "index_chunks_per_s",
        "lexical_worst_ratio_p95",
        "lexical_no_sync_worst_ratio_p95",
        "sync_p50_ms",
        "hybrid_worst_p95_ms",
        "semantic_worst_p95_ms",
        "matmul_p50_ms",
        "cli_hybrid_p50_ms",
        "cli_lexical_p50_ms",
        "ok",
    },
    "scale": {"stores", "curve", "vectors", "ok"},
    "hybrid_sessions": {
        "before",
        "after",
        "hybrid_ratio_p95",
        "lexical_ratio_p95",
        "store",
        "ok",
    },
    "doctor": {"facts", "cli_p50_ms", "inprocess_fresh_p50_ms", "findings", "ok"},
    "ui": {"ready_p50_ms", "first_page_p50_ms", "ready_target_ms", "ok"},
    "duplicates": {"facts", "precision", "recall", "add_fact_ms", "raw_insert_ms", "ok"},
    "first_search": {
        "facts",
        "import_ms",
        "first_search_ms",
        "cli_default_over_lexical",
        "stable",
        "ok",
    },
    "models": {"facts", "models", "by_model", "ok"},
    "cold": {
        "targets",
        "search_worst_ratio_p50",
        "recall_ratio_p50",
        "boot_ratio_p50",
        "session_start_ratio_p50",
        "p50_ms",
        "split_p50_ms",
        "ok",
    },
}
ROW_KEYS = {
    "team_import": {"writer", "files", "p50_s", "per_file_ms"},
    "worker": {"table"},
    "search_cli": {"query", "matches", "memdir_ms", "bare_ms", "ratio"},
    "search_inprocess": {
        "facts",
        "query",
        "memdir_p50_ms",
        "memdir_p95_ms",
        "raw_p50_ms",
        "raw_p95_ms",
        "ratio_p95",
    },
    "insert": {"round", "memdir_per_s", "raw_per_s", "ratio", "settled_s"},
    "recall": {
        "case",
        "calls",
        "memdir_p50_ms",
        "memdir_p95_ms",
        "raw_p50_ms",
        "raw_p95_ms",
        "ratio_p50",
    },
    "ingest": {
        "kind",
        "case",
        "mb",
        "blocks",
        "memdir_p50_ms",
        "baseline_p50_ms",
        "ratio_p50",
        "mb_per_s",
        "us_per_block",
    },
    "boot": {"side", "calls", "p50_ms", "p95_ms", "floor", "ratio_p50", "chars", "tokens"},
    "hooks": {"side", "calls", "p50_ms", "p95_ms", "floor", "ratio_p50", "ratio_p95"},
    "uprompt": {"prompt", "words", "hits", "hook_p50_ms", "bare_p50_ms", "run_p50_ms"},
    "search_scale": {"table"},
    "search_bounded": {"facts"},
    "scale": {"table", "facts"},
    "hybrid_sessions": {"table", "side", "commit"},
    "doctor": {"side", "calls", "p50_ms", "p95_ms"},
    "ui": {"side", "calls", "p50_ms", "p95_ms", "floor", "ratio_p50"},
    "duplicates": {"kind", "probes", "should_report", "caught", "missed", "false_reports"},
    "first_search": set(),  # two tables: imports and searches
    "models": {"model", "id", "load_s", "texts_per_s", "question_p50_ms", "reindex_per_s"},
    "cold": {"side", "calls", "p50_ms", "p95_ms", "floor", "ratio_p50", "target", "ok"},
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store cache for the module: the scripts share the stores they build."""
    return tmp_path_factory.mktemp("bench-cache")


def run_bench(script: str, args: list[str], out: Path, cache: Path, result: str = "") -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / f"{script}.py"),
            *args,
            "--out-dir",
            str(out),
            "--cache-dir",
            str(cache),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "|" in proc.stdout  # a table was printed
    return json.loads((out / f"{result or script}.json").read_text())


def finite_numbers(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_numbers(v) for v in value)
    return True


@pytest.mark.parametrize("script", sorted(TINY))
def test_script_writes_its_json(script: str, tmp_path: Path, cache_dir: Path) -> None:
    if (
        script in ("search_scale", "worker", "scale", "models", "hybrid_sessions")
        and not embeddings_available()
    ):
        pytest.skip(f"{script} needs the embeddings extra")
    data = run_bench(script, TINY[script], tmp_path, cache_dir)
    assert {"name", "params", "env", "rows", "summary"} <= set(data)
    assert data["name"] == script
    assert SUMMARY_KEYS[script] <= set(data["summary"])
    assert isinstance(data["summary"]["ok"], bool)
    assert data["rows"]
    for row in data["rows"]:
        assert ROW_KEYS[script] <= set(row)
    assert finite_numbers(data)


def test_recall_and_ingest_report_what_they_measured(tmp_path: Path, cache_dir: Path) -> None:
    recall = run_bench("recall", TINY["recall"], tmp_path, cache_dir)
    output = recall["summary"]["output"]
    assert output["entries_total"] == 30 and output["notes_total"] == 15
    assert 0 < output["entries_shown"] <= 30 and 0 < output["notes_shown"] <= 15
    assert output["chars"] - output["hot_chars"] <= output["budget"] + 2
    assert recall["summary"]["stale_after_copy"] == 0  # the copied store's cache holds
    ingest = run_bench("ingest", TINY["ingest"], tmp_path, cache_dir)
    assert [r["kind"] for r in ingest["rows"]] == ["scan", "scan", "ingest", "ingest"]
    assert ingest["summary"]["globals"] + ingest["summary"]["notes"] == 10


def test_boot_reports_what_it_showed(tmp_path: Path, cache_dir: Path) -> None:
    boot = run_bench("boot", TINY["boot"], tmp_path, cache_dir)
    summary = boot["summary"]
    parts = summary["parts"]
    assert [p["part"] for p in parts[:3]] + [p["part"] for p in parts[-1:]] == [
        "HOT.md",
        "SOUL.md",
        "USER.md",
        "MEMORY.md",
    ]
    assert [p["file"].startswith("memory/daily/") for p in parts] == [False] * 3 + [True] * 2 + [
        False
    ]
    assert summary["chars"] == sum(p["chars"] for p in parts)
    assert summary["subagent_chars"] == summary["chars"] - parts[-1]["chars"]
    assert summary["daily_files"] == 3 and summary["stale_after_copy"] == 0
    assert {r["side"] for r in boot["rows"]} >= {"boot", "boot --subagent", "boot --json", "bare"}


def test_hooks_checked_every_reply_and_recorded_every_session(
    tmp_path: Path, cache_dir: Path
) -> None:
    """K2, U1, U2: each new-session SessionStart call (warm-up included) left its session
    in the store; the contexts are what the hooks injected, within the start budget."""
    hooks = run_bench("hooks", TINY["hooks"], tmp_path, cache_dir)
    summary = hooks["summary"]
    assert summary["sessions_recorded"] == 2 + hooks["params"]["runs"]
    assert summary["daily_files"] == 3 and summary["stale_after_copy"] == 0
    assert 0 < summary["subagent_start_context_chars"] < summary["session_start_context_chars"]
    assert summary["session_start_context_chars"] <= 9000 < summary["bare_chars"]
    assert {r["side"] for r in hooks["rows"]} >= {
        "SessionStart, new session",
        "SessionStart, known session",
        "SubagentStart",
        "PreToolUse, subagent write",
        "bare",
    }


def test_uprompt_checked_every_reply_against_the_raw_query(tmp_path: Path, cache_dir: Path) -> None:
    """K2: every prompt's reply was checked against the raw FTS5 query before timing (the
    script exits otherwise): the hits it injected, within the budget, none for chatter."""
    data = run_bench("uprompt", TINY["uprompt"], tmp_path, cache_dir)
    by = {r["prompt"]: r for r in data["rows"]}
    assert set(by) == {"short", "question", "paragraph", "pasted 50 KB", "chatter"}
    assert by["chatter"]["words"] == 0 and by["chatter"]["hits"] == 0
    assert by["question"]["hits"] > 0 and by["pasted 50 KB"]["words"] == 24
    budget = data["summary"]["prompt_budget_chars"]
    assert all(r["injected_chars"] <= budget for r in data["rows"])
    assert data["summary"]["calls"] == 5 * data["params"]["runs"]


@pytest.mark.skipif(not embeddings_available(), reason="scale needs the embeddings extra")
def test_scale_reports_each_store_with_a_server_measured(tmp_path: Path, cache_dir: Path) -> None:
    """Q2, A2: the cross grid (each fact count at the middle chunk count, each chunk count at
    the middle fact count), every item given a vector through the store, all three modes
    timed for both kinds of query, and a real `memdir serve` process found and measured."""
    data = run_bench("scale", TINY["scale"], tmp_path, cache_dir)
    details = [r for r in data["rows"] if r["table"] == "detail"]
    assert [(d["facts"], d["chunks_planned"]) for d in details] == [(200, 30), (400, 30)]
    for detail in details:
        assert detail["vectors"] == detail["facts"] + detail["chunks"] > detail["facts"]
        assert detail["unembedded"] == 0 and detail["db_bytes"] > 0
        assert 0 < detail["rss_started"] <= detail["hwm"]
        assert all(0 < detail[f"rss_after_{mode}"] <= detail["hwm"] for mode in MODES)
    curve = [r for r in data["rows"] if r["table"] == "curve"]
    assert [(r["facts"], r["queries"]) for r in curve] == [
        (f, kind) for f in (200, 400) for kind in ("questions", "keywords")
    ]
    for row in curve:
        assert all(0 < row[f"{mode}_p50_ms"] <= row[f"{mode}_p95_ms"] for mode in MODES)
    assert data["summary"]["ok"] is True


def test_hybrid_sessions_measures_each_side_on_its_own_store(
    tmp_path: Path, cache_dir: Path
) -> None:
    """Q3: the same facts written in sessions and the same markdown, each side's store built
    by its own code (the before side has no search groups, the after side ranks in
    context), every item given a vector, both modes timed on both sides, ratio after/before."""
    data = run_bench("hybrid_sessions", TINY["hybrid_sessions"], tmp_path, cache_dir)
    stores = {r["side"]: r for r in data["rows"] if r["table"] == "store"}
    before, after = stores["before"], stores["after"]
    for key in ("facts", "sessions", "chunks", "vectors"):
        assert before[key] == after[key] > 0
    assert 400 / 50 <= after["sessions"] <= 400 / 20 + 1
    assert after["vectors"] == after["facts"] + after["chunks"] and after["unembedded"] == 0
    assert before["groups"] == 0 and not before["has_groups"]
    assert after["groups"] > 0 and after["has_groups"]
    assert before["commit"] != after["commit"]
    latency = [r for r in data["rows"] if r["table"] == "latency"]
    assert [(r["mode"], r["side"]) for r in latency] == [
        (mode, side) for mode in ("hybrid", "lexical") for side in ("before", "after")
    ]
    for row in latency:
        assert row["calls"] == 2 * 6 and 0 < row["p50_ms"] <= row["p95_ms"]
    ratio = data["summary"]["hybrid_ratio_p95"]
    after_row = latency[1]
    assert math.isclose(ratio, after_row["p95_ms"] / latency[0]["p95_ms"])
    assert data["summary"]["ok"] is True


def test_run_all_quick_writes_a_summary(tmp_path: Path, cache_dir: Path) -> None:
    scripts = ["search_inprocess", "insert", "recall", "ingest", "boot", "hooks", "uprompt"]
    data = run_bench(
        "run_all", ["--quick", "--only", ",".join(scripts)], tmp_path, cache_dir, result="summary"
    )
    assert data["summary"]["failed"] == []
    assert set(data["summary"]["scripts"]) == set(scripts)
    for headline in data["summary"]["headlines"]:
        assert {"bench", "figure", "value", "target", "ok"} <= set(headline)
    assert {h["bench"] for h in data["summary"]["headlines"]} == set(scripts)
    for script in scripts:
        assert (tmp_path / f"{script}.json").exists()


def test_corpus_is_deterministic_and_realistic() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import common
    finally:
        sys.path.remove(str(BENCH))
    facts = common.make_facts(200, seed=7)
    assert facts == common.make_facts(200, seed=7)
    assert facts != common.make_facts(200, seed=8)
    assert {category for _, category in facts} == set(common.CATEGORIES)
    lengths = [len(content) for content, _ in facts]
    assert 150 <= sum(lengths) / len(lengths) <= 260
    assert len(common.vocabulary()) >= 2000
