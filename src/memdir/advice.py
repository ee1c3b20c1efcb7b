"""What to do next, said in the caller's own terms (A2, A3, C): every hint memdir gives names
a call that works as written on the surface the caller is using.

    MCP, tools.call_tool: `memory_update {"action": "supersede", "supersedes": 3, ...}`
    the command line:     `memdir fact supersede 3 '<new text>'`
    the Python library:   `memory.supersede_fact(3, '<new text>')`

A front end says once which surface it is (`use`): the CLI's main, tools.call_tool and the
MCP server's handlers; without one it is the library. Messages anywhere in memdir render
their advice with the functions below, so no front end rewrites text. A value in angle
brackets ("<new text>", "<words>") is for the caller to fill in; all else is meant as
written. An operation that no MCP tool performs is addressed to the person instead ("ask
the user to run ..."): a hint never names a tool that does not exist.

An MCP call is a tool name and its JSON arguments. No hint holds, nor decodes to, a live
memorize marker (R4, markers.py): an entry is written over MCP by the memorize tool's
structured `blocks`, and any marker in an argument's text is defanged. On the command line,
where an entry is written by piping a block into `memdir memorize`, shell quotes split the
keyword, `'MEMDIR_MEMORIZE''_BEGIN'`: inert as printed, whole only when the shell runs it.

Cheap to import (the CLI's cold path): contextvars only; json and re when a hint renders.
"""

from __future__ import annotations

import contextvars

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

SURFACES = ("python", "cli", "mcp")
NEW_TEXT = "<new text>"
WORDS = "<words>"
DESCRIPTION = "<one-line description>"
FILE = "<file>"

# (surface, how the command line is started: "memdir" plus the --state-dir it was given)
_CURRENT: contextvars.ContextVar[tuple[str, tuple[str, ...]]] = contextvars.ContextVar(
    "memdir_surface", default=("python", ("memdir",))
)


def use(surface: str, command: Sequence[str] = ("memdir",)) -> contextvars.Token[Any]:
    """Render advice for `surface` from now on (in this context); `command`: the words that
    start memdir on the command line, e.g. with the --state-dir the user gave."""
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}")
    return _CURRENT.set((surface, tuple(command)))


def reset(token: contextvars.Token[Any]) -> None:
    _CURRENT.reset(token)


def surface() -> str:
    return _CURRENT.get()[0]


def running_as(surface: str, run: Callable[..., Any], *args: Any) -> Any:
    """run(*args) with advice for `surface`, e.g. on a worker thread of the MCP server."""
    token = use(surface)
    try:
        return run(*args)
    finally:
        reset(token)


# -- facts -------------------------------------------------------------------------------


def fact_add(content: str = "<fact>", category: str = "<category>") -> str:
    return _call(
        ("memory_update", {"action": "set", "category": category, "content": content}),
        ("fact", "add", content, "-c", category),
        ("memory.add_fact", content, category),
    )


def fact_supersede(fact_id: int | str, content: str = NEW_TEXT) -> str:
    return _call(
        ("memory_update", {"action": "supersede", "supersedes": fact_id, "content": content}),
        ("fact", "supersede", fact_id, content),
        ("memory.supersede_fact", fact_id, content),
    )


def fact_remove(fact_id: int | str) -> str:
    return _call(
        ("memory_update", {"action": "remove", "id": fact_id}),
        ("fact", "rm", fact_id),
        ("memory.remove_fact", fact_id),
    )


def fact_show(fact_id: int | str) -> str:
    return _call(None, ("fact", "show", fact_id), ("memory.get_fact", fact_id))


def fact_history(fact_id: int | str) -> str:
    return _call(None, ("fact", "history", fact_id), ("memory.fact_history", fact_id))


def search(query: str = WORDS, kind: str | None = None) -> str:
    kinds = {"kinds": [kind]} if kind else {}
    return _call(
        ("memory_search", {"query": query, **kinds}),
        ("search", query, *(("--kind", kind) if kind else ())),
        ("memory.search", query, kinds),
    )


# -- hot memory --------------------------------------------------------------------------


def hot_show() -> str:
    return _call(("memory_get", {"path": "HOT.md"}), ("hot", "show"), ("memory.hot",))


def hot_set(content: str = "<the whole text>") -> str:
    return _call(
        ("memory_update", {"target": "hot", "action": "set", "content": content}),
        ("hot", "set", content),
        ("memory.hot_set", content),
    )


def hot_remove(line: str = "<line>") -> str:
    return _call(
        ("memory_update", {"target": "hot", "action": "remove", "content": line}),
        ("hot", "rm", line),
        ("memory.hot_remove", {"line": line}),
    )


# -- global entries and procedures -------------------------------------------------------


def entry_write(
    name: str,
    description: str = DESCRIPTION,
    content: str = NEW_TEXT,
    prefix: str = "MEMDIR",
) -> str:
    """Entries are written with a memorize block over MCP and on the command line."""
    import json

    block = json.dumps(
        {"scope": "global", "name": name, "description": description, "content": content},
        ensure_ascii=False,
    )
    begin, end = f"{prefix}_MEMORIZE_BEGIN", f"{prefix}_MEMORIZE_END"
    current, command = _CURRENT.get()
    if current == "cli":
        words = ["printf", "%s\\n", begin, block, end]
        return f"`{' '.join(map(_shell, words))} | {' '.join(map(_shell, command))} memorize`"
    item = {"scope": "global", "name": name, "description": description, "content": content}
    return _call(
        ("memorize", {"blocks": [item]}),
        (),
        ("memory.write_entry", name, description, content),
    )


def entry_show(name: str) -> str:
    return _call(
        ("memory_get", {"path": f"global/{name}.md"}), ("show", name), ("memory.entry", name)
    )


def entry_list() -> str:
    return _call(("memory_get", {"path": "MEMORY.md"}), ("list",), ("memory.entries",))


def entry_remove(name: str) -> str:
    return _call(None, ("rm", name), ("memory.remove_entry", name))


def procedure_write(name: str, content: str = NEW_TEXT) -> str:
    return _call(
        ("procedure_write", {"name": name, "content": content}),
        ("procedure", "write", name, FILE),
        ("memory.write_procedure", name, content),
    )


def procedure_list() -> str:
    return _call(
        ("memory_search", {"query": WORDS, "kinds": ["procedure"]}),
        ("procedure", "list"),
        ("memory.procedures",),
    )


def procedure_remove(name: str) -> str:
    """No surface removes a procedure: its file is deleted (the index follows, G4)."""
    if surface() == "mcp":
        return f"ask the user to delete procedures/{name}.md"
    return f"delete procedures/{name}.md under the memory root"


def get(path: str) -> str:
    return _call(("memory_get", {"path": path}), ("get", path), ("memory.get", path))


# -- tasks, sessions, the store ----------------------------------------------------------


def memorize_with_task(task: str = "<task id>") -> str:
    return _call(
        ("memorize", {"output": "<output>", "task": task}),
        ("memorize", "--task", task),
        ("memory.ingest", "<output>", {"task": task}),
    )


def task_start(task: str = "<task id>") -> str:
    return _call(None, ("task", "start", task), ("memory.start_task", task))


def task_end(task: str = "<task id>", state: str = "cancelled") -> str:
    return _call(None, ("task", "end", task, "--state", state), ("memory.end_task", task, state))


def session_start() -> str:
    return _call(None, ("session", "start"), ("memory.start_session",))


def sessions() -> str:
    return _call(None, ("sessions",), ("memory.sessions",))


def reindex() -> str:
    return _call(None, ("reindex",), ("memory.reindex",))


def prune() -> str:
    return _call(None, ("prune",), ("memory.prune",))


def doctor(fix: bool = False) -> str:
    return _call(
        None,
        ("doctor", *(("--fix",) if fix else ())),
        ("memdir.curation.doctor.run", "memory", {"fix": True} if fix else {}),
    )


def distill_done() -> str:
    return _call(None, ("distill", "--done"), ("memory.distill_done",))


# -- rendering ---------------------------------------------------------------------------


def _call(
    mcp: tuple[str, dict[str, Any]] | None,
    cli: tuple[Any, ...],
    python: tuple[Any, ...],
) -> str:
    """The call for the current surface, in backticks. `python` is (callable, *positional
    arguments, {keyword arguments}?); a bare "memory" argument is the Memory itself."""
    current, command = _CURRENT.get()
    if current == "cli" or (current == "mcp" and mcp is None):
        line = " ".join(_shell(str(word)) for word in (*command, *cli))
        return f"ask the user to run `{line}`" if current == "mcp" else f"`{line}`"
    if current == "mcp":
        assert mcp is not None
        return f"`{mcp[0]} {_json(mcp[1])}`"
    method, *args = python
    kwargs: dict[str, Any] = args.pop() if args and isinstance(args[-1], dict) else {}
    shown = [a if a == "memory" else repr(a) for a in args]
    shown += [f"{key}={value!r}" for key, value in kwargs.items()]
    return f"`{method}({', '.join(shown)})`"


# R4: a live marker in a hint could be echoed back into an output and open a block
_MARKER = r"(_MEMORIZE)(_(?:BEGIN|END))"  # split inside the keyword markers.defang looks for


def _json(arguments: dict[str, Any]) -> str:
    import json

    from .markers import defang  # R4: an argument may quote stored text

    return defang(json.dumps(arguments, ensure_ascii=False))


_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-./:=@%+,")


def _shell(word: str) -> str:
    """A POSIX shell word; a marker keyword is split by quotes, inert as written (R4)."""
    if word and all(c in _SAFE for c in word):
        return word  # no "_" among them: no marker either
    import re

    quoted = "'" + word.replace("'", "'\\''") + "'"
    return re.sub(_MARKER, r"\1''\2", quoted)
