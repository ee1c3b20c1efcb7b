"""The stress harness at a small size (L3, X, Z): several writer processes on
every write path with readers beside them; nothing acknowledged is lost. The big run is
`make bench` (bench/stress.py, 8 writers x 20 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
WRITERS = 3
OPS = 40  # writes each: a count, not a time, so no machine's load changes what is checked


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
@pytest.mark.sqlite_only  # bench/stress.py checks memory.db itself (its rows, integrity_check)
def test_small_stress_run_loses_nothing(tmp_path: Path) -> None:  # L3, H4, F1, G3, T1, E1
    """Every write of every writer is acknowledged and found afterwards exactly once (or
    marked superseded / removed as acknowledged), none failed, and the store is whole."""
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH / "stress.py"),
            "--procs",
            str(WRITERS),
            "--ops",
            str(OPS),
            "--readers",
            "1",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = json.loads((tmp_path / "stress.json").read_text())["summary"]
    assert summary["errors"] == 0 and summary["crashed"] == []
    assert summary["writes"] == WRITERS * OPS  # every write made was acknowledged
    assert summary["lost"] == 0 and summary["acknowledged"] > 0
    assert summary["integrity_check"] == "ok" and summary["temp_files_left"] == 0
    assert summary["index_matches_files"] and summary["evolution_log_last"]
