"""K1: `memdir setup codex` adds memdir to Codex's config.toml and AGENTS.md as one block
between marker lines and touches nothing else: the user's servers, comments and keys keep
every byte, a second run changes none, --remove gives the original bytes back, --dry-run
writes nothing, and a file memdir's block cannot join is refused with nothing written.
(The real Codex CLI loading what setup wrote: tests/test_e2e_codex.py.)"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import codexconfig
from memdir.errors import ConfigError, ConflictError
from memdir.testing import at_once, cli_command, cli_env

LAUNCHER = ["/opt/tools/bin/memdir"]
USER_TOML = """\
# my Codex config: keep this comment
model = "gpt-5"   # trailing comment

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "notify-send done"
"""
USER_AGENTS = "# Project rules\n\nRun `make lint` before committing.\n"


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def setup(folder: Path, launcher: list[str] = LAUNCHER, **kwargs: Any) -> list[str]:
    targets = codexconfig.targets("project", launcher, str(folder), {})
    return [change.action for change in codexconfig.run(targets, **kwargs)]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def with_user_files(folder: Path) -> dict[str, bytes]:
    (folder / ".codex").mkdir()
    (folder / ".codex" / "config.toml").write_text(USER_TOML)
    (folder / "AGENTS.md").write_text(USER_AGENTS)
    return snapshot(folder)


def test_setup_on_an_empty_project_writes_the_server_hooks_and_instructions(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path)
    assert setup(folder) == ["created", "created"]
    config = tomllib.loads((folder / ".codex" / "config.toml").read_text())
    server = config["mcp_servers"]["memdir"]
    assert (server["command"], server["args"]) == ("/opt/tools/bin/memdir", ["serve"])
    assert server["default_tools_approval_mode"] == "approve"
    assert server["env_vars"] == ["MEMDIR_STATE_DIR", "MEMDIR_MEMORY_DIR"]
    assert tuple(config["hooks"]) == codexconfig.EVENTS
    assert "PostCompact" not in config["hooks"]  # Codex's compaction hooks are not wired
    for event, groups in config["hooks"].items():
        command = f"/opt/tools/bin/memdir hook {event} --host codex"
        matcher = {"matcher": "mcp__memdir__.*"} if event == "PreToolUse" else {}
        assert groups == [{**matcher, "hooks": [{"type": "command", "command": command}]}]
    agents = (folder / "AGENTS.md").read_text()
    for words in ("HOT.md", "Facts", "Procedures", "Entries", "memory_recall"):
        assert words in agents


def test_setup_keeps_every_byte_of_the_users_files(tmp_path: Path) -> None:
    folder = project(tmp_path)
    before = with_user_files(folder)
    assert setup(folder) == ["updated", "updated"]
    after = snapshot(folder)
    for name in (".codex/config.toml", "AGENTS.md"):
        assert after[name].startswith(before[name] + b"\n"), name
    config = tomllib.loads(after[".codex/config.toml"].decode())
    assert config["model"] == "gpt-5" and config["mcp_servers"]["docs"]["command"] == "docs-mcp"
    assert config["hooks"]["Stop"][0]["hooks"][0]["command"] == "notify-send done"
    assert "memdir" in config["mcp_servers"]


def test_a_second_setup_changes_no_byte_and_remove_gives_them_back(tmp_path: Path) -> None:
    folder = project(tmp_path)
    before = with_user_files(folder)
    setup(folder)
    once = snapshot(folder)
    assert setup(folder) == ["unchanged", "unchanged"]
    assert snapshot(folder) == once
    assert setup(folder, remove=True) == ["updated", "updated"]
    assert snapshot(folder) == before
    assert setup(folder, remove=True) == ["unchanged", "unchanged"]


def test_remove_after_setup_on_an_empty_project_leaves_it_empty(tmp_path: Path) -> None:
    folder = project(tmp_path)
    setup(folder)
    assert setup(folder, remove=True) == ["removed", "removed"]
    assert snapshot(folder) == {} and not (folder / ".codex").exists()


def test_a_linked_config_is_written_through_and_never_deleted(tmp_path: Path) -> None:  # K1
    """A config.toml that is a link into a dotfiles folder: setup writes the file it points
    at and keeps the link; --remove leaving it empty keeps the user's (empty) file and link."""
    folder = project(tmp_path)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "codex.toml").write_text("")
    (folder / ".codex").mkdir()
    (folder / ".codex" / "config.toml").symlink_to(dotfiles / "codex.toml")
    setup(folder)
    assert (folder / ".codex" / "config.toml").is_symlink()
    assert "[mcp_servers.memdir]" in (dotfiles / "codex.toml").read_text()
    setup(folder, remove=True)
    assert (folder / ".codex" / "config.toml").is_symlink()
    assert (dotfiles / "codex.toml").read_text().strip() == ""


def test_a_moved_memdir_is_updated_in_place_and_what_follows_is_kept(tmp_path: Path) -> None:
    folder = project(tmp_path)
    with_user_files(folder)
    setup(folder)
    config = folder / ".codex" / "config.toml"
    config.write_text(config.read_text() + '\n[profiles.fast]\nmodel = "gpt-5-mini"\n')
    assert setup(folder, ["/new/bin/memdir"]) == ["updated", "unchanged"]
    text = config.read_text()
    assert "/opt/tools/bin/memdir" not in text and text.count("/new/bin/memdir hook") == len(
        codexconfig.EVENTS
    )
    assert text.startswith(USER_TOML) and text.endswith('[profiles.fast]\nmodel = "gpt-5-mini"\n')
    setup(folder, remove=True)
    assert config.read_text() == USER_TOML + '\n[profiles.fast]\nmodel = "gpt-5-mini"\n'


def test_dry_run_writes_nothing_and_says_what_would_change(tmp_path: Path) -> None:
    folder = project(tmp_path)
    before = with_user_files(folder)
    assert setup(folder, dry_run=True) == ["updated", "updated"]
    assert snapshot(folder) == before
    empty = project(tmp_path / "other")
    assert setup(empty, dry_run=True) == ["created", "created"]
    assert snapshot(empty) == {} and not (empty / ".codex").exists()


@pytest.mark.parametrize(
    "text, error",
    [
        ('model = "gpt-5\n', ConfigError),  # not TOML
        ('[mcp_servers.memdir]\ncommand = "other-tool"\n', ConflictError),  # not memdir's
        ('[mcp_servers.memdir]\ncommand = "/usr/bin/memdir"\nargs = ["serve"]\n', ConflictError),
        ("hooks = { SessionStart = [] }\n", ConfigError),  # inline: the tables cannot join
    ],
)
def test_a_file_memdirs_block_cannot_join_is_refused_untouched(
    tmp_path: Path, text: str, error: type[Exception]
) -> None:
    folder = project(tmp_path)
    (folder / ".codex").mkdir()
    (folder / ".codex" / "config.toml").write_text(text)
    with pytest.raises(error) as raised:
        setup(folder)
    assert "nothing was written" in str(raised.value)
    assert snapshot(folder) == {".codex/config.toml": text.encode()}  # nor AGENTS.md


def test_user_scope_writes_codex_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    paths = [t.path for t in codexconfig.targets("user", LAUNCHER, str(tmp_path), env)]
    assert paths == [str(home / ".codex" / "config.toml"), str(home / ".codex" / "AGENTS.md")]
    env["CODEX_HOME"] = str(tmp_path / "codex")
    targets = codexconfig.targets("user", LAUNCHER, str(tmp_path), env)
    assert [t.path for t in targets][0] == str(tmp_path / "codex" / "config.toml")
    assert [c.action for c in codexconfig.run(targets)] == ["created", "created"]
    # the user's own config.toml is kept when emptied; the AGENTS.md memdir made goes
    assert [c.action for c in codexconfig.run(targets, remove=True)] == ["updated", "removed"]
    assert (tmp_path / "codex" / "config.toml").read_text() == ""


def test_the_command_prints_one_line_per_file(tmp_path: Path, run: Callable[..., Any]) -> None:
    folder = project(tmp_path)
    first = run("setup", "codex", cwd=str(folder))
    assert first.code == 0, first.err
    assert first.out.splitlines() == [
        f"{folder}/.codex/config.toml: created",
        f"{folder}/AGENTS.md: created",
    ]
    again = run("setup", "codex", "--json", cwd=str(folder))
    assert [c["action"] for c in again.json()] == ["unchanged", "unchanged"]
    gone = run("setup", "codex", "--remove", "--dry-run", cwd=str(folder))
    assert gone.out.splitlines()[0] == f"{folder}/.codex/config.toml: would be removed"


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_concurrent_setups_lose_nothing_and_double_nothing(tmp_path: Path) -> None:
    """K1, H4: six setups at once over the user's files end as one setup would: the
    user's bytes kept, memdir's block once in each file, no temp file left."""
    folder = project(tmp_path)
    before = with_user_files(folder)
    env = cli_env(str(tmp_path / "state"), {"HOME": str(tmp_path / "home")})
    runs = at_once(cli_command("setup", "codex"), 6, env, cwd=str(folder))
    assert [code for code, _, _ in runs] == [0] * 6, runs
    assert sum(out.count(": updated") for _, out, _ in runs) == 2  # each file, by one of them
    after = snapshot(folder)
    assert set(after) == set(before)  # no temp file left
    for name in before:
        assert after[name].startswith(before[name])
        assert after[name].count(b"memdir: written by `memdir setup codex`") == 1
