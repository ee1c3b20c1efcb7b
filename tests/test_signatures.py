"""The front ends are thin (A1, A3, C): a tool or a CLI command takes its inputs and hands
them to a Memory method. These checks tie the three layers together by name, so that a
renamed parameter fails here rather than in a user's first call:

- each MCP tool's input schema lists exactly the parameters of the function it runs, and
  requires exactly those without a default;
- every keyword a tool function or a CLI handler passes to a Memory method is a parameter
  of that method, and no call passes more positional arguments than it takes;
- every `args.NAME` a CLI handler reads is an option or argument its subcommand defines.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from memdir import Memory
from memdir.cli import MODULES, build_parser
from memdir.tools import TOOLS

MEMORY_METHODS = {
    name: member
    for name, member in inspect.getmembers(Memory, callable)
    if not name.startswith("_")
}


def function_tree(function: Callable[..., Any]) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(function)))


def memory_calls(tree: ast.AST) -> Iterator[ast.Call]:
    """Calls of a Memory method: `memory.m(...)`, `mem.m(...)`, `memory_for(args).m(...)`
    (how tools and handlers name the Memory they were given or opened)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in MEMORY_METHODS:
            continue
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in ("memory", "mem"):
            yield node
        elif (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "memory_for"
        ):
            yield node


def call_problems(call: ast.Call) -> list[str]:
    """What in `call` the Memory method it names does not take."""
    assert isinstance(call.func, ast.Attribute)
    name = call.func.attr
    params = inspect.signature(MEMORY_METHODS[name]).parameters
    kinds = {p.kind for p in params.values()}
    problems = []
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        for keyword in call.keywords:
            if keyword.arg is not None and keyword.arg not in params:
                problems.append(f"Memory.{name}() has no parameter {keyword.arg!r}")
    positional = [
        p
        for p in list(params.values())[1:]  # after self
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    starred = any(isinstance(arg, ast.Starred) for arg in call.args)
    if inspect.Parameter.VAR_POSITIONAL not in kinds and not starred:
        if len(call.args) > len(positional):
            problems.append(f"Memory.{name}() takes {len(positional)} positional arguments")
    return problems


def test_each_tool_schema_lists_the_parameters_of_its_function() -> None:  # A1 A3
    for tool in TOOLS.values():
        params = list(inspect.signature(tool.run).parameters.values())
        assert params[0].name == "memory", tool.name
        wanted = {p.name for p in params[1:]}
        required = {p.name for p in params[1:] if p.default is inspect.Parameter.empty}
        schema = tool.input_schema
        assert set(schema["properties"]) == wanted, tool.name
        assert set(schema.get("required", [])) == required, tool.name
        assert schema.get("additionalProperties") is False, tool.name


def test_each_tool_passes_memory_only_parameters_it_has() -> None:  # A1 A3
    checked = 0
    for tool in TOOLS.values():
        calls = list(memory_calls(function_tree(tool.run)))
        assert calls, f"{tool.name} calls no Memory method"
        for call in calls:
            assert call_problems(call) == [], tool.name
            checked += 1
    assert checked >= len(TOOLS)


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable (sub)command's parser, with its words (`fact add`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*path, name))
    if parser.get_default("handler") is not None:
        yield path, parser


def args_read(tree: ast.AST) -> set[str]:
    """The NAMEs of `args.NAME` in a handler (getattr(args, ...) is a read that allows a
    missing option, and is left out)."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "args"
    }


def test_each_cli_command_reads_only_its_options_and_calls_memory_as_it_is() -> None:  # C
    commands = list(subcommands(build_parser()))
    assert {words[0] for words, _ in commands} == set(MODULES)  # what `memdir --help` lists
    assert len(commands) >= 40  # with every action of the commands that have actions
    checked = 0
    for words, parser in commands:
        handler = parser.get_default("handler")
        tree = function_tree(handler)
        dests = {action.dest for action in parser._actions}
        missing = args_read(tree) - dests
        assert not missing, f"memdir {' '.join(words)} reads options it lacks: {missing}"
        for call in memory_calls(tree):
            assert call_problems(call) == [], f"memdir {' '.join(words)}"
            checked += 1
    assert checked >= 30  # most commands hand their options to one Memory method


def test_the_check_catches_a_renamed_parameter() -> None:  # C
    """The checks above fail on the mistake they exist for."""
    renamed = ast.parse("memory_for(args).add_fact(text, args.category, valid_since=x)")
    [call] = memory_calls(renamed)
    assert call_problems(call) == ["Memory.add_fact() has no parameter 'valid_since'"]
    extra = ast.parse("memory.search(q, None, 10, None, None, None, None, None, None)")
    [call] = memory_calls(extra)
    assert call_problems(call) and "positional" in call_problems(call)[0]
