"""A state dir or memory root that is named but missing is an error, never a new empty store;
`memdir init` makes one where it is told; .gitignore only inside a git work tree (L1, L2,
L5, L6). With --json every error is JSON on stdout (Z, C)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dbrows import store_made_for
from memdir import Memory, NotFoundError, ValidationError, init_project, open_memory
from memdir.testing import cli_command, cli_env
from storeconfig import write_config

# every command that opens a store, with the arguments it needs to get that far
STORE_COMMANDS = [
    ["path"],
    ["hot", "show"],
    ["hot", "set", "x"],
    ["hot", "append", "x"],
    ["hot", "rm", "x"],
    ["fact", "add", "x", "-c", "learning"],
    ["fact", "supersede", "1", "x"],
    ["fact", "rm", "1"],
    ["fact", "show", "1"],
    ["fact", "history", "1"],
    ["search", "x"],
    ["procedure", "write", "p", "PROC"],
    ["procedure", "show", "p"],
    ["procedure", "list"],
    ["session", "start"],
    ["session", "end", "s"],
    ["sessions"],
    ["serve"],
    ["serve", "--http", "127.0.0.1:1"],
    ["list"],
    ["show", "n"],
    ["rm", "n"],
    ["reindex"],
    ["prune"],
    ["recall"],
    ["task", "start", "t"],
    ["task", "end", "t"],
    ["task", "show", "t"],
    ["daily", "append", "x"],
    ["daily", "show"],
    ["boot"],
    ["get", "HOT.md"],
    ["heartbeat", "due"],
    ["heartbeat", "status"],
    ["heartbeat", "mark", "email"],
    ["distill"],
    ["stats"],
    ["doctor"],
    ["export"],
    ["import", "backup.jsonl"],
]
BLOCK = (
    'MEMDIR_MEMORIZE_BEGIN\n{"scope": "global", "name": "n", "description": "d", '
    '"content": "c"}\nMEMDIR_MEMORIZE_END\n'
)


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str = "",
    state: str = "",
) -> tuple[int, str, str]:
    """The real CLI in a child process; `state` is its MEMDIR_STATE_DIR ("" = unset)."""
    proc = subprocess.run(
        cli_command(*args),
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(state, env),
        cwd=cwd,
    )
    return proc.returncode, proc.stdout, proc.stderr


def argv_of(command: list[str], tmp_path: Path) -> list[str]:
    proc = tmp_path / "proc.md"
    proc.write_text("# P\n")
    return [str(proc) if a == "PROC" else a for a in command]


def made_nothing(tmp_path: Path) -> bool:
    return not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", STORE_COMMANDS, ids=" ".join)
@pytest.mark.slow
def test_a_named_state_dir_that_does_not_exist_is_an_error(
    tmp_path: Path, command: list[str]
) -> None:  # L1: flag before, flag after, env; never a new empty store
    missing = str(tmp_path / "typo" / "state")
    argv = argv_of(command, tmp_path)
    for args, state in (
        (["--state-dir", missing, *argv], ""),
        ([*argv, "--state-dir", missing], ""),
        (argv, missing),
    ):
        code, out, err = cli(*args, state=state, cwd=tmp_path)
        assert code == 1 and out == "", (args, out, err)
        assert err.startswith("memdir: error: ") and err.count("\n") == 1, err
        assert f"does not exist: create it with `memdir init --state-dir {missing}`" in err
        assert ("MEMDIR_STATE_DIR" in err) == bool(state)
        assert "Traceback" not in err
        assert made_nothing(tmp_path) and not (tmp_path / ".memdir").exists()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_memorize_with_a_missing_state_dir_stores_nothing_and_says_why(
    tmp_path: Path, how: str
) -> None:  # L1 M4: memorize never fails its caller, and makes no store either
    missing = str(tmp_path / "typo" / "state")
    args = ["memorize", "--state-dir", missing] if how == "flag" else ["memorize"]
    code, out, err = cli(
        *args, input=f"before\n{BLOCK}after\n", state="" if how == "flag" else missing
    )
    assert code == 0 and out == "before\nafter\n"
    assert "1 memorize request(s) dropped" in err and f"memdir init --state-dir {missing}" in err
    assert made_nothing(tmp_path)


@pytest.mark.slow
def test_the_hinted_init_makes_the_store_and_the_command_then_works(tmp_path: Path) -> None:
    # L1: the hint works as written, for the flag and for the variable
    for how in ("flag", "env"):
        missing = str(tmp_path / how / "state")
        flag = ["--state-dir", missing] if how == "flag" else []
        state = missing if how == "env" else ""
        assert cli("fact", "add", "x", "-c", "learning", *flag, state=state)[0] == 1
        code, out, _ = cli("init", *flag, state=state, cwd=tmp_path)
        assert code == 0 and out.startswith(f"Created {missing}\n")
        assert (Path(missing) / "config.toml").exists() and (Path(missing) / "memory").is_dir()
        assert not (tmp_path / ".memdir").exists()  # init went where it was told
        code, out, err = cli(
            "fact", "add", "ships on Tuesdays", "-c", "convention", *flag, state=state
        )
        assert code == 0, err
        assert store_made_for(Path(missing) / "memory")
        again = cli("init", *flag, "--json", state=state, cwd=tmp_path)
        assert again[0] == 0 and json.loads(again[1])["created"] is False


def test_init_in_python_honours_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # L1
    there = tmp_path / "a" / "b"
    result = init_project(str(tmp_path), state_dir=str(there))
    assert (result.state_dir, result.created, result.memory_dir) == (
        str(there),
        True,
        str(there / "memory"),
    )
    config = there / "config.toml"
    config.write_text("[memory]\nmax_inject_chars = 2000\n")  # a hand edit
    assert not init_project(str(tmp_path), state_dir=str(there)).created
    assert config.read_text() == "[memory]\nmax_inject_chars = 2000\n"  # kept
    monkeypatch.setenv("MEMDIR_STATE_DIR", str(tmp_path / "from-env"))
    assert init_project(str(tmp_path)).state_dir == str(tmp_path / "from-env")
    assert (tmp_path / "from-env" / "config.toml").exists()
    assert not (tmp_path / ".memdir").exists()


def test_the_python_api_follows_the_same_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # L1: Memory(), Memory(path), open_memory(path); create=True makes the store
    missing = tmp_path / "typo" / "state"
    monkeypatch.setenv("MEMDIR_STATE_DIR", str(missing))
    with pytest.raises(NotFoundError, match="MEMDIR_STATE_DIR points at .*memdir init"):
        Memory()
    monkeypatch.delenv("MEMDIR_STATE_DIR")
    for opening in (lambda: Memory(str(missing)), lambda: open_memory(str(missing))):
        with pytest.raises(NotFoundError, match="state dir .* does not exist"):
            opening()
    assert made_nothing(tmp_path)
    with Memory(str(missing), create=True) as mem:
        mem.add_fact("made on purpose", "learning")
    assert store_made_for(missing / "memory")
    with Memory(str(missing)) as mem:  # it exists now
        assert [h.content for h in mem.search("purpose")] == ["made on purpose"]
    monkeypatch.setenv("MEMDIR_STATE_DIR", str(tmp_path / "env-made"))
    Memory(create=True).hot_set("Name: Ada")
    assert (tmp_path / "env-made" / "memory" / "HOT.md").exists()


def test_a_state_dir_that_is_a_file_is_an_error(tmp_path: Path, run: Callable[..., Any]) -> None:
    # L1 Z
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    for create in (False, True):
        with pytest.raises(ValidationError, match="is a file, not a folder"):
            Memory(str(afile), create=create)
    result = run("hot", "show", "--state-dir", str(afile))
    assert result.code == 1 and "is a file, not a folder" in result.err
    assert afile.read_text() == "mine"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["env", "config"])
def test_a_named_memory_dir_that_does_not_exist_is_an_error(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:  # L5 L6: MEMDIR_MEMORY_DIR and memory.path, on the CLI and in Python
    missing = tmp_path / "typo" / "memory"
    env = {}
    if how == "env":
        env["MEMDIR_MEMORY_DIR"] = str(missing)
        monkeypatch.setenv("MEMDIR_MEMORY_DIR", str(missing))
        named = "MEMDIR_MEMORY_DIR points at"
    else:
        write_config(state_dir, f'[memory]\npath = "{missing}"\n')
        named = "memory.path in"
    with pytest.raises(NotFoundError, match=named):
        Memory()
    for args in (["fact", "add", "x", "-c", "learning"], ["search", "x"], ["serve"]):
        code, out, err = cli(*args, env=env, state=str(state_dir))
        assert code == 1 and named in err and err.count("\n") == 1, (args, err)
        assert f"`memdir init --state-dir {state_dir}`" in err
    assert made_nothing(tmp_path) and not (state_dir / "memory").exists()
    code, out, err = cli("init", "--json", env=env, state=str(state_dir))
    assert code == 0, err
    done = json.loads(out)
    assert done["memory_dir"] == str(missing) and done["gitignore"] is None
    assert missing.is_dir()
    added = cli("fact", "add", "lands there", "-c", "learning", env=env, state=str(state_dir))
    assert added[0] == 0, added[2]
    assert store_made_for(missing)


@pytest.mark.slow
def test_default_places_are_made_on_first_use(tmp_path: Path) -> None:  # L1 L2
    home = tmp_path / "home"  # does not exist yet
    work = tmp_path / "work"
    work.mkdir()
    code, out, err = cli(
        "fact", "add", "first ever", "-c", "learning", cwd=work, env={"HOME": str(home)}
    )
    assert code == 0, err
    assert store_made_for(home / ".memdir" / "state" / "memory")
    project = tmp_path / "repo"
    (project / ".memdir").mkdir(parents=True)  # found by looking, memory/ not there yet
    (project / "src").mkdir()
    code, _, err = cli("hot", "append", "Name: Ada", cwd=project / "src", env={"HOME": str(home)})
    assert code == 0, err
    assert (project / ".memdir" / "memory" / "HOT.md").read_text().startswith("Name: Ada")


def gitignores(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".gitignore"))


def test_init_writes_no_gitignore_outside_a_git_work_tree(tmp_path: Path) -> None:  # L6
    work = tmp_path / "plain"
    work.mkdir()
    code, out, err = cli("init", cwd=work)
    assert code == 0, err
    assert (work / ".memdir" / "config.toml").exists() and "Added" not in out
    code, out, err = cli("init", "--state-dir", str(tmp_path / "elsewhere"), "--json", cwd=work)
    assert code == 0 and json.loads(out)["gitignore"] is None
    assert gitignores(tmp_path) == []


@pytest.mark.parametrize("git", ["dir", "file"])
def test_init_keeps_the_memory_out_of_git_inside_a_work_tree(
    tmp_path: Path, git: str
) -> None:  # L6: `.git` a folder, or the file of a worktree or submodule; git is never run
    repo = tmp_path / "repo"
    repo.mkdir()
    if git == "dir":
        (repo / ".git").mkdir()
    else:
        (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")
    sub = repo / "pkg"
    sub.mkdir()
    no_git = {"PATH": ""}  # no git binary can be found: detection reads the disk only
    code, out, err = cli("init", cwd=sub, env=no_git)
    assert code == 0, err
    assert (sub / ".gitignore").read_text() == ".memdir/memory/\n"
    assert f"Added .memdir/memory/ to {sub / '.gitignore'}" in out
    code, out, err = cli("init", "--state-dir", str(repo / "mem"), "--json", cwd=sub, env=no_git)
    assert code == 0 and json.loads(out)["gitignore"] == str(repo / ".gitignore")
    assert (repo / ".gitignore").read_text() == "mem/memory/\n"
    assert cli("init", "--state-dir", str(repo / "mem"), cwd=sub)[0] == 0  # no second line
    assert (repo / ".gitignore").read_text() == "mem/memory/\n"
    # a memory root the team commits (memory.path) is not ignored
    team = repo / "team"
    team.mkdir()
    (team / "config.toml").write_text('[memory]\npath = "../shared"\n')
    code, out, err = cli("init", "--state-dir", str(team), "--json", cwd=sub)
    assert code == 0 and json.loads(out)["gitignore"] is None, err
    assert (repo / "shared").is_dir()
    assert gitignores(tmp_path) == ["repo/.gitignore", "repo/pkg/.gitignore"]


def test_init_in_the_top_of_a_work_tree_used_as_the_state_dir(tmp_path: Path) -> None:  # L6
    repo = tmp_path / "notes"
    (repo / ".git").mkdir(parents=True)
    code, out, err = cli("init", "--state-dir", str(repo), "--json")
    assert code == 0, err
    assert json.loads(out)["gitignore"] == str(repo / ".gitignore")
    assert (repo / ".gitignore").read_text() == "memory/\n"
    assert not (tmp_path / ".gitignore").exists()


# -- with --json, errors are JSON too (Z, C) -------------------------------------------------


@pytest.mark.parametrize("command", [["init"], *STORE_COMMANDS, ["memorize"]], ids=" ".join)
@pytest.mark.slow
def test_every_command_answers_json_errors_with_json(
    tmp_path: Path, state_dir: Path, command: list[str]
) -> None:  # Z C: a usage error, and an error raised before the store opens
    argv = argv_of(command, tmp_path)
    code, out, err = cli(*argv, "--no-such-option", "--json", state=str(state_dir))
    assert code == 1 and err == "", err
    error = json.loads(out)
    assert error["kind"] == "UsageError" and "--no-such-option" in error["error"]
    assert "\n" not in error["error"]
    if command in (["init"], ["memorize"]):
        return  # init makes the store; memorize never fails (M4)
    missing = str(tmp_path / "typo")
    for args in (["--json", *argv], [*argv, "--json"]):
        code, out, err = cli(*args, state=missing)
        assert code == 1 and err == "", (args, err)
        error = json.loads(out)
        assert error["kind"] == "NotFoundError" and "memdir init --state-dir" in error["error"]


def test_json_errors_carry_their_kind_and_context(
    state_dir: Path, run: Callable[..., Any]
) -> None:  # Z C: errors raised inside the library, with --json and without
    cases = [
        (["fact", "show", "99"], "NotFoundError", "no fact with id 99"),
        (["procedure", "show", "Bad_Name"], "ValidationError", "bad procedure name"),
        (["search", "a AND ("], "QueryError", "query"),
        (["fact", "add", "x", "-c", "nonsense"], "UsageError", "invalid choice"),
        (["no-such-command"], "UsageError", "invalid choice"),
    ]
    for args, kind, words in cases:
        text = run(*args)
        assert text.code == 1 and text.out == "" and text.err.count("\n") == 1, args
        assert text.err.startswith("memdir: error: ") and words in text.err
        both = run(*args, "--json")
        assert both.code == 1 and both.err == "", args
        error = both.json()
        assert error["kind"] == kind and words in error["error"], (args, error)
        assert text.err == f"memdir: error: {error['error']}\n"  # the same message
    assert "hint" in run("search", "a AND (", "--json").json()
    # an option value that looks like --json is not the flag
    assert run("hot", "append", "--", "--json").code == 0
    assert run("hot", "show").out == "--json\n"
    write_config(state_dir, "[memory]\nmax_inject_chars = 'lots'\n")
    error = run("recall", "--json").json()
    assert error["kind"] == "ConfigError" and error["line"] == 2
    assert error["key"] == "memory.max_inject_chars"
    assert error["path"] == str(state_dir / "config.toml")


def test_the_env_store_is_found_relative_to_the_cwd(tmp_path: Path) -> None:  # L1
    (tmp_path / "rel").mkdir()
    code, out, err = cli("path", "--json", state="rel", cwd=tmp_path)
    assert code == 0, err
    assert json.loads(out)["state_dir"] == str(tmp_path / "rel")
    assert os.path.isdir(tmp_path / "rel")
