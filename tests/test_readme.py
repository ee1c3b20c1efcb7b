"""Every shell and Python block of README.md runs as written (STYLE 13: docs that cannot
drift). A new user follows the README top to bottom in an empty folder: so does this test,
with one store for all the blocks, a fresh HOME and no MEMDIR_* variables. The first block
(`make run`, `make test`) is the set-up this suite itself runs under: it is checked with
`make -n` instead of being run again inside itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [body for lang, body in FENCE.findall(text) if lang == language]


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of someone who has just installed memdir: its commands on PATH (this
    interpreter's bin folder, and the Claude Code CLI `make test` installs), a home of their
    own, an empty project folder, nothing of memdir's set."""
    base = tmp_path_factory.mktemp("readme")
    (base / "home").mkdir()
    (base / "project").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["HOME"] = str(base / "home")
    # the Claude Code CLI keeps its settings (the servers `claude mcp add` adds) under
    # CLAUDE_CONFIG_DIR when set, else in HOME: a value inherited from the developer's
    # shell would have this test write into their real config, shared by parallel runs
    env["CLAUDE_CONFIG_DIR"] = str(base / "home" / ".claude")
    env.pop("XDG_CONFIG_HOME", None)
    env["CWD"] = str(base / "project")
    return env


def run_block(language: str, body: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if language == "sh":
        argv = ["bash", "-euo", "pipefail", "-c", body]
    else:
        argv = [sys.executable, "-c", body]
    return subprocess.run(
        argv, cwd=env["CWD"], env=env, capture_output=True, text=True, timeout=240
    )


def test_readme_first_block_is_the_two_make_commands() -> None:
    first = blocks("sh")[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["make run", "make test"]
    for target in ("run", "test"):
        dry = subprocess.run(
            ["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True
        )
        assert dry.returncode == 0, dry.stderr


@pytest.mark.slow
def test_readme_blocks_run_as_written(reader: dict[str, str]) -> None:
    """L1, E3, F1-F5, M1, R1, A1: each block after the first, in order, exits 0."""
    if shutil.which("claude", path=reader["PATH"]) is None:
        pytest.fail("the Claude Code CLI is not on PATH: run the suite with `make test`")
    found = FENCE.findall((ROOT / "README.md").read_text())
    ran = 0
    for index, (language, body) in enumerate(found):
        if language not in ("sh", "python") or index == 0:  # block 0: the make commands
            continue
        result = run_block(language, body, reader)
        assert result.returncode == 0, (
            f"README block {index} ({language}) failed:\n{body}\n--- stdout\n{result.stdout}"
            f"\n--- stderr\n{result.stderr}"
        )
        assert "Traceback" not in result.stderr, result.stderr
        ran += 1
    assert ran >= 5
    # what the README says each step shows, it shows: the --as-of search finds the old fact
    as_of = subprocess.run(
        ["memdir", "search", "when are releases cut?", "--as-of", "2026-01-01", "--json"],
        cwd=reader["CWD"],
        env=reader,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert [h["content"] for h in json.loads(as_of.stdout)] == [
        "Releases are cut from main every second Tuesday"
    ]
    # the server the README told Claude Code to start is one it reaches
    check = subprocess.run(
        ["claude", "mcp", "get", "memdir"],
        cwd=reader["CWD"],
        env=reader,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Connected" in check.stdout, check.stdout + check.stderr


def test_readme_mcp_client_config_names_a_working_server(reader: dict[str, str]) -> None:
    """A1: the Claude Desktop config in the README starts memdir's MCP server."""
    (config,) = [json.loads(body) for body in blocks("json") if "mcpServers" in body]
    server = config["mcpServers"]["memdir"]
    assert shutil.which(server["command"], path=reader["PATH"]) is not None
    assert server["args"][0] == "serve"


def test_readme_settings_block_is_what_memdir_reads(tmp_path: Path) -> None:
    """S (settings): each key of the README's config.toml is one memdir knows, at its default."""
    from memdir.paths import resolve_memory_dir
    from memdir.settings import load_settings

    (block,) = [body for body in blocks("toml") if "[memory]" in body]
    tomllib.loads(block)
    (tmp_path / "config.toml").write_text(block)
    default = tmp_path / "default.toml"
    default.write_text("")
    shown, plain = load_settings(str(tmp_path / "config.toml")), load_settings(str(default))
    # `path = "memory"` spells out the default memory root
    here = str(tmp_path)
    assert resolve_memory_dir(here, shown.path, {}, here) == resolve_memory_dir(
        here, plain.path, {}, here
    )
    assert shown._replace(path=None) == plain
