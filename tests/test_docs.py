"""Docs generated from the code stay in step with it (STYLE 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("\n")[:6]
    assert any(line.startswith("make run") for line in head)
    assert any(line.startswith("make test") for line in head)
