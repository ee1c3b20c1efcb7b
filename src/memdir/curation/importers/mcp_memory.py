"""The MCP reference memory server's knowledge graph (N4) -> global entries.

Its file (`memory.jsonl`; older versions `memory.json`, same content) holds one JSON
object a line:

    {"type": "entity", "name": "John_Smith", "entityType": "person",
     "observations": ["Speaks Spanish"]}
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}

Each entity becomes an entry named after it (description "<entityType>: <name>"): its
observations as bullets, then a "## Relations" list of its relations, both directions. A
malformed line is skipped with its line number; a file with no readable line at all is
not this format.
"""

from __future__ import annotations

import json
import os

from ...errors import ValidationError
from .plan import EntryItem, Plan, one_line, read_source

EXPECTED = (
    'the MCP memory server\'s memory.jsonl (one JSON object a line, "type": "entity" or "relation")'
)
FILES = ("memory.jsonl", "memory.json")


class _Entity:
    def __init__(self, name: str, kind: str, line: int) -> None:
        self.name, self.kind, self.line = name, kind, line
        self.observations: list[str] = []
        self.relations: list[str] = []


def read(path: str) -> Plan:
    file = _locate(path)
    text = read_source(file, EXPECTED)
    plan = Plan()
    entities: dict[str, _Entity] = {}
    relations: list[tuple[int, str, str, str]] = []
    bad: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        problem = _record(line, number, entities, relations)
        if problem is not None:
            bad.append((number, problem))
    if not entities and not relations:
        first = f" (line {bad[0][0]}: {bad[0][1]})" if bad else " (it is empty)"
        raise ValidationError(f"{path} is not an MCP memory file{first}: expected {EXPECTED}")
    source = os.path.basename(file)
    for number, problem in bad:
        plan.skip("entry", f"{source}:{number}", f"malformed line: {problem}")
    names = {key: plan.unique_name(key) for key in entities}
    for number, start, kind, end in relations:
        if start not in entities and end not in entities:
            plan.skip(
                "relation",
                f"{source}:{number}",
                f"{start} {kind} {end}: neither end is an entity of the file",
            )
            continue
        triple = f"{start} {kind} {end}"
        for this in dict.fromkeys((start, end)):
            if this in entities:
                other = end if this == start else start
                seen = f" (entry `{names[other]}`)" if other in entities and other != this else ""
                entities[this].relations.append(f"- {triple}{seen}")
    for key, entity in entities.items():
        body = [f"# {entity.name}", ""]
        body += [f"- {obs}" for obs in entity.observations] or ["(no observations)"]
        if entity.relations:
            body += ["", "## Relations", "", *dict.fromkeys(entity.relations)]
        plan.items.append(_entry(names[key], entity, "\n".join(body) + "\n", source))
    return plan


def _entry(name: str, entity: _Entity, content: str, source: str) -> EntryItem:
    description = one_line(f"{entity.kind}: {entity.name}")
    return EntryItem(name, description, content, f"{source}:{entity.line}")


def _locate(path: str) -> str:
    if os.path.isdir(path):
        for name in FILES:
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        raise ValidationError(f"{path} holds no memory.jsonl: expected {EXPECTED}")
    return path


def _record(
    line: str,
    number: int,
    entities: dict[str, _Entity],
    relations: list[tuple[int, str, str, str]],
) -> str | None:
    """Take in one line; a one-line reason when it cannot be read."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        return f"not JSON ({exc.args[0].split(':')[0]})"
    if not isinstance(data, dict):
        return "not a JSON object"
    kind = data.get("type")
    if kind == "entity":
        name, entity_type = data.get("name"), data.get("entityType")
        observations = data.get("observations", [])
        if not isinstance(name, str) or not name.strip():
            return "an entity without a name"
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            return f"entity {name}: observations must be a list of strings"
        kind_text = entity_type if isinstance(entity_type, str) and entity_type else "entity"
        entity = entities.setdefault(name, _Entity(name, kind_text, number))
        entity.observations += [o for o in observations if o.strip()]
        return None
    if kind == "relation":
        ends = (data.get("from"), data.get("relationType"), data.get("to"))
        if not all(isinstance(v, str) and v.strip() for v in ends):
            return "a relation needs from, to and relationType"
        start, rel, end = (str(v) for v in ends)
        relations.append((number, start, rel, end))
        return None
    return f"unknown type {kind!r} (expected entity or relation)"
