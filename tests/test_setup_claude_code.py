"""K1: `memdir setup claude-code` merges memdir into Claude Code's config and nothing else:
the user's servers, hooks and keys stay exactly as they were, a second run changes no byte,
--remove gives the original bytes back, --dry-run writes nothing, a broken file is refused.
The real Claude Code CLI (on PATH under `make test`) then sees the server."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import hostconfig
from memdir.errors import ConfigError, ConflictError
from memdir.testing import at_once, cli_command

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ["/opt/tools/bin/memdir"]
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "SubagentStart",
    "PreToolUse",
    "Stop",
    "SubagentStop",
    "PostCompact",
    "SessionEnd",
)

USER_MCP = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["--stdio"], "env": {}}}}
USER_SETTINGS = {
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check-bash.sh"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
    "permissions": {"allow": ["Bash(git status)"], "deny": ["Read(.env)"]},
    "env": {"FOO": "1"},
}


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def setup(folder: Path, **kwargs: Any) -> list[hostconfig.Change]:
    targets = hostconfig.targets("project", LAUNCHER, str(folder), {})
    return hostconfig.run(targets, **kwargs)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def write_user_files(folder: Path, indent: int = 4) -> dict[str, bytes]:
    (folder / ".claude").mkdir(exist_ok=True)
    (folder / ".mcp.json").write_text(json.dumps(USER_MCP, indent=indent) + "\n")
    (folder / ".claude" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=indent))
    return snapshot(folder)


def without_memdir(data: dict[str, Any]) -> dict[str, Any]:
    return hostconfig.unmerge(
        data,
        hostconfig.Want(
            hostconfig.server_entry(LAUNCHER), hostconfig.hooks_entry(LAUNCHER), True, True
        ),
        "x",
    )


def test_setup_on_an_empty_project_writes_the_server_and_the_four_hooks(tmp_path: Path) -> None:
    """K1: .mcp.json gets the memdir server; .claude/settings.json a command hook per event,
    PreToolUse only on memdir's tools, the rule allowing them and the server's approval."""
    folder = project(tmp_path)
    (folder / "src").mkdir()
    targets = hostconfig.targets("project", LAUNCHER, str(folder / "src"), {})
    changes = hostconfig.run(targets)
    assert [(Path(c.path).relative_to(folder), c.action) for c in changes] == [
        (Path(".mcp.json"), "created"),
        (Path(".claude/settings.json"), "created"),
    ]  # the git work tree's top, not the folder setup ran in
    mcp = json.loads((folder / ".mcp.json").read_text())
    assert mcp == {
        "mcpServers": {
            "memdir": {"type": "stdio", "command": "/opt/tools/bin/memdir", "args": ["serve"]}
        }
    }
    settings = json.loads((folder / ".claude" / "settings.json").read_text())
    assert list(settings["hooks"]) == list(EVENTS)
    for event in EVENTS:
        (group,) = settings["hooks"][event]
        assert group["hooks"] == [
            {"type": "command", "command": f"/opt/tools/bin/memdir hook {event}"}
        ]
        assert group.get("matcher") == ("mcp__memdir__.*" if event == "PreToolUse" else None)
    assert settings["permissions"] == {"allow": ["mcp__memdir"]}
    assert settings["enabledMcpjsonServers"] == ["memdir"]


def test_setup_keeps_the_users_servers_hooks_keys_and_indent(tmp_path: Path) -> None:
    """K1: merged, never clobbered: everything of the user's is kept, in its order and with
    the file's own indent; memdir's entries come after."""
    folder = project(tmp_path)
    write_user_files(folder, indent=4)
    setup(folder)
    mcp_text = (folder / ".mcp.json").read_text()
    settings_text = (folder / ".claude" / "settings.json").read_text()
    assert mcp_text.startswith('{\n    "mcpServers": {\n        "github"')
    assert not settings_text.endswith("\n")  # the user's file had no final newline
    mcp, settings = json.loads(mcp_text), json.loads(settings_text)
    assert list(mcp["mcpServers"]) == ["github", "memdir"]
    assert mcp["mcpServers"]["github"] == USER_MCP["mcpServers"]["github"]
    assert list(settings)[:4] == ["model", "hooks", "permissions", "env"]
    assert settings["hooks"]["PreToolUse"][0] == USER_SETTINGS["hooks"]["PreToolUse"][0]
    assert settings["hooks"]["PreToolUse"][1]["matcher"] == "mcp__memdir__.*"
    assert settings["hooks"]["Stop"][:1] == USER_SETTINGS["hooks"]["Stop"]  # the user's first
    assert settings["hooks"]["Stop"][1]["hooks"][0]["command"].endswith("memdir hook Stop")
    assert settings["permissions"] == {
        "allow": ["Bash(git status)", "mcp__memdir"],
        "deny": ["Read(.env)"],
    }
    assert without_memdir(settings) == USER_SETTINGS


def test_a_second_setup_changes_no_byte(tmp_path: Path) -> None:
    """K1: idempotent: the second run finds everything in place and writes nothing."""
    folder = project(tmp_path)
    write_user_files(folder)
    setup(folder)
    first = snapshot(folder)
    mtimes = {p: os.stat(folder / p).st_mtime_ns for p in first}
    changes = setup(folder)
    assert [c.action for c in changes] == ["unchanged", "unchanged"]
    assert snapshot(folder) == first
    assert {p: os.stat(folder / p).st_mtime_ns for p in first} == mtimes


def test_remove_gives_back_the_original_bytes(tmp_path: Path) -> None:
    """K1: --remove takes out only what memdir added; the user's files are as they were."""
    folder = project(tmp_path)
    original = write_user_files(folder)
    setup(folder)
    changes = setup(folder, remove=True)
    assert [c.action for c in changes] == ["updated", "updated"]
    assert snapshot(folder) == original
    assert [c.action for c in setup(folder, remove=True)] == ["unchanged", "unchanged"]


def test_remove_after_setup_on_an_empty_project_leaves_it_empty(tmp_path: Path) -> None:
    """K1: files setup created and that hold nothing else are deleted, with the .claude
    folder it made; nothing else in the project is touched."""
    folder = project(tmp_path)
    setup(folder)
    assert [c.action for c in setup(folder, remove=True)] == ["removed", "removed"]
    assert sorted(p.name for p in folder.iterdir()) == [".git"]


def test_remove_recognises_memdir_by_its_command_not_its_place(tmp_path: Path) -> None:
    """K1: a memdir hook the user moved into a group of their own, or one written by an
    older memdir at another path, is found and taken out; the user's hook beside it stays."""
    folder = project(tmp_path)
    (folder / ".claude").mkdir()
    mixed = {
        "hooks": {
            "SessionStart": [
                {
                    "matcher": "startup",
                    "hooks": [
                        {"type": "command", "command": "echo hello"},
                        {"type": "command", "command": "/old/venv/bin/memdir hook SessionStart"},
                    ],
                }
            ],
            "SessionEnd": [
                {"hooks": [{"type": "command", "command": "python3 -m memdir hook SessionEnd"}]}
            ],
        }
    }
    (folder / ".claude" / "settings.json").write_text(json.dumps(mixed, indent=2) + "\n")
    setup(folder)
    settings = json.loads((folder / ".claude" / "settings.json").read_text())
    commands = [
        hook["command"]
        for groups in settings["hooks"].values()
        for group in groups
        for hook in group["hooks"]
    ]
    assert sorted(commands) == sorted(
        ["echo hello", *(f"/opt/tools/bin/memdir hook {e}" for e in EVENTS)]
    )  # the old memdir hooks were replaced, not doubled
    setup(folder, remove=True)
    assert json.loads((folder / ".claude" / "settings.json").read_text()) == {
        "hooks": {
            "SessionStart": [
                {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
            ]
        }
    }


def test_dry_run_writes_nothing_and_says_what_would_change(tmp_path: Path) -> None:
    """K1: --dry-run reads, merges and reports, and leaves every byte as it was."""
    folder = project(tmp_path)
    assert [c.action for c in setup(folder, dry_run=True)] == ["created", "created"]
    assert snapshot(folder) == {}
    original = write_user_files(folder)
    changes = setup(folder, dry_run=True)
    assert [(c.action, c.dry_run) for c in changes] == [("updated", True), ("updated", True)]
    assert snapshot(folder) == original
    setup(folder)
    after = snapshot(folder)
    assert [c.action for c in setup(folder, remove=True, dry_run=True)] == ["updated"] * 2
    assert snapshot(folder) == after


def test_invalid_json_is_refused_with_its_line_and_nothing_is_written(tmp_path: Path) -> None:
    """K1, Z: a file that does not parse is named with its line; neither file is written."""
    folder = project(tmp_path)
    (folder / ".claude").mkdir()
    (folder / ".claude" / "settings.json").write_text('{\n  "model": "opus",\n  "hooks": {\n}\n')
    with pytest.raises(ConfigError) as caught:
        setup(folder)
    assert caught.value.path == str(folder / ".claude" / "settings.json")
    assert caught.value.line == 5
    assert str(caught.value).startswith(f"{folder / '.claude' / 'settings.json'}:5: not valid JSON")
    assert not (folder / ".mcp.json").exists()  # checked before anything was written
    assert (folder / ".claude" / "settings.json").read_text().count("\n") == 4


def test_a_server_of_another_program_named_memdir_is_not_replaced(tmp_path: Path) -> None:
    """K1: memdir's server is recognised by its command; a user's own `memdir` is kept."""
    folder = project(tmp_path)
    theirs = {"mcpServers": {"memdir": {"command": "node", "args": ["my-memdir.js"]}}}
    (folder / ".mcp.json").write_text(json.dumps(theirs))
    with pytest.raises(ConflictError, match="does not run memdir"):
        setup(folder)
    assert json.loads((folder / ".mcp.json").read_text()) == theirs
    assert not (folder / ".claude").exists()


def test_a_moved_memdir_is_updated_in_place(tmp_path: Path) -> None:
    """K1: a server entry of an older memdir (another path) is replaced where it stands."""
    folder = project(tmp_path)
    old = {
        "mcpServers": {
            "memdir": {"command": "/old/bin/memdir", "args": ["serve"]},
            "other": {"command": "x"},
        }
    }
    (folder / ".mcp.json").write_text(json.dumps(old, indent=2) + "\n")
    setup(folder)
    servers = json.loads((folder / ".mcp.json").read_text())["mcpServers"]
    assert list(servers) == ["memdir", "other"]
    assert servers["memdir"]["command"] == LAUNCHER[0]


def test_user_scope_writes_the_users_config_under_home(tmp_path: Path) -> None:
    """K1: user scope: the server in ~/.claude.json (where `claude mcp add --scope user`
    puts it), hooks and the tool rule in ~/.claude/settings.json; Claude Code's own state
    in ~/.claude.json and its 0600 mode are kept, and the file is never deleted."""
    home = tmp_path / "home"
    home.mkdir()
    state = {"numStartups": 3, "projects": {"/p": {"allowedTools": []}}, "userID": "abc"}
    (home / ".claude.json").write_text(json.dumps(state, indent=2))
    os.chmod(home / ".claude.json", 0o600)
    targets = hostconfig.targets("user", LAUNCHER, str(tmp_path), {"HOME": str(home)})
    assert [t.path for t in targets] == [
        str(home / ".claude.json"),
        str(home / ".claude" / "settings.json"),
    ]
    hostconfig.run(targets)
    config = json.loads((home / ".claude.json").read_text())
    assert config["mcpServers"]["memdir"]["command"] == LAUNCHER[0]
    assert {k: v for k, v in config.items() if k != "mcpServers"} == state
    assert stat.S_IMODE(os.stat(home / ".claude.json").st_mode) == 0o600
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert list(settings["hooks"]) == list(EVENTS)
    assert "enabledMcpjsonServers" not in settings  # user servers need no approval
    hostconfig.run(targets, remove=True)
    assert json.loads((home / ".claude.json").read_text()) == state
    assert not (home / ".claude" / "settings.json").exists()


def test_user_scope_follows_claude_config_dir(tmp_path: Path) -> None:
    """K1: with CLAUDE_CONFIG_DIR set, Claude Code keeps both files there."""
    config_dir = tmp_path / "cfg"
    env = {"HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(config_dir)}
    targets = hostconfig.targets("user", LAUNCHER, str(tmp_path), env)
    assert [t.path for t in targets] == [
        str(config_dir / ".claude.json"),
        str(config_dir / "settings.json"),
    ]


def test_a_linked_settings_file_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    """K1: a settings.json linked from a dotfiles folder is changed where it lives."""
    folder = project(tmp_path)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    (folder / ".claude").mkdir()
    (folder / ".claude" / "settings.json").symlink_to(dotfiles / "settings.json")
    setup(folder)
    assert (folder / ".claude" / "settings.json").is_symlink()
    assert (
        "mcp__memdir"
        in json.loads((dotfiles / "settings.json").read_text())["permissions"]["allow"]
    )
    setup(folder, remove=True)
    assert json.loads((dotfiles / "settings.json").read_text()) == USER_SETTINGS


def test_the_plugin_ships_what_setup_writes() -> None:
    """K1: the plugin's hooks.json and .mcp.json are setup's own entries (memdir on PATH),
    and the marketplace lists the plugin's folder."""
    plugin = ROOT / "integrations" / "claude-code"
    for rel, data in hostconfig.plugin_files().items():
        assert json.loads((plugin / rel).read_text()) == data, rel
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = marketplace["plugins"]
    assert entry["name"] == manifest["name"] == "memdir"
    assert (ROOT / entry["source"]).resolve() == plugin
    from memdir import __version__

    assert manifest["version"] == __version__
    skill = (plugin / "skills" / "memdir" / "SKILL.md").read_text()
    for tier in ("HOT.md", "fact", "procedure", "global entry", "memory_search"):
        assert tier in skill


# -- the command itself, and the real Claude Code CLI --------------------------------------


def claude_env(tmp_path: Path) -> dict[str, str]:
    """A home of the test's own for Claude Code, so it never reads or writes the real one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMDIR_", "CLAUDE"))}
    env["HOME"] = str(tmp_path / "home")
    env["MEMDIR_STATE_DIR"] = str(tmp_path / "state")
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"  # no telemetry from a test
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def memdir(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args), cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def claude(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = shutil.which("claude")
    if path is None:
        pytest.fail("the Claude Code CLI is not on PATH: run the suite with `make test`")
    return subprocess.run(
        [path, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_the_command_prints_one_line_per_file(tmp_path: Path, run: Callable[..., Any]) -> None:
    """K1, C: the CLI says what it changed (or would), one line per file, and --json."""
    folder = project(tmp_path)
    dry = run("setup", "claude-code", "--dry-run", cwd=str(folder))
    assert dry.code == 0, dry.err
    assert dry.out.splitlines() == [
        f"{folder / '.mcp.json'}: would be created",
        f"{folder / '.claude' / 'settings.json'}: would be created",
    ]
    assert snapshot(folder) == {}
    done = run("setup", "claude-code", cwd=str(folder))
    assert done.out.splitlines() == [
        f"{folder / '.mcp.json'}: created",
        f"{folder / '.claude' / 'settings.json'}: created",
    ]
    server = json.loads((folder / ".mcp.json").read_text())["mcpServers"]["memdir"]
    assert os.path.isabs(server["command"]) and os.access(server["command"], os.X_OK)
    again = run("setup", "claude-code", "--json", cwd=str(folder))
    assert [c["action"] for c in again.json()] == ["unchanged", "unchanged"]
    (folder / ".mcp.json").write_text('{\n  "mcpServers": {,\n}\n')
    bad = run("setup", "claude-code", "--remove", cwd=str(folder))
    assert bad.code == 1
    assert bad.err.strip().splitlines() == [
        f"memdir: error: {folder / '.mcp.json'}:2: not valid JSON (Expecting property name "
        "enclosed in double quotes, column 18); nothing was written: fix the file, then run "
        "setup again"
    ]


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_concurrent_setups_lose_nothing_and_double_nothing(tmp_path: Path) -> None:
    """K1, H4: six setups at once over the user's files end as one setup would: the user's
    entries kept, memdir's once each, no temp file left."""
    folder = project(tmp_path)
    write_user_files(folder, indent=2)
    env = claude_env(tmp_path)
    runs = at_once(cli_command("setup", "claude-code"), 6, env, cwd=str(folder))
    assert [code for code, _, _ in runs] == [0] * 6, runs
    created = [out.count(": updated") for _, out, _ in runs]
    assert sum(created) == 2  # each file was changed by exactly one of them
    alone = tmp_path / "alone"
    (alone / ".git").mkdir(parents=True)
    write_user_files(alone, indent=2)
    memdir(["setup", "claude-code"], alone, env)
    assert snapshot(folder) == snapshot(alone)


@pytest.mark.slow
def test_claude_code_sees_the_server_setup_registered(tmp_path: Path) -> None:
    """K1: the real CLI lists memdir as a project server after setup; once the folder is
    trusted (what `claude`'s trust dialog records), the approval setup wrote is honoured and
    the server connects. After --remove it is gone."""
    folder = project(tmp_path)
    env = claude_env(tmp_path)
    memdir(["init", "--state-dir", env["MEMDIR_STATE_DIR"]], folder, env)
    result = memdir(["setup", "claude-code"], folder, env)
    assert result.returncode == 0, result.stderr
    listed = claude(["mcp", "get", "memdir"], folder, env)
    assert listed.returncode == 0, listed.stderr
    assert "Scope: Project config" in listed.stdout, listed.stdout
    assert "Args: serve" in listed.stdout
    config_path = Path(env["HOME"]) / ".claude.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config.setdefault("projects", {}).setdefault(str(folder), {})["hasTrustDialogAccepted"] = True
    config_path.write_text(json.dumps(config))
    trusted = claude(["mcp", "get", "memdir"], folder, env)
    assert "Connected" in trusted.stdout, trusted.stdout + trusted.stderr
    memdir(["setup", "claude-code", "--remove"], folder, env)
    gone = claude(["mcp", "get", "memdir"], folder, env)
    assert gone.returncode != 0
    assert 'No MCP server named "memdir"' in gone.stderr


@pytest.mark.slow
def test_claude_code_sees_the_user_scope_server(tmp_path: Path) -> None:
    """K1: user scope lands where Claude Code reads user servers: `claude mcp list` run in
    any folder connects to it."""
    env = claude_env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    memdir(["init", "--state-dir", env["MEMDIR_STATE_DIR"]], elsewhere, env)
    result = memdir(["setup", "claude-code", "--scope", "user"], elsewhere, env)
    assert result.returncode == 0, result.stderr
    listed = claude(["mcp", "list"], elsewhere, env)
    line = next((x for x in listed.stdout.splitlines() if x.startswith("memdir:")), "")
    assert "serve" in line and "Connected" in line, listed.stdout + listed.stderr
    got = claude(["mcp", "get", "memdir"], elsewhere, env)
    assert "Scope: User config" in got.stdout, got.stdout


@pytest.mark.slow
def test_claude_validates_the_plugin_and_the_marketplace(tmp_path: Path) -> None:
    """K1: `claude plugin validate` passes the plugin folder and the marketplace file."""
    env = claude_env(tmp_path)
    for path in (ROOT / "integrations" / "claude-code", ROOT):
        checked = claude(["plugin", "validate", str(path)], tmp_path, env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "Validation passed" in checked.stdout, checked.stdout


@pytest.mark.slow
def test_claude_loads_the_plugin_and_connects_to_its_server(tmp_path: Path) -> None:
    """K1: with the plugin loaded, Claude Code names the server plugin:memdir:memdir (its
    tools mcp__plugin_memdir_memdir__*, what the plugin's PreToolUse matcher names) and
    connects to the memdir on PATH."""
    import sys

    env = claude_env(tmp_path)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    memdir(["init", "--state-dir", env["MEMDIR_STATE_DIR"]], tmp_path, env)
    plugin = ROOT / "integrations" / "claude-code"
    listed = claude(["--plugin-dir", str(plugin), "mcp", "list"], tmp_path, env)
    line = next(
        (x for x in listed.stdout.splitlines() if x.startswith("plugin:memdir:memdir:")), ""
    )
    assert "Connected" in line, listed.stdout + listed.stderr
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert hooks["PreToolUse"][0]["matcher"] == "mcp__plugin_memdir_memdir__.*"


def test_what_the_user_added_to_memdirs_entries_is_kept(tmp_path: Path) -> None:
    """K1: an env on memdir's server, a timeout or another matcher on its hook: setup
    brings the command up to date and keeps the rest where it is; then it is stable."""
    folder = project(tmp_path)
    setup(folder)
    mcp = json.loads((folder / ".mcp.json").read_text())
    mcp["mcpServers"]["memdir"]["env"] = {"MEMDIR_STATE_DIR": "/srv/memory"}
    mcp["mcpServers"]["memdir"]["command"] = "/old/bin/memdir"
    (folder / ".mcp.json").write_text(json.dumps(mcp, indent=2) + "\n")
    settings = json.loads((folder / ".claude" / "settings.json").read_text())
    start = settings["hooks"]["SessionStart"][0]
    start["matcher"] = "startup|resume"
    start["hooks"][0]["timeout"] = 20
    start["hooks"][0]["command"] = "/old/bin/memdir hook SessionStart"
    (folder / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    assert [c.action for c in setup(folder)] == ["updated", "updated"]
    server = json.loads((folder / ".mcp.json").read_text())["mcpServers"]["memdir"]
    assert server["env"] == {"MEMDIR_STATE_DIR": "/srv/memory"}
    assert server["command"] == LAUNCHER[0]
    (group,) = json.loads((folder / ".claude" / "settings.json").read_text())["hooks"][
        "SessionStart"
    ]
    assert group == {
        "matcher": "startup|resume",
        "hooks": [
            {"type": "command", "command": f"{LAUNCHER[0]} hook SessionStart", "timeout": 20}
        ],
    }
    before = snapshot(folder)
    assert [c.action for c in setup(folder)] == ["unchanged", "unchanged"]
    assert snapshot(folder) == before
