"""K1: wiring memdir into an agent host's own config (Claude Code), merged, never clobbered.

The rules of the merge live here, as functions over parsed JSON: what memdir adds (one MCP
server, four hooks, a permission rule, the approval of its project server), how it finds
its own entries again (by their command, never by position or by name alone), and what
"remove" takes out (only those). The same functions build the plugin's hooks.json and
.mcp.json (integrations/claude-code), so the plugin and `memdir setup` cannot drift.

Files are changed under an exclusive lock on their folder, read, merged, written with
atomic_output (a unique temp file, fsynced, renamed), so two setups at once never lose a
write; a file that does not parse is named with its line and left untouched. A file that
needs no change is not written at all: a second run leaves every byte as it was.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shlex
from dataclasses import dataclass

from .errors import ConfigError, ConflictError
from .settings import HOOK_EVENTS
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

SERVER = "memdir"  # the server's name in mcpServers: its tools are mcp__memdir__*
# Every event memdir answers but PreCompact (answered for a host without PostCompact, which
# logs the compaction with its summary)
EVENTS = tuple(e for e in HOOK_EVENTS if e != "PreCompact")
TOOLS_RULE = "mcp__memdir"  # a permission rule naming a server allows all its tools
# Claude Code names a plugin's server plugin:<plugin>:<server>: the plugin's tools are
# mcp__plugin_memdir_memdir__*
PLUGIN_TOOLS = "mcp__plugin_memdir_memdir"


# -- what memdir adds -------------------------------------------------------------------


def server_entry(launcher: Sequence[str]) -> dict[str, Any]:
    """The stdio server Claude Code starts: `memdir serve`, by the launcher that ran setup."""
    return {"type": "stdio", "command": launcher[0], "args": [*launcher[1:], "serve"]}


def hook_command(launcher: Sequence[str], event: str) -> str:
    return shlex.join([*launcher, "hook", event])


def hooks_entry(
    launcher: Sequence[str], tools: str = TOOLS_RULE
) -> dict[str, list[dict[str, Any]]]:
    """settings.json's `hooks`: one matcher group per event, each a single command hook;
    PreToolUse only on memdir's own tools (`tools` is their name's prefix)."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in EVENTS:
        group: dict[str, Any] = {"matcher": f"{tools}__.*"} if event == "PreToolUse" else {}
        group["hooks"] = [{"type": "command", "command": hook_command(launcher, event)}]
        hooks[event] = [group]
    return hooks


def plugin_files(launcher: Sequence[str] = ("memdir",)) -> dict[str, dict[str, Any]]:
    """The plugin's hooks.json and .mcp.json (a plugin finds memdir on PATH)."""
    return {
        "hooks/hooks.json": {"hooks": hooks_entry(launcher, PLUGIN_TOOLS)},
        ".mcp.json": {"mcpServers": {SERVER: server_entry(launcher)}},
    }


# -- recognising memdir's entries ----------------------------------------------------------


def _memdir_tail(argv: Sequence[str]) -> list[str] | None:
    """The arguments given to memdir when `argv` runs memdir (`.../memdir ARGS` or
    `python -m memdir ARGS`), else None."""
    if not argv:
        return None
    if os.path.basename(argv[0]) == "memdir":
        return list(argv[1:])
    if (
        len(argv) >= 3
        and os.path.basename(argv[0]).startswith("python")
        and argv[1:3]
        == [
            "-m",
            "memdir",
        ]
    ):
        return list(argv[3:])
    return None


def is_memdir_server(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    tail = _memdir_tail([command, *(str(a) for a in args)])
    return tail is not None and tail[:1] == ["serve"]


def is_memdir_hook(hook: object) -> bool:
    """A command hook that runs `memdir hook EVENT`, whatever path memdir had then."""
    if not isinstance(hook, dict) or hook.get("type") != "command":
        return False
    command = hook.get("command")
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    tail = _memdir_tail(argv)
    return tail is not None and len(tail) == 2 and tail[0] == "hook"


# -- the merge, over parsed JSON -----------------------------------------------------------


@dataclass(frozen=True)
class Want:
    """What one file should hold of memdir's (None: nothing of that kind in this file)."""

    server: dict[str, Any] | None = None
    hooks: dict[str, list[dict[str, Any]]] | None = None
    allow: bool = False  # permissions.allow holds TOOLS_RULE
    approve: bool = False  # enabledMcpjsonServers holds SERVER (a project's .mcp.json)


def merge(data: dict[str, Any], want: Want, path: str) -> dict[str, Any]:
    """`data` with memdir's entries as `want` says; everything else kept, in its order."""
    data = copy.deepcopy(data)
    if want.server is not None:
        servers = _object(data, "mcpServers", path)
        current = servers.get(SERVER)
        if current is not None and not is_memdir_server(current):
            raise ConflictError(
                f"{path}: mcpServers already has a server named {SERVER!r} that does not run "
                "memdir; nothing was written (rename or remove it, then run setup again)"
            )
        # in place, keeping its position and what the user added to it (an env, a timeout)
        servers[SERVER] = {**current, **want.server} if current is not None else want.server
    if want.hooks is not None:
        hooks = _object(data, "hooks", path)
        for event, groups in want.hooks.items():
            _merge_hooks(_list(hooks, event, path, "hooks"), groups)
            hooks[event] = [g for g in hooks[event] if g is not None]
    if want.allow:
        rules = _list(_object(data, "permissions", path), "allow", path, "permissions")
        if TOOLS_RULE not in rules:
            rules.append(TOOLS_RULE)
    if want.approve:
        approved = _list(data, "enabledMcpjsonServers", path)
        if SERVER not in approved:
            approved.append(SERVER)
    return data


def unmerge(data: dict[str, Any], want: Want, path: str) -> dict[str, Any]:
    """`data` without what memdir added (found by command or exact value); a container
    left empty by that removal goes too, one the user left empty stays."""
    data = copy.deepcopy(data)
    if want.server is not None:
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and is_memdir_server(servers.get(SERVER)):
            del servers[SERVER]
            _drop_if_emptied(data, "mcpServers")
    if want.hooks is not None and isinstance(data.get("hooks"), dict):
        hooks, emptied = data["hooks"], False
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list) or not any(_memdir_hooks(g) for g in groups):
                continue
            hooks[event] = [kept for g in groups if (kept := _without_memdir(g)) is not None]
            _drop_if_emptied(hooks, event)
            emptied = True
        if emptied:
            _drop_if_emptied(data, "hooks")
    if want.allow and isinstance(data.get("permissions"), dict):
        permissions = data["permissions"]
        rules = permissions.get("allow")
        if isinstance(rules, list) and TOOLS_RULE in rules:
            rules.remove(TOOLS_RULE)
            _drop_if_emptied(permissions, "allow")
            _drop_if_emptied(data, "permissions")
    if want.approve:
        approved = data.get("enabledMcpjsonServers")
        if isinstance(approved, list) and SERVER in approved:
            approved.remove(SERVER)
            _drop_if_emptied(data, "enabledMcpjsonServers")
    return data


def _merge_hooks(existing: list[Any], groups: list[dict[str, Any]]) -> None:
    """memdir's hook for one event, in place in `existing`. One already there (wherever
    the user put it: another matcher, a timeout added) keeps its place and gets the
    current command; other memdir hooks of the event go; with none, `groups` is appended.
    A group emptied here becomes None (the caller drops it)."""
    command = groups[0]["hooks"][0]["command"]
    found = [hook for group in existing for hook in _memdir_hooks(group)]
    if not found:
        existing.extend(copy.deepcopy(groups))
        return
    keep = found[0]
    if len(found) == 1 and keep.get("command") == command:
        return  # as it should be: nothing changes
    for index, group in enumerate(existing):
        if _memdir_hooks(group):
            rest = [h for h in group["hooks"] if h is keep or not is_memdir_hook(h)]
            existing[index] = {**group, "hooks": rest} if rest else None
    keep["command"] = command


def _memdir_hooks(group: object) -> list[dict[str, Any]]:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return []
    return [hook for hook in group["hooks"] if is_memdir_hook(hook)]


def _without_memdir(group: object) -> object | None:
    """The matcher group without memdir's hooks; None when nothing else was in it."""
    if not _memdir_hooks(group):
        return group
    assert isinstance(group, dict)
    rest = [hook for hook in group["hooks"] if not is_memdir_hook(hook)]
    return {**group, "hooks": rest} if rest else None


def _drop_if_emptied(container: dict[str, Any], key: str) -> None:
    """Called right after memdir took something out of container[key]."""
    if not container[key]:
        del container[key]


def _object(data: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{key!r} is not a JSON object; nothing was written", path=path, key=key)
    return value


def _list(data: dict[str, Any], key: str, path: str, parent: str = "") -> list[Any]:
    value = data.setdefault(key, [])
    if not isinstance(value, list):
        name = f"{parent}.{key}" if parent else key
        raise ConfigError(f"{name!r} is not a JSON array; nothing was written", path=path, key=name)
    return value


# -- text: parse and render, keeping the file's indent -------------------------------------


def parse(text: str, path: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON ({exc.msg}, column {exc.colno}); nothing was written: fix the "
            "file, then run setup again",
            path=path,
            line=exc.lineno,
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("not a JSON object; nothing was written", path=path)
    return data


def render(data: dict[str, Any], like: str | None) -> str:
    """`data` as JSON indented as the file it replaces was (2 spaces for a new file)."""
    indent: str | int = 2
    newline = True
    if like:
        newline = like.endswith("\n")
        for line in like.splitlines()[1:]:
            stripped = line.lstrip(" \t")
            if stripped and len(stripped) < len(line):
                lead = line[: len(line) - len(stripped)]
                indent = lead if "\t" in lead else len(lead)
                break
    return json.dumps(data, indent=indent, ensure_ascii=False) + ("\n" if newline else "")


# -- where the files are, and applying the change ------------------------------------------


@dataclass(frozen=True)
class Target:
    path: str
    want: Want
    keep_file: bool = False  # never deleted, even when emptied (the host's own state file)


@dataclass(frozen=True)
class Change:
    path: str
    action: str  # created, updated, unchanged, removed (the file deleted)
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action, "dry_run": self.dry_run}


def targets(scope: str, launcher: Sequence[str], cwd: str, env: Mapping[str, str]) -> list[Target]:
    """The files setup edits. Project scope: the project's .mcp.json (the server) and
    .claude/settings.json (hooks, the permission rule, the server's approval). User scope:
    the config Claude Code keeps user-scope servers in (`~/.claude.json`, or
    `$CLAUDE_CONFIG_DIR/.claude.json`, where `claude mcp add --scope user` writes) and the
    user's settings.json (`~/.claude/`, or `$CLAUDE_CONFIG_DIR/`)."""
    from .paths import git_work_tree

    server, hooks = server_entry(launcher), hooks_entry(launcher)
    if scope == "project":
        project = git_work_tree(cwd) or cwd
        return [
            Target(os.path.join(project, ".mcp.json"), Want(server=server)),
            Target(
                os.path.join(project, ".claude", "settings.json"),
                Want(hooks=hooks, allow=True, approve=True),
            ),
        ]
    config_dir = env.get("CLAUDE_CONFIG_DIR") or ""
    home = env.get("HOME") or os.path.expanduser("~")
    return [
        Target(os.path.join(config_dir or home, ".claude.json"), Want(server=server), True),
        Target(
            os.path.join(config_dir or os.path.join(home, ".claude"), "settings.json"),
            Want(hooks=hooks, allow=True),
        ),
    ]


def run(targets: Sequence[Target], *, remove: bool = False, dry_run: bool = False) -> list[Change]:
    """Every file is read and merged before any is written: one that cannot be (invalid
    JSON, a server of another program named memdir) stops the run with nothing changed."""
    planned = [apply(target, remove=remove, dry_run=True) for target in targets]
    if dry_run:
        return planned
    return [apply(target, remove=remove) for target in targets]


def apply(target: Target, *, remove: bool = False, dry_run: bool = False) -> Change:
    """Merge (or unmerge) one file under its folder's lock; write only if it changes."""
    real = os.path.realpath(target.path)  # a dotfiles link is written through, kept a link
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        if remove:
            return Change(target.path, "unchanged", dry_run)  # nothing there to remove from
        if dry_run:
            merge({}, target.want, target.path)
            return Change(target.path, "created", dry_run)
        files.ensure_dir(folder)
    with files.folder_locked(folder, exclusive=not dry_run):
        old = _read(real)
        data = parse(old or "", target.path)
        if remove:
            new_data = unmerge(data, target.want, target.path)
        else:
            new_data = merge(data, target.want, target.path)
        if new_data == data and (old is not None or remove):
            return Change(target.path, "unchanged", dry_run)
        if remove and not new_data and deletable(target.path, target.keep_file):
            if not dry_run:
                delete_emptied(real, ".claude")
            return Change(target.path, "removed", dry_run)
        if not dry_run:
            _write(real, render(new_data, old))
        return Change(target.path, "created" if old is None else "updated", dry_run)


def deletable(path: str, keep_file: bool) -> bool:
    """Whether a file `--remove` left empty may go: not the host's own state file
    (`keep_file`), nor one reached through a link (a dotfiles folder's: the user's)."""
    return not keep_file and not os.path.islink(path)


def delete_emptied(real: str, made: str) -> None:
    """Delete a file `--remove` left empty, and the folder setup made for it (named
    `made`: .claude, .codex) when nothing else is in it: the user's files stay."""
    os.unlink(real)
    folder = os.path.dirname(real)
    if os.path.basename(folder) == made:
        with contextlib.suppress(OSError):  # not empty
            os.rmdir(folder)


def _read(real: str) -> str | None:
    return files.read_for_rewrite(real, root=os.path.dirname(real))


def _write(real: str, text: str) -> None:
    """Atomically, keeping the file's permission bits (~/.claude.json is often 0600)."""
    try:
        mode = os.stat(real).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    with files.atomic_output(real, root=os.path.dirname(real)) as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(text.encode("utf-8"))
