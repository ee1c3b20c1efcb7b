"""The memory browser's HTML: Jinja2 templates with autoescape on for every template
(memory is untrusted text: a `<script>` an agent stored is shown as text), and markdown
rendered by markdown-it-py with raw HTML off (it is escaped) and its link check on (no
javascript: links)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2
    from markdown_it import MarkdownIt

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "ui")
TEMPLATES = os.path.join(DATA, "templates")
STATIC = os.path.join(DATA, "static")

_env: jinja2.Environment | None = None
_md: MarkdownIt | None = None


def environment() -> jinja2.Environment:
    global _env
    if _env is None:
        import jinja2

        _env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        _env.filters["markdown"] = markdown
        _env.filters["thousands"] = lambda n: f"{n:,}"
    return _env


def markdown(text: str) -> Any:
    """Markdown as safe HTML: raw HTML in it is escaped, not passed through."""
    global _md
    from markupsafe import Markup

    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return Markup(_md.render(text))  # noqa: S704 - markdown-it escaped the text itself


def page(template: str, /, **context: Any) -> str:
    return environment().get_template(template).render(**context)
