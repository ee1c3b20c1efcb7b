"""`memdir hook EVENT --host codex` (K2, K3) on the payloads Codex 0.171.0 sends
(tests/host_payloads/codex-0.171.0/, recorded from `codex exec`): Codex's hook input and
replies have Claude Code's shape, so the same handlers answer, and the sessions are
recorded as Codex's (surface codex). Each runs as a real process, as Codex runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from memdir import Memory, hooks
from memdir.testing import cli_command, cli_env

PAYLOADS = Path(__file__).parent / "host_payloads" / "codex-0.171.0"
THREAD = "01a23315-02af-7360-8ab5-051885880b0e"  # Codex's session (thread) id in them


def hook(state_dir: Path, event: str, *args: str) -> subprocess.CompletedProcess[str]:
    stdin = (PAYLOADS / f"{event}.json").read_text()
    return subprocess.run(
        cli_command("hook", event.split("-")[0], *args),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(str(state_dir)),
    )


def test_session_start_injects_the_boot_context_and_records_a_codex_session(  # K2, E3, U1
    state_dir: Path,
) -> None:
    with Memory() as memory:
        memory.hot_set("Deploys go through `make ship`, never by hand.\n")
    done = hook(state_dir, "SessionStart-startup", "--host", "codex")
    assert (done.returncode, done.stderr) == (0, "")
    answer: dict[str, Any] = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "SessionStart"
    assert answer["additionalContext"].startswith("# memdir: memory from earlier sessions")
    assert "Deploys go through `make ship`" in answer["additionalContext"]
    with Memory() as memory:
        session = memory.store.get_session(THREAD)
    assert session is not None
    assert (session.surface, session.parent_id, session.ended) == ("codex", None, None)


def test_session_end_records_the_codex_session_ended(state_dir: Path) -> None:  # U3, K3
    assert hook(state_dir, "SessionStart-startup", "--host", "codex").returncode == 0
    done = hook(state_dir, "SessionEnd", "--host", "codex")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    with Memory() as memory:
        session = memory.store.get_session(THREAD)
    assert session is not None and session.surface == "codex" and session.ended is not None


def test_without_host_the_session_is_claude_codes(state_dir: Path) -> None:  # K3
    """--host defaults to claude-code: hooks written before Codex was wired are unchanged."""
    assert hook(state_dir, "SessionEnd").returncode == 0
    with Memory() as memory:
        session = memory.store.get_session(THREAD)
    assert session is not None and session.surface == "claude-code"


def test_subagent_start_records_the_subagent_and_gives_the_read_only_slice(  # U2, K2
    state_dir: Path,
) -> None:
    with Memory() as memory:
        memory.hot_set("Deploys go through `make ship`, never by hand.\n")
    done = hook(state_dir, "SubagentStart", "--host", "codex")
    assert (done.returncode, done.stderr) == (0, "")
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Deploys go through" in context and context.endswith(hooks.READ_ONLY_LINE)
    data = json.loads((PAYLOADS / "SubagentStart.json").read_text())
    with Memory() as memory:
        child = memory.store.get_session(data["agent_id"])
    assert child is not None
    assert (child.surface, child.parent_id) == ("codex", data["session_id"])


def test_pre_tool_use_denies_a_subagents_write_and_lets_the_main_session_through(  # U2
    state_dir: Path,
) -> None:
    done = hook(state_dir, "PreToolUse-subagent-memory_update", "--host", "codex")
    assert (done.returncode, done.stderr) == (0, "")
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "memory_update was not run" in answer["permissionDecisionReason"]
    main = json.loads((PAYLOADS / "PreToolUse-subagent-memory_update.json").read_text())
    del main["agent_id"], main["agent_type"]  # the same call in the main session
    proc = subprocess.run(
        cli_command("hook", "PreToolUse", "--host", "codex"),
        input=json.dumps(main),
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(str(state_dir)),
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
