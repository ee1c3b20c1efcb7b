"""The command line (C): --json everywhere, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memdir.cli import build_parser
from memdir.memory import Memory

COMMANDS = [
    ["init"],
    ["path"],
    ["hot", "show"],
    ["hot", "set"],
    ["hot", "append"],
    ["hot", "rm"],
    ["fact", "add"],
    ["fact", "supersede"],
    ["fact", "rm"],
    ["fact", "show"],
    ["fact", "history"],
    ["search"],
    ["procedure", "write"],
    ["procedure", "show"],
    ["procedure", "list"],
    ["session", "start"],
    ["session", "end"],
    ["sessions"],
    ["serve"],
    ["list"],
    ["show"],
    ["rm"],
    ["reindex"],
    ["prune"],
    ["memorize"],
    ["recall"],
    ["task", "start"],
    ["task", "end"],
    ["task", "show"],
    ["daily", "append"],
    ["daily", "show"],
    ["boot"],
    ["get"],
    ["heartbeat", "due"],
    ["heartbeat", "status"],
    ["heartbeat", "mark"],
    ["distill"],
    ["stats"],
    ["doctor"],
    ["export"],
    ["import"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_and_the_common_options(command: list[str]) -> None:  # C
    parser = build_parser()
    for option in ("--json", "--state-dir", "--session"):
        args = parser.parse_args(
            [*command, *_required_args(command), option, *([] if option == "--json" else ["x"])]
        )
        assert args.handler is not None
    result = subprocess.run(
        [sys.executable, "-m", "memdir", *command, "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "--json" in result.stdout and "--state-dir" in result.stdout


def _required_args(command: list[str]) -> list[str]:
    return {
        ("hot", "append"): ["t"],
        ("fact", "add"): ["t", "-c", "learning"],
        ("fact", "supersede"): ["1", "t"],
        ("fact", "rm"): ["1"],
        ("fact", "show"): ["1"],
        ("fact", "history"): ["1"],
        ("search",): ["q"],
        ("procedure", "write"): ["n"],
        ("procedure", "show"): ["n"],
        ("session", "end"): ["s"],
        ("show",): ["n"],
        ("rm",): ["n"],
        ("task", "start"): ["t"],
        ("task", "end"): ["t"],
        ("task", "show"): ["t"],
        ("daily", "append"): ["x"],
        ("get",): ["p"],
        ("heartbeat", "mark"): ["email"],
        ("import",): ["backup.jsonl"],
    }.get(tuple(command), [])


def test_fact_lifecycle_through_the_cli(run) -> None:  # F3, C
    added = run("fact", "add", "Tabs, not spaces", "-c", "preference", "--json").json()
    assert added["id"] == 1 and added["category"] == "preference"
    newer = run("fact", "supersede", "1", "Four spaces", "--json").json()
    assert newer["supersedes"] == 1
    history = run("fact", "history", "1", "--json").json()
    assert [f["status"] for f in history] == ["superseded", "active"]
    assert "superseded by #2" in run("fact", "history", "2").out
    assert run("fact", "rm", "2").out.strip() == "fact 2 removed"
    assert run("search", "spaces", "--json").json() == []


def test_search_json_hits_have_the_documented_fields(run) -> None:  # C, Q1
    run("fact", "add", "Staging runs on eu-west-1", "-c", "learning")
    run("procedure", "write", "deploy-staging", "-", input="# Deploy\nPush to staging.\n")
    hits = run("search", "staging", "--json").json()
    assert {h["kind"] for h in hits} == {"fact", "procedure"}
    for hit in hits:
        assert {"kind", "content", "score"} <= hit.keys()
        assert "id" in hit or "path" in hit
    assert "score" in run("search", "staging").out


@pytest.mark.sqlite_only  # a store per memory root: one URL is one store
def test_options_work_before_and_after_the_command(run, tmp_path: Path) -> None:  # C
    other = str(tmp_path / "other")
    (tmp_path / "other").mkdir()  # a named state dir must exist (L1)
    assert run("--state-dir", other, "fact", "add", "a", "-c", "learning").code == 0
    assert run("fact", "add", "b", "-c", "learning", "--state-dir", other).code == 0
    assert len(run("--json", "search", "a OR b", "--state-dir", other).json()) == 2
    assert run("search", "a OR b", "--json").json() == []  # the default store is untouched


def test_hot_commands_read_stdin_and_warn_on_stderr(run) -> None:  # H5, C
    assert run("hot", "set", "-", input="# Me\nName: Ada\n").code == 0
    assert run("hot", "append", "TZ: UTC").code == 0
    assert run("hot", "show").out == "# Me\nName: Ada\nTZ: UTC\n"
    assert run("hot", "show", "--json").json()["chars"] == len("# Me\nName: Ada\nTZ: UTC\n")
    assert run("hot", "rm", "TZ: UTC").code == 0
    full = run("hot", "set", "-", input="x" * 4500)
    assert full.code == 0 and "warning" in full.err and "85% full" in full.err


def test_procedure_write_from_a_file_and_show(run, tmp_path: Path) -> None:  # P1, C
    source = tmp_path / "steps.md"
    source.write_text("# Release\n1. tag\n")
    assert run("procedure", "write", "release", str(source)).code == 0
    assert run("procedure", "show", "release").out == "# Release\n1. tag\n"
    assert run("procedure", "list", "--json").json()[0]["name"] == "release"
    missing = run("procedure", "write", "release", str(tmp_path / "nope.md"))
    assert missing.code == 1 and "cannot read" in missing.err


@pytest.mark.parametrize(
    "args",
    [
        ["fact", "add", "x", "-c", "bogus"],
        ["fact", "add", "x"],
        ["fact", "rm", "abc"],
        ["fact", "rm", "42"],
        ["search", "a AND"],
        ["search", '"open'],
        ["search", "x", "--since", "yesterday"],
        ["search", "x", "-n", "0"],
        ["procedure", "write", "Bad_Name", "-"],
        ["procedure", "show", "nope"],
        ["hot", "rm", "missing line"],
        ["session", "end", "nope"],
        ["serve", "--http", "nonsense"],
        ["nosuchcommand"],
        [],
    ],
)
def test_user_errors_are_one_line_exit_1_no_traceback(run, args: list[str]) -> None:  # C, Z
    result = run(*args, input="")
    assert result.code == 1, result.err
    assert result.err.startswith("memdir: error: ") and result.err.count("\n") == 1
    assert "Traceback" not in result.err and result.out == ""


def test_bad_input_loses_nothing(run) -> None:  # Z
    run("fact", "add", "keep me", "-c", "learning")
    run("hot", "set", "keep hot")
    run("fact", "add", "x" * 20000, "-c", "learning")
    run("search", "((")
    run("hot", "rm", "--section", "nope")
    assert [h["content"] for h in run("search", "keep", "--json").json()] == ["keep me"]
    assert run("hot", "show").out == "keep hot\n"


def test_cli_start_imports_nothing_heavy() -> None:  # C: cold start stays fast
    code = (
        "import sys, memdir.cli; heavy = {'mcp', 'yaml', 'click', 'numpy', 'pydantic', "
        "'tomllib', 'dataclasses', 'importlib.metadata'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]"


# What a lexical search has no use for: what other commands, tiers or extras load (a
# config file's TOML parser, an entry's YAML, JSON without --json, the marker scanner for
# plain ASCII hits, the embedding stack, typing and dataclasses).
SEARCH_NEVER = {
    "mcp", "yaml", "click", "numpy", "pydantic", "onnxruntime", "tokenizers", "torch",
    "tomllib", "dataclasses", "typing", "inspect", "json", "importlib.metadata", "shutil",
    "subprocess", "threading", "memdir.entries", "memdir.identity", "memdir.daily",
    "memdir.tasks", "memdir.recall", "memdir.markers", "memdir.similarity",
    "memdir.duplicates", "memdir.secret_guard", "memdir.secret_scan", "memdir.hooks",
    "memdir.tools", "memdir.mcp_server", "memdir.curation", "memdir.search.chunks",
    "memdir.search.vectors", "memdir.storage.rows_cold",
}  # fmt: skip


@pytest.mark.sqlite_only  # on PostgreSQL the driver imports its own (bench/postgres.py)
def test_lexical_search_imports_nothing_heavy(memory: Memory) -> None:  # C, Q1
    """The command agents run most: a lexical search, run to its answer, loads none of
    SEARCH_NEVER (the CLI's start alone: test_cli_start_imports_nothing_heavy)."""
    memory.add_fact("kiwi harvest is in March", "learning")
    code = (
        "import sys, memdir.cli\n"
        "code = memdir.cli.main(['search', '--mode', 'lexical', 'kiwi'])\n"
        f"print(code, sorted(set({sorted(SEARCH_NEVER)!r}) & set(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "kiwi harvest is in March" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "0 []"


def test_path_and_init(run, tmp_path: Path, state_dir: Path) -> None:  # L1, L2, C
    assert run("path").out.strip() == str(state_dir / "memory")
    info = run("path", "--json").json()
    assert info["source"] == "env" and info["state_dir"] == str(state_dir)
    work = tmp_path / "proj"
    work.mkdir()
    env = {"MEMDIR_STATE_DIR": ""}
    assert run("init", cwd=str(work), env=env).code == 0
    assert (work / ".memdir" / "config.toml").exists()
    assert run("path", cwd=str(work), env=env).out.strip() == str(work / ".memdir" / "memory")


def test_undecodable_arguments_are_a_clear_error() -> None:  # Z
    # the autouse fixture points MEMDIR_STATE_DIR (inherited here) at a tmp store
    proc = subprocess.run(
        [sys.executable, "-m", "memdir", "fact", "add", b"caf\xff", "-c", "learning"],
        capture_output=True,
    )
    assert proc.returncode == 1 and b"not valid text" in proc.stderr
    assert b"Traceback" not in proc.stderr


def test_version(run) -> None:  # C: `memdir --version`, the installed version
    from importlib.metadata import version

    import memdir

    expected = version("memdir")
    assert memdir.__version__ == expected  # the one the CLI prints is the package's
    for args in (["--version"], ["--state-dir", "/no/such/dir", "--version"]):
        result = run(*args)
        assert (result.code, result.out, result.err) == (0, f"memdir {expected}\n", "")
    assert run("--version", "--json").json() == {"version": expected}
    assert "--version" in run("--help").out
    assert run("fact", "--version").code == 1  # only before a command


def test_the_cli_offers_the_kinds_and_modes_search_knows() -> None:  # C Q1
    """The parser's choices are kept beside the CLI (building it imports no search code);
    they are the search package's own."""
    from memdir import search
    from memdir.cli.common import SEARCH_KINDS, SEARCH_MODES

    assert (SEARCH_KINDS, SEARCH_MODES) == (search.KINDS, search.MODES)
