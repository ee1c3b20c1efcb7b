"""Where memory lives (L1-L6) and config.toml (S)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbrows import store_made_for
from memdir import ConfigError, DisabledError, Memory, init_project
from memdir.paths import find_project_dir, resolve_state_dir, safe_path
from memdir.settings import DEFAULTS, load_settings
from storeconfig import write_config


def test_state_dir_resolution_order(tmp_path: Path) -> None:  # L1
    project = tmp_path / "repo"
    (project / ".memdir").mkdir(parents=True)
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    env = {"MEMDIR_STATE_DIR": str(tmp_path / "env-state")}
    assert resolve_state_dir("/explicit", env, str(deep)).path == "/explicit"
    assert resolve_state_dir(None, env, str(deep)) == (str(tmp_path / "env-state"), "env")
    assert resolve_state_dir(None, {}, str(deep)) == (str(project / ".memdir"), "project")
    home_state = resolve_state_dir(None, {}, str(tmp_path))
    assert home_state.source == "user"
    assert home_state.path == os.path.expanduser("~/.memdir/state")


def test_relative_state_dir_is_taken_from_cwd(tmp_path: Path) -> None:  # L1
    assert resolve_state_dir("rel", {}, str(tmp_path)).path == str(tmp_path / "rel")
    assert find_project_dir(str(tmp_path)) is None


def test_init_creates_project_memory_and_ignores_it_in_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # L1, L6
    monkeypatch.delenv("MEMDIR_STATE_DIR")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)  # a git work tree
    (repo / ".gitignore").write_text("node_modules/")  # no trailing newline
    result = init_project(str(repo))
    assert result.created and (repo / ".memdir" / "config.toml").exists()
    assert (repo / ".gitignore").read_text() == "node_modules/\n.memdir/memory/\n"
    again = init_project(str(repo))
    assert not again.created and again.gitignore is None
    assert (repo / ".gitignore").read_text().count(".memdir/memory/") == 1
    (repo / "sub").mkdir()
    mem = Memory(cwd=str(repo / "sub"))
    assert mem.state.path == str(repo / ".memdir")
    assert load_settings(str(repo / ".memdir" / "config.toml")) == DEFAULTS  # all commented


def test_memory_files_live_under_the_memory_root(memory: Memory, state_dir: Path) -> None:  # L2
    memory.hot_set("x")
    memory.add_fact("y", "learning")
    memory.write_procedure("z", "z")
    root = state_dir / "memory"
    assert memory.path == str(root)
    for rel in ("HOT.md", "procedures/z.md"):
        assert (root / rel).exists(), rel
    assert store_made_for(root)


def test_two_processes_share_one_store(run, state_dir: Path) -> None:  # L3
    assert run("fact", "add", "written by one process", "-c", "learning").code == 0
    found = run("search", "written", "--json").json()
    assert [h["content"] for h in found] == ["written by one process"]


@pytest.mark.sqlite_only  # a store per state dir: one URL is one store (scopes: test_postgres.py)
def test_two_stores_never_see_each_other(tmp_path: Path) -> None:  # L4
    a = Memory(str(tmp_path / "a"), create=True)
    b = Memory(str(tmp_path / "b"), create=True)
    a.add_fact("secret plan of project a", "decision")
    a.hot_set("A")
    assert b.search("plan") == [] and b.hot() == ""


def test_memory_dir_env_overrides_the_memory_root_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state_dir: Path
) -> None:  # L5
    other = tmp_path / "shared-memory"
    other.mkdir()
    monkeypatch.setenv("MEMDIR_MEMORY_DIR", str(other))
    mem = Memory()
    assert mem.state.path == str(state_dir) and mem.path == str(other)
    mem.add_fact("lives elsewhere", "learning")
    assert store_made_for(other)
    env = mem.child_env()
    assert env["MEMDIR_MEMORY_DIR"] == str(other) and env["MEMDIR_STATE_DIR"] == str(state_dir)


def test_memory_path_setting_relocates_memory(state_dir: Path, tmp_path: Path) -> None:  # L6, S
    write_config(state_dir, '[memory]\npath = "../team-memory"\n')
    (tmp_path / "team-memory").mkdir()  # a folder the team commits
    mem = Memory()
    assert mem.path == str(tmp_path / "team-memory")
    mem.add_fact("shared with the team", "convention")
    assert store_made_for(tmp_path / "team-memory")
    assert not (state_dir / "memory").exists()


def test_config_values_are_read(state_dir: Path) -> None:  # S
    write_config(
        state_dir,
        '[memory]\nmax_inject_chars = 2000\nmax_entry_bytes = 100\ntask_retention = "2d"\n'
        'hot_cap_chars = 1200\nmarker_prefix = "APIARY"\nbusy_timeout_ms = 50\n',
    )
    s = Memory().settings
    assert (
        s.max_inject_chars,
        s.max_entry_bytes,
        s.task_retention,
        s.hot_cap_chars,
        s.marker_prefix,
        s.busy_timeout_ms,
    ) == (2000, 100, 172800.0, 1200, "APIARY", 50)


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("[memory]\nenabled = maybe\n", 2, None),
        ('[memory]\nmax_inject_chars = "lots"\n', 2, "memory.max_inject_chars"),
        ("[memory]\n\nhot_cap_chars = 10\n", 3, "memory.hot_cap_chars"),
        ('[memory]\ntask_retention = "forever"\n', 2, "memory.task_retention"),
        ('[memory]\nmarker_prefix = "lower"\n', 2, "memory.marker_prefix"),
        ("[memory]\nenable = true\n", 2, "memory.enable"),
        ("memory = 3\n", 1, "memory"),
        ('[boot]\nfiles = "HOT.md"\n', 2, "boot.files"),
        ("[heartbeat]\nemail = -1\n", 2, "heartbeat.email"),
        ("[other]\nx = 1\n", 1, "other"),
    ],
)
def test_malformed_config_is_a_clear_error(
    state_dir: Path, text: str, line: int | None, key: str | None
) -> None:  # S
    path = state_dir / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        Memory()
    error = info.value
    assert str(path) in str(error) and "\n" not in str(error)
    assert error.line == line and error.key == key
    assert path.read_text() == text  # left in place


def test_broken_config_from_the_cli_is_one_line(run, state_dir: Path) -> None:  # S, C
    write_config(state_dir, "[memory\n")
    result = run("fact", "add", "x", "-c", "learning")
    assert result.code == 1
    assert result.err.count("\n") == 1 and "config.toml:1" in result.err
    assert "Traceback" not in result.err


def test_disabled_memory_persists_nothing(state_dir: Path) -> None:  # S
    write_config(state_dir, "[memory]\nenabled = false\n")
    mem = Memory()
    for write in (
        lambda: mem.add_fact("x", "learning"),
        lambda: mem.hot_append("x"),
        lambda: mem.write_procedure("p", "x"),
        lambda: mem.start_session(),
    ):
        with pytest.raises(DisabledError, match="memory.enabled = false"):
            write()
    assert mem.search("x") == [] and mem.hot() == "" and mem.sessions() == []
    assert not (state_dir / "memory").exists()


def test_safe_path_refuses_escapes(tmp_path: Path) -> None:  # X1
    root = tmp_path / "memory"
    (root / "global").mkdir(parents=True)
    (root / "global" / "link").symlink_to(tmp_path)
    assert safe_path(str(root), "global/a.md") == str(root / "global" / "a.md")
    from memdir import ValidationError

    for bad in ("../x", "/etc/passwd", "global/../../x", "global/link/secret", ""):
        with pytest.raises(ValidationError):
            safe_path(str(root), bad)
