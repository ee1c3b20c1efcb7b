"""What each agent tool returns, as JSON Schema (A1, A2): the MCP server declares these as
the tools' `outputSchema`, and clients (the SDK's among them) check every structured result
against them. They follow the records' `to_dict` (models.py); tests check that each key a
tool returns is declared here, so a new field cannot go undeclared.
"""

from __future__ import annotations

from typing import Any

from .models import APPLIED_ACTIONS, SIMILAR_HOWS

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
OPT_STR = {"type": ["string", "null"]}
OPT_INT = {"type": ["integer", "null"]}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
    }


SIMILAR = _object(
    {
        "kind": {"type": "string", "enum": ["fact", "entry", "procedure"]},
        "ref": {"type": ["integer", "string"], "description": "a fact's id, else a name"},
        "score": NUM,
        "how": {"type": "string", "enum": list(SIMILAR_HOWS)},
        "content": STR,
    }
)
_GUARD = {
    "duplicate": {
        "type": "boolean",
        "description": "true: memory held this already and nothing was written",
    },
    "similar": {"type": "array", "items": SIMILAR, "description": "near duplicates"},
}
_HINT = {"hint": {"type": "string", "description": "what to do next, as a tool call"}}

FACT = _object(
    {
        "id": INT,
        "category": STR,
        "content": STR,
        "status": {"type": "string", "enum": ["active", "superseded", "removed"]},
        "created": STR,
        "updated": STR,
        "supersedes": OPT_INT,
        "superseded_by": OPT_INT,
        "session_id": OPT_STR,
        "surface": OPT_STR,
        "agent": OPT_STR,
        "valid_from": OPT_STR,
        "valid_to": OPT_STR,
        **_GUARD,
        "forked": {
            "type": "array",
            "items": INT,
            "description": "this supersede forked the fact's history: the other versions "
            "that hold beside this one (the hint says how to keep one)",
        },
    },
    _HINT,
)
HOT = _object({"chars": INT, "cap": INT, "cut_chars": INT, "warning": OPT_STR})
PROCEDURE = _object(
    {
        "name": STR,
        "path": STR,
        "content": STR,
        "description": OPT_STR,
        "updated": STR,
        "error": OPT_STR,
        **_GUARD,
        "hint": OPT_STR,
    }
)
HIT = _object(
    {
        "kind": {"type": "string", "enum": ["fact", "procedure", "global", "task", "daily"]},
        "content": STR,
        "score": NUM,
    },
    {
        "id": INT,
        "path": STR,
        "name": STR,
        "category": STR,
        "date": STR,
        "lines": {"type": "array", "items": INT, "minItems": 2, "maxItems": 2},
        "valid_to": STR,
        "lexical_only": {
            "type": "boolean",
            "description": "true: not embedded yet, so ranked by its words alone",
        },
    },
)

OUTPUT: dict[str, dict[str, Any]] = {
    "memory_search": _object(
        {"hits": {"type": "array", "items": HIT}},
        {"note": {"type": "string", "description": "what to know about this search"}},
    ),
    "memory_get": _object(
        {
            "path": STR,
            "from_line": INT,
            "total_lines": INT,
            "lines": {"type": "array", "items": _object({"n": INT, "text": STR})},
        }
    ),
    "memory_recall": _object(
        {
            "text": STR,
            "entries_shown": INT,
            "entries_total": INT,
            "notes_shown": INT,
            "notes_total": INT,
        }
    ),
    # one of the two, by target
    "memory_update": {
        "type": "object",
        "properties": {"fact": FACT, "hot": HOT},
        "minProperties": 1,
        "maxProperties": 1,
    },
    "procedure_write": _object({"procedure": PROCEDURE}),
    "daily_append": _object({"date": STR, "path": STR, "section": STR}),
    "memorize": _object(
        {
            "output": {"type": "string", "description": "the output without its blocks"},
            "applied": {
                "type": "array",
                "items": _object(
                    {
                        "scope": {"type": "string", "enum": ["global", "task"]},
                        "target": STR,
                        "action": {"type": "string", "enum": list(APPLIED_ACTIONS)},
                    },
                    {**_HINT, "similar": _GUARD["similar"]},
                ),
            },
            "warnings": {"type": "array", "items": STR},
        }
    ),
}

# N1 in the server: what its background comparisons of earlier facts by meaning found since
# the last answer, given with whichever answer comes next
LATER = {
    "type": "array",
    "description": "facts stored earlier in this session that the comparison by meaning "
    "(after their answers) found alike others: each names the fact, what it resembles and "
    "what to do",
    "items": _object(
        {"fact": INT, "similar": {"type": "array", "items": SIMILAR}}, {"hint": OPT_STR}
    ),
}
for _schema in OUTPUT.values():
    _schema["properties"]["later"] = LATER
# fact or hot (one of them), and later
OUTPUT["memory_update"]["maxProperties"] = 2
OUTPUT["memory_update"]["oneOf"] = [{"required": ["fact"]}, {"required": ["hot"]}]
