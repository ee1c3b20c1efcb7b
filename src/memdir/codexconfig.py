"""K1 for the Codex CLI: memdir's MCP server and hooks in Codex's config.toml, and what goes
where in AGENTS.md, each as one block between marker lines that memdir alone writes.

The user's own text is never parsed-and-rewritten: setup appends its block (or replaces
the block it wrote before, in place), `--remove` cuts it out, so every other byte -- other
servers, comments, key order -- stays exactly as it was. The result is checked with
tomllib before anything is written: a file that does not parse, a `memdir` server the user
defined outside the block, or hooks written inline where memdir's tables cannot join them,
stop the run with nothing changed. Files are written as hostconfig writes them (under
their folder's lock, atomically); a file that needs no change is not written.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from .errors import ConfigError, ConflictError
from .hostconfig import SERVER, Change, _write, deletable, delete_emptied, is_memdir_server
from .settings import HOOK_EVENTS
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# The events Codex fires that memdir answers (Codex's hook input and replies have Claude
# Code's shape): the boot context at start, recall on a prompt (once turned on), a
# subagent's read-only slice, its writes denied (PreToolUse on memdir's tools only), the
# memorize blocks of the last answer (a subagent's dropped), the session recorded at its
# end. Codex's compaction hooks are not wired: what they send was never recorded here.
EVENTS = tuple(e for e in HOOK_EVENTS if e not in ("PreCompact", "PostCompact"))
TOOLS_MATCHER = "mcp__memdir__.*"  # Codex names memdir's tools mcp__memdir__<tool>
SURFACE = "codex"
# MEMDIR_* the user set reach the server: Codex starts MCP servers with a bare
# environment (HOME, PATH, ... and only the variables named here).
ENV_VARS = ("MEMDIR_STATE_DIR", "MEMDIR_MEMORY_DIR")

TOML_BEGIN = "# >>> memdir: written by `memdir setup codex`; `--remove` takes it out >>>"
TOML_END = "# <<< memdir <<<"
MD_BEGIN = "<!-- memdir: written by `memdir setup codex`; `--remove` takes it out -->"
MD_END = "<!-- /memdir -->"

AGENTS_TEXT = """\
## Memory (memdir)

memdir is your long-term memory; it outlasts this session. Its tools are on the `memdir`
MCP server.

- At the start, memory from earlier sessions is put in front of you by a hook (it begins
  `# memdir: memory from earlier sessions`). If it is not there, call `memory_recall`
  (or read the `boot` prompt) before you start.
- HOT.md (`memory_update`, target `hot`) holds only what every turn needs: who the user
  is, two or three durable preferences, the active project. Keep it short.
- Facts (`memory_update`, target `fact`, with a category) hold everything else worth
  keeping: decisions, conventions, people, environments.
- Procedures (`procedure_write`) hold how-to knowledge: the steps to do a task again.
- Entries (`memorize`) hold one event or finding with its context; the daily log
  (`daily_append`) what happened today.
- Search before you ask the user something they may have told you (`memory_search`).
"""


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    import json

    return json.dumps(value, ensure_ascii=False)


def toml_block(launcher: Sequence[str]) -> str:
    """memdir's lines in config.toml: the server (its tools approved: Codex asks before
    an MCP tool that writes, and `codex exec` cannot ask) and one command hook per event."""
    args = ", ".join(_toml_string(a) for a in [*launcher[1:], "serve"])
    env_vars = ", ".join(_toml_string(v) for v in ENV_VARS)
    lines = [
        TOML_BEGIN,
        f"[mcp_servers.{SERVER}]",
        f"command = {_toml_string(launcher[0])}",
        f"args = [{args}]",
        f"env_vars = [{env_vars}]",
        'default_tools_approval_mode = "approve"',
    ]
    for event in EVENTS:
        command = shlex.join([*launcher, "hook", event, "--host", SURFACE])
        lines += ["", f"[[hooks.{event}]]"]
        if event == "PreToolUse":
            lines.append(f"matcher = {_toml_string(TOOLS_MATCHER)}")
        lines += [
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f"command = {_toml_string(command)}",
        ]
    lines.append(TOML_END)
    return "\n".join(lines) + "\n"


def agents_block() -> str:
    return f"{MD_BEGIN}\n{AGENTS_TEXT}{MD_END}\n"


# -- the block in a text ---------------------------------------------------------------------


def _find(text: str, begin: str, end: str, path: str) -> tuple[int, int] | None:
    """Where memdir's block is (start of its first line, end of its last), or None."""
    start = _line_at(text, begin)
    if start is None:
        return None
    stop = _line_at(text, end, start)
    if stop is None:
        raise ConfigError(
            f"memdir's block begins but does not end ({end!r} is missing); nothing was "
            "written: restore the line or delete the block, then run setup again",
            path=path,
        )
    stop = text.find("\n", stop)
    return start, len(text) if stop < 0 else stop + 1


def _line_at(text: str, line: str, after: int = 0) -> int | None:
    """The offset of the first line equal to `line` (from `after`), or None."""
    at = after
    while True:
        at = text.find(line, at)
        if at < 0:
            return None
        ends = at + len(line)
        if (at == 0 or text[at - 1] == "\n") and (ends == len(text) or text[ends] in "\r\n"):
            return at
        at = ends


def with_block(text: str, block: str, begin: str, end: str, path: str) -> str:
    """`text` holding `block`: the block there before replaced in place, else appended
    after one blank line."""
    found = _find(text, begin, end, path)
    if found is not None:
        return text[: found[0]] + block + text[found[1] :]
    if not text:
        return block
    return text + ("" if text.endswith("\n") else "\n") + "\n" + block


def without_block(text: str, begin: str, end: str, path: str) -> str:
    """`text` without memdir's block and the blank line setup put before it."""
    found = _find(text, begin, end, path)
    if found is None:
        return text
    start, stop = found
    head, tail = text[:start], text[stop:]
    if head.endswith("\n\n"):
        head = head[:-1]
    elif not tail and head.endswith("\n") and not head.strip():
        head = ""
    return head + tail


def check_toml(text: str, path: str, outside: str) -> None:
    """The new config.toml parses, and the memdir server in it is memdir's own block's:
    one the user defined (`outside` is the text without the block) is theirs to keep."""
    import tomllib

    try:
        before = tomllib.loads(outside)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"not valid TOML ({exc}); nothing was written: fix the file, then run setup again",
            path=path,
        ) from None
    server = (before.get("mcp_servers") or {}).get(SERVER)
    if server is not None:
        whose = "runs memdir" if is_memdir_server(server) else "does not run memdir"
        raise ConflictError(
            f"{path}: mcp_servers already has a server named {SERVER!r} that {whose}, "
            "outside memdir's block; nothing was written (remove it, then run setup again)"
        )
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"memdir's tables cannot be added to this file ({exc}): hooks or mcp_servers "
            "are written inline there; nothing was written",
            path=path,
        ) from None


# -- where the files are, and applying the change ----------------------------------------------


@dataclass(frozen=True)
class Target:
    path: str
    block: str
    begin: str
    end: str
    toml: bool = False
    keep_file: bool = False  # never deleted, even when emptied (the user's own config)


def codex_home(env: Mapping[str, str]) -> str:
    home = env.get("HOME") or os.path.expanduser("~")
    return env.get("CODEX_HOME") or os.path.join(home, ".codex")


def targets(scope: str, launcher: Sequence[str], cwd: str, env: Mapping[str, str]) -> list[Target]:
    """Project scope: the project's .codex/config.toml (Codex loads it once the project
    is trusted) and its AGENTS.md. User scope: $CODEX_HOME/config.toml and
    $CODEX_HOME/AGENTS.md (~/.codex without CODEX_HOME), for every project."""
    from .paths import git_work_tree

    if scope == "project":
        root = git_work_tree(cwd) or cwd
        config, agents, keep = os.path.join(root, ".codex", "config.toml"), root, False
    else:
        folder = codex_home(env)
        config, agents, keep = os.path.join(folder, "config.toml"), folder, True
    return [
        Target(config, toml_block(launcher), TOML_BEGIN, TOML_END, toml=True, keep_file=keep),
        Target(os.path.join(agents, "AGENTS.md"), agents_block(), MD_BEGIN, MD_END),
    ]


def run(targets: Sequence[Target], *, remove: bool = False, dry_run: bool = False) -> list[Change]:
    """Every file is checked before any is written (hostconfig.run's rule)."""
    planned = [apply(target, remove=remove, dry_run=True) for target in targets]
    if dry_run:
        return planned
    return [apply(target, remove=remove) for target in targets]


def apply(target: Target, *, remove: bool = False, dry_run: bool = False) -> Change:
    """Add (or take out) memdir's block in one file under its folder's lock; write only
    if it changes."""
    real = os.path.realpath(target.path)  # a dotfiles link is written through, kept a link
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        if remove:
            return Change(target.path, "unchanged", dry_run)  # nothing there to remove from
        if dry_run:
            _planned(target, None, remove)
            return Change(target.path, "created", dry_run)
        files.ensure_dir(folder)
    with files.folder_locked(folder, exclusive=not dry_run):
        old = files.read_for_rewrite(real, root=folder)
        new = _planned(target, old, remove)
        if new == (old or "") and (old is not None or remove):
            return Change(target.path, "unchanged", dry_run)
        if remove and not new.strip() and deletable(target.path, target.keep_file):
            if not dry_run:
                delete_emptied(real, ".codex")
            return Change(target.path, "removed", dry_run)
        if not dry_run:
            _write(real, new)
        return Change(target.path, "created" if old is None else "updated", dry_run)


def _planned(target: Target, old: str | None, remove: bool) -> str:
    text = old or ""
    outside = without_block(text, target.begin, target.end, target.path)
    if remove:
        return outside
    new = with_block(text, target.block, target.begin, target.end, target.path)
    if target.toml:
        check_toml(new, target.path, outside)
    return new
