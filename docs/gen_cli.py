"""Regenerate docs/cli.md from the parser's own --help (run: make docs). A test keeps the
file in step with the code."""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((name, sub))
    return found


def _walk(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    parts = [f"## `{prefix}`\n\n```\n{parser.format_help().rstrip()}\n```\n"]
    for name, sub in _subcommands(parser):
        parts.extend(_walk(sub, f"{prefix} {name}"))
    return parts


def render() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal width
    from memdir.cli import build_parser

    parser = build_parser()
    header = (
        "# memdir command line\n\nGenerated from `--help` by `docs/gen_cli.py` (make docs).\n\n"
    )
    return header + "\n".join(_walk(parser, "memdir"))


if __name__ == "__main__":
    text = render()
    if sys.argv[1:] == ["--check"]:
        with open(os.path.join(HERE, "cli.md"), encoding="utf-8") as handle:
            raise SystemExit(0 if handle.read() == text else "docs/cli.md is stale: make docs")
    with open(os.path.join(HERE, "cli.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
