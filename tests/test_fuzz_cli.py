"""Fuzzing (Z): random command lines never end in a traceback, random config.toml
bytes and random frontmatter text never raise anything but memdir's own errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.cli import LONG_RUNNING, MODULES
from memdir.errors import ConfigError, ValidationError
from memdir.settings import Settings, load_settings
from memdir.storage import frontmatter
from memdir.testing import cli_command, cli_env

ACTIONS = (
    "show",
    "set",
    "append",
    "rm",
    "add",
    "list",
    "get",
    "write",
    "start",
    "end",
    "supersede",
    "history",
    "note",
    "notes",
    "due",
    "mark",
    "done",
    "log",
)
OPTIONS = (
    "--json",
    "--help",
    "-c",
    "--category",
    "--limit",
    "--task",
    "--mode",
    "--kind",
    "--date",
    "--section",
    "--dry-run",
    "--from",
    "--lines",
    "--agent",
    "--session",
    "--parent",
    "--line",
    "-n",
    "--state-dir",
)
VALUES = (
    "learning",
    "decision",
    "1",
    "0",
    "-1",
    "99999999999",
    "task-1",
    "deploy-staging",
    "HOT.md",
    "../../etc/passwd",
    "/etc/passwd",
    "",
    "-",
    "a AND",
    '"',
    "NEAR(",
    "2026-13-45",
    "yesterday",
    "Evolution Log",
    "é",
    "\u2028",
    "x" * 300,
)
# random text, but no surrogates (argv cannot carry them) and no NUL (exec refuses it)
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30)
WORD = st.one_of(st.sampled_from(ACTIONS), st.sampled_from(OPTIONS), st.sampled_from(VALUES), TEXT)
# the servers (serve, ui) run until stopped: a command line that starts one is no error
ARGV = st.tuples(
    st.sampled_from(sorted(set(MODULES) - LONG_RUNNING)), st.lists(WORD, max_size=6)
).map(lambda t: [t[0], *t[1]])


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=st.one_of(ARGV, st.lists(WORD, max_size=4)))
def test_random_command_lines_fail_cleanly(argv: list[str], tmp_path: Path) -> None:  # Z C
    if "--state-dir" in argv:  # keep every run inside its tmp state dir
        argv = [a for a in argv if a != "--state-dir"]
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)  # a named state dir must exist (L1): fuzz the commands
    proc = subprocess.run(
        cli_command(*argv),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=cli_env(str(state)),
        cwd=tmp_path,
    )
    assert "Traceback" not in proc.stderr, (argv, proc.stderr[-2000:])
    assert "internal error" not in proc.stderr + proc.stdout, (argv, proc.stderr[-2000:])
    assert proc.returncode in (0, 1), (argv, proc.returncode, proc.stderr[-2000:])
    if proc.returncode == 1 and "--json" in argv:
        # with --json the error is a JSON object on stdout (doctor's report, for doctor)
        data = json.loads(proc.stdout)
        assert isinstance(data, dict) and ("error" in data or argv[0] == "doctor"), argv
        assert "memdir: error" not in proc.stderr, (argv, proc.stderr)
    elif proc.returncode == 1:
        assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), (argv, proc.stderr)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    b"[memory]\n",
                    b"[search]\n",
                    b"[heartbeat]\n",
                    b"enabled = ",
                    b"hot_cap_chars = ",
                    b"max_entry_bytes = ",
                    b"true\n",
                    b"1\n",
                    b"-5\n",
                    b'"x"\n',
                    b"1e400\n",
                    b"[\n",
                    b"= \n",
                    b"path = ",
                    b"\xff\xfe",
                    b"# c\n",
                ]
            ),
            max_size=12,
        ).map(b"".join),
    )
)
def test_any_config_bytes_load_or_raise_config_error(data: bytes, tmp_path: Path) -> None:  # S Z
    path = tmp_path / "config.toml"
    path.write_bytes(data)
    try:
        result = load_settings(str(path))
    except ConfigError:
        return
    assert isinstance(result, Settings)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=200),
        st.lists(
            st.sampled_from(
                [
                    "---\n",
                    "name: x\n",
                    "description: ",
                    "a: [\n",
                    ": :\n",
                    "\n",
                    "- item\n",
                    "key: 'unterminated\n",
                    "!!python/object:os.system\n",
                    "---",
                    "\ufeff",
                    "created: 2026-01-01\n",
                ]
            ),
            max_size=10,
        ).map("".join),
    )
)
def test_any_frontmatter_text_parses_or_raises_validation_error(text: str) -> None:  # G1 Z
    try:
        meta, body = frontmatter.parse(text, "global/fuzz.md")
    except ValidationError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(meta, dict) and isinstance(body, str)
