"""Agent tools (A1, A3): plain functions over a Memory, each with a JSON schema whose
description teaches the agent what goes where (H6). The MCP server serves exactly these;
anyone doing direct function calling can import them:

    from memdir import Memory
    from memdir.tools import call_tool, tool_schemas
    schemas = tool_schemas()                       # JSON-ready, for the model
    result = call_tool(Memory(), "memory_search", {"query": "deploy"})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from . import advice
from .errors import ValidationError
from .markers import defang, inert
from .memory import Memory
from .models import CATEGORIES
from .numbers import INT64_MAX, MAX_CHARS, MAX_LINES, check_int, check_number
from .tool_output import OUTPUT
from .types import Category, Kind, SearchMode


class Tool(NamedTuple):
    """A tool and what an MCP client is told of it: a display title, and hints of whether it
    writes (`read_only`), may overwrite or delete what memory holds (`destructive`), and
    changes nothing more when repeated with the same arguments (`idempotent`). None of them
    reaches outside memory (openWorldHint false)."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    destructive: bool
    idempotent: bool
    run: Callable[..., dict[str, Any]]

    @property
    def output_schema(self) -> dict[str, Any]:
        return OUTPUT[self.name]

    def schema(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


def memory_search(
    memory: Memory,
    query: str,
    category: Category | None = None,
    limit: int = 10,
    since: str | None = None,
    min_score: float | None = None,
    kinds: list[Kind] | None = None,
    mode: SearchMode | None = None,
    as_of: str | None = None,
) -> dict[str, Any]:
    hits = memory.search(
        query,
        category=category,
        limit=limit,
        since=since,
        kinds=kinds,
        mode=mode,
        min_score=min_score,
        as_of=as_of,
    )
    # R4: what an agent is handed from memory is inert, whatever it echoes back
    result: dict[str, Any] = {
        "hits": [hit._replace(content=defang(hit.content)).to_dict() for hit in hits]
    }
    notice = memory.search_notice()
    if notice:
        result["note"] = notice
    return result


def memory_update(
    memory: Memory,
    target: str = "fact",
    action: str = "set",
    category: Category | None = None,
    content: str | None = None,
    supersedes: int | None = None,
    id: int | None = None,
    valid_from: str | None = None,
) -> dict[str, Any]:
    if target == "hot":
        return _hot_update(memory, action, content)
    if action == "set":
        fact = memory.add_fact(
            _required(content, "content", "set"),
            _required(category, "category", "set"),
            valid_from=valid_from,
        )
    elif action == "supersede":
        old = _required(supersedes, "supersedes", "supersede")
        text = _required(content, "content", "supersede")
        fact = memory.supersede_fact(old, text, category, valid_from=valid_from)
    elif action == "remove":
        fact = memory.remove_fact(_required(id, "id", "remove"))
    else:
        raise ValidationError(f"facts take action set, supersede or remove, not {action!r}")
    return {"fact": fact.to_dict()}


def _hot_update(memory: Memory, action: str, content: str | None) -> dict[str, Any]:
    text = _required(content, "content", action)
    if action == "set":
        result = memory.hot_set(text)
    elif action == "append":
        result = memory.hot_append(text)
    elif action == "remove":
        result = memory.hot_remove(line=text)
    else:
        raise ValidationError(
            f"hot memory takes action append, set or remove, not {action!r}; "
            "to replace a line, remove it and append the new one"
        )
    return {"hot": result.to_dict()}


def procedure_write(memory: Memory, name: str, content: str) -> dict[str, Any]:
    return {"procedure": memory.write_procedure(name, content).to_dict()}


def memorize(
    memory: Memory,
    output: str | None = None,
    task: str | None = None,
    workflow: str | None = None,
    step: str | None = None,
    blocks: list[Any] | None = None,
) -> dict[str, Any]:
    if output is None and blocks is None:
        raise ValidationError("memorize needs 'output' (text holding blocks) or 'blocks'")
    return memory.ingest(
        output or "", task=task, workflow=workflow, step=step, blocks=blocks
    ).to_dict()


def memory_recall(
    memory: Memory,
    task: str | None = None,
    tiers: list[str] | None = None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    policy = None if tiers is None else {"recall": tiers}
    return memory.recall(task=task, policy=policy, max_chars=max_chars).to_dict()


def memory_get(
    memory: Memory, path: str, from_line: int = 1, lines: int | None = None
) -> dict[str, Any]:
    found = memory.get(path, from_line=from_line, lines=lines)
    return found._replace(lines=[(n, defang(text)) for n, text in found.lines]).to_dict()


def daily_append(memory: Memory, text: str, section: str | None = None) -> dict[str, Any]:
    return memory.daily_append(text, section=section).to_dict()


def _required(value: Any, field: str, action: str) -> Any:
    if value is None:
        raise ValidationError(f"action {action!r} needs {field!r}")
    return value


_SEARCH = Tool(
    name="memory_search",
    title="Search memory",
    description=(
        "Search all of long-term memory — facts, procedures, global entries, task notes and "
        "daily logs — with a question in plain words (FTS5 syntax also works: AND, OR, NOT, "
        '"exact phrase", prefix*). Use it before asking the user something they may have told '
        "you already, and before a task you may have a procedure for. Each hit says its kind, "
        "its fact id or its file path and line range (read more of it with memory_get), a "
        "snippet, a score and a date."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for, e.g. 'deploy staging'."},
            "category": {
                "type": "string",
                "enum": list(CATEGORIES),
                "description": "Only facts of this category.",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
            "since": {
                "type": "string",
                "description": "ISO date: only what was written from then on.",
            },
            "min_score": {
                "type": "number",
                "minimum": -10,
                "maximum": 10,
                "description": (
                    "Drop semantic hits below this score (default 0.5; 0: as alike as "
                    "unrelated memories, 1: as the closest 1% of them)."
                ),
            },
            "kinds": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": ["fact", "procedure", "global", "task", "daily"],
                },
                "description": "Only these kinds of hit (default all).",
            },
            "mode": {
                "type": "string",
                "enum": ["lexical", "semantic", "hybrid"],
                "description": "Default: hybrid when local embeddings are installed.",
            },
            "as_of": {
                "type": "string",
                "description": (
                    "ISO date or time: the facts that were true then, superseded ones "
                    "included (facts only; a date means its end)."
                ),
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    read_only=True,
    destructive=False,
    idempotent=True,
    run=memory_search,
)

_UPDATE = Tool(
    name="memory_update",
    title="Update a fact or hot memory",
    description=(
        "Write long-term memory. Two places, for different things:\n"
        "- target 'hot' (HOT.md) is shown at the start of every session and capped at 5,250 "
        "characters. Keep only what every turn needs: who the user is (name, timezone, role), "
        "two or three durable preferences, a one-line pointer to the active project. Actions: "
        "append (add a line), set (replace the whole file), remove (the line given as content).\n"
        "- target 'fact' (the archive, searched on demand) takes everything else, one fact per "
        "call with a category: preference (how the user likes things), convention (how things "
        "are done here), decision (what was decided and why), learning (what you found out). "
        "Actions: set (a new fact), supersede (replace fact `supersedes` by `content` when it "
        "changed; the old one stays in history; if another writer superseded it first, both "
        "versions are kept and `forked` names the other: the hint says how to keep one), "
        "remove (fact `id`, when it was wrong). A fact "
        "the archive holds already is not stored twice: the answer names it (duplicate: true) "
        "and a similar one is named in `similar` (one alike by meaning may be named later, "
        "in `later` of another answer); supersede it when it changed.\n"
        "Never store secrets, passwords or tokens."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": ["fact", "hot"], "default": "fact"},
            "action": {
                "type": "string",
                "enum": ["set", "supersede", "remove", "append"],
                "default": "set",
            },
            "category": {
                "type": "string",
                "enum": list(CATEGORIES),
                "description": "Required for a new fact.",
            },
            "content": {"type": "string", "description": "The fact, or the hot-memory text."},
            "supersedes": {
                "type": "integer",
                "minimum": 1,
                "maximum": INT64_MAX,
                "description": "Id of the fact being replaced.",
            },
            "id": {
                "type": "integer",
                "minimum": 1,
                "maximum": INT64_MAX,
                "description": "Id of the fact to remove.",
            },
            "valid_from": {
                "type": "string",
                "description": "ISO date: when the fact began to hold (default now).",
            },
        },
        "additionalProperties": False,
    },
    read_only=False,
    destructive=True,
    idempotent=False,
    run=memory_update,
)

_PROCEDURE = Tool(
    name="procedure_write",
    title="Write a procedure",
    description=(
        "Save a reusable procedure: how to do a recurring task, step by step (deploy, release, "
        "triage...). Markdown, optionally with YAML frontmatter (description, tags). Writing an "
        "existing name replaces it. Facts about the user or project go to memory_update."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$",
                "maxLength": 64,
                "description": "kebab-case, e.g. 'deploy-staging'.",
            },
            "content": {"type": "string", "description": "The procedure, in markdown."},
        },
        "required": ["name", "content"],
        "additionalProperties": False,
    },
    read_only=False,
    destructive=True,
    idempotent=True,
    run=procedure_write,
)

_MEMORIZE = Tool(
    name="memorize",
    title="Memorize blocks",
    description=(
        "Store what to remember, as blocks. Pass `blocks`, a list of objects such as "
        '{"scope": "global", "name": "ci-duration", "description": "CI takes ~12 min", '
        '"content": "..."}; or pass `output`, text (your answer) in which each block is one '
        "JSON object or list between a line MEMDIR_MEMORIZE_ + BEGIN and a line "
        "MEMDIR_MEMORIZE_ + END (each one word; split here so that this text is no marker "
        "itself). scope 'task' (the default) adds a note to the current task, seen by later "
        "steps of the task and its subtasks; scope 'global' creates or updates a durable "
        "entry (kebab-case name, one-line description) listed in every session's long-term "
        "index. Returns the output without the blocks, what was stored, and a warning for "
        "each block that was not."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "output": {"type": "string", "description": "Text holding the blocks."},
            "blocks": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "scope": {"type": "string", "enum": ["task", "global"]},
                        "name": {"type": "string"},
                        "description": {"type": "string"},
                        "content": {"type": "string"},
                    },
                    "required": ["content"],
                },
                "description": "The blocks themselves, instead of text holding them.",
            },
            "task": {"type": "string", "description": "The current task, for task notes."},
            "workflow": {"type": "string"},
            "step": {"type": "string"},
        },
        "additionalProperties": False,
    },
    read_only=False,
    destructive=True,
    idempotent=True,
    run=memorize,
)

_RECALL = Tool(
    name="memory_recall",
    title="Recall the memory a step starts with",
    description=(
        "The memory a step starts with: hot memory, the index of durable entries, and the "
        "notes of the task and its parent tasks, within a character budget. Call it at the "
        "start of a task (with its id) when your client did not inject it already."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "The current task id."},
            "tiers": {
                "type": "array",
                "items": {"type": "string", "enum": ["task", "global"]},
                "description": "Which sections to include (default both).",
            },
            "max_chars": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_CHARS,
                "description": "Budget of the two sections.",
            },
        },
        "additionalProperties": False,
    },
    read_only=True,
    destructive=False,
    idempotent=True,
    run=memory_recall,
)

_GET = Tool(
    name="memory_get",
    title="Read lines of a memory file",
    description=(
        "Read exact lines of a memory file — after a search or recall names one — instead of "
        "the whole file: a global entry (global/<name>.md), a procedure, a task's notes "
        "(tasks/<id>.md), a daily log (daily/YYYY-MM-DD.md), HOT.md, MEMORY.md. The path is "
        "relative to the memory root; lines come back numbered."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "e.g. 'global/ci-duration.md'"},
            "from_line": {"type": "integer", "minimum": 1, "maximum": MAX_LINES, "default": 1},
            "lines": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LINES,
                "description": "Default: to the end.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    read_only=True,
    destructive=False,
    idempotent=True,
    run=memory_get,
)

_DAILY = Tool(
    name="daily_append",
    title="Append to today's log",
    description=(
        "Log what happened today in the daily log (one markdown file per local day): an "
        "event, a conversation, a result. It lands under a `## HH:MM` heading, or under "
        "`section` (e.g. 'Decisions'); section 'Evolution Log' is for how you yourself "
        "changed (what you learned to do differently) and always stays last. Durable facts "
        "go to memory_update instead."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The log entry, markdown."},
            "section": {"type": "string", "description": "A section name instead of the time."},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    read_only=False,
    destructive=False,
    idempotent=False,
    run=daily_append,
)

TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (_SEARCH, _GET, _RECALL, _UPDATE, _PROCEDURE, _DAILY, _MEMORIZE)
}


def tools(read_only: bool = False) -> list[Tool]:
    """The tool set; a subagent session gets only the read-only tools (U2)."""
    return [tool for tool in TOOLS.values() if tool.read_only or not read_only]


def tool_schemas(read_only: bool = False) -> list[dict[str, Any]]:
    return [tool.schema() for tool in tools(read_only)]


def call_tool(memory: Memory, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Validate the arguments against the tool's schema, then run it. Errors are MemdirError.
    The caller speaks in tool calls: every hint and error names tool calls (advice.py).
    What it returns is inert (R4): no string in it holds a live memorize marker."""
    result = advice.running_as("mcp", _call_tool, memory, name, arguments)
    # the ignore below: inert() keeps its argument's shape (a dict here) but is typed object
    inert_result: dict[str, Any] = inert(result)  # type: ignore[assignment]
    return inert_result


def _call_tool(memory: Memory, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    tool = TOOLS.get(name)
    if tool is None:
        raise ValidationError(f"unknown tool {name!r}: the tools are {', '.join(TOOLS)}")
    if not tool.read_only and memory.read_only:
        from .sessions import refuse_if_subagent

        refuse_if_subagent(memory.session)
    args = dict(arguments or {})
    check_arguments(tool, args)
    return tool.run(memory, **args)


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_arguments(tool: Tool, args: dict[str, Any]) -> None:
    """The subset of JSON Schema our schemas use: required, types, enums, no extras."""
    properties = tool.input_schema["properties"]
    for key in args:
        if key not in properties:
            raise ValidationError(
                f"{tool.name} has no argument {key!r}; it takes {', '.join(properties)}"
            )
    for key in tool.input_schema.get("required", []):
        if args.get(key) is None:
            raise ValidationError(f"{tool.name} needs the argument {key!r}")
    for key, value in args.items():
        if value is None:
            continue
        spec = properties[key]
        kind = spec["type"]
        if not isinstance(value, _TYPES[kind]) or (kind != "boolean" and isinstance(value, bool)):
            raise ValidationError(
                f"{tool.name}: {key!r} must be of type {kind}, not {_short(value)}"
            )
        if kind == "integer":  # every number is range-checked here, whatever the tool does
            check_int(
                value,
                f"{tool.name} argument {key!r}",
                low=spec.get("minimum", -INT64_MAX - 1),
                high=spec.get("maximum", INT64_MAX),
            )
        if kind == "number":
            check_number(
                value,
                f"{tool.name} argument {key!r}",
                low=spec.get("minimum", -1e300),
                high=spec.get("maximum", 1e300),
            )
        if "enum" in spec and value not in spec["enum"]:
            raise ValidationError(
                f"{tool.name}: {key!r} must be one of {', '.join(spec['enum'])}, not {value!r}"
            )
