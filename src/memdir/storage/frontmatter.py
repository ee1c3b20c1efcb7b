"""YAML frontmatter: a `---` line, YAML, a `---` line, then the markdown body.

PyYAML is imported only here and only when a file actually has frontmatter.
"""

from __future__ import annotations

from ..errors import ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FENCE = "---"
MAX_CHARS = 64 * 1024  # frontmatter is a few keys; a bigger block is not ours to parse
MAX_DEPTH = 32  # nesting of lists and maps


def split(text: str) -> tuple[str | None, str]:
    """(raw YAML or None, body). Text without an opening fence is all body."""
    if not text.startswith(FENCE):
        return None, text
    lines = text.split("\n")
    if lines[0].strip() != FENCE:
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() == FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise ValidationError(
        "frontmatter opened with '---' on line 1 is never closed: add a '---' line"
    )


def parse(text: str, path: str) -> tuple[dict[str, Any], str]:
    """(metadata, body); a broken block is a ValidationError naming the path and line."""
    try:
        raw, body = split(text)
    except ValidationError as exc:
        raise ValidationError(f"{path}: {exc}") from exc
    if raw is None or not raw.strip():
        return {}, body
    if len(raw) > MAX_CHARS:
        raise ValidationError(
            f"{path}:2: the frontmatter is {len(raw):,} chars, more than the {MAX_CHARS:,} "
            "memdir reads: keep it to a few 'key: value' lines and put the rest in the body"
        )
    import yaml

    # libyaml's loader when PyYAML was built with it: ~10x faster than pure Python
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _refuse_expansion(yaml, raw, loader, path)
        data = yaml.load(raw, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ValidationError(f"{path}{line}: broken frontmatter: {problem}") from exc
    if not isinstance(data, dict):
        raise ValidationError(f"{path}:2: frontmatter must be 'key: value' lines")
    return {str(k): v for k, v in data.items()}, body


def _refuse_expansion(yaml: Any, raw: str, loader: Any, path: str) -> None:
    """X3: a YAML alias (`*a`) makes a few lines stand for billions of values (the
    "billion laughs"), and deep nesting exhausts the stack; both are refused, by a pass
    over the parser's events before anything is built."""
    depth = 0
    for event in yaml.parse(raw, Loader=loader):
        line = f":{event.start_mark.line + 2}" if event.start_mark is not None else ""
        if isinstance(event, yaml.AliasEvent):
            raise ValidationError(
                f"{path}{line}: broken frontmatter: YAML aliases (*name) are not read; "
                "write the value out"
            )
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ValidationError(
                    f"{path}{line}: broken frontmatter: nested more than {MAX_DEPTH} deep"
                )
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1


def dump(meta: dict[str, Any], body: str) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    block = yaml.dump(meta, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1000).rstrip(
        "\n"
    )
    return f"{FENCE}\n{block}\n{FENCE}\n{body}"
