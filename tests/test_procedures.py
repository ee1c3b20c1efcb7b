"""Procedures: one markdown file each, kebab-case names, substring search (P1-P3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memdir import Memory, NotFoundError, ValidationError

DEPLOY = """---
description: Ship the web app to staging
tags: [deploy, staging]
---
# Deploy to staging
1. Run `make test`.
2. Push the tag; CI deploys to staging-eu.
"""


def test_procedure_is_a_markdown_file_and_write_overwrites(memory: Memory) -> None:  # P1
    proc = memory.write_procedure("deploy-staging", DEPLOY)
    path = Path(memory.path) / "procedures" / "deploy-staging.md"
    assert proc.path == "procedures/deploy-staging.md"
    assert path.read_text() == DEPLOY
    memory.write_procedure("deploy-staging", "# Deploy\nNew steps\n")
    assert path.read_text() == "# Deploy\nNew steps\n"
    assert [p.name for p in memory.procedures()] == ["deploy-staging"]


@pytest.mark.parametrize(
    "name",
    [
        "Bad_Name",
        "../x",
        "a" * 65,
        "x/y",
        "-lead",
        "trail-",
        "double--hyphen",
        "",
        "UPPER",
        "sp ace",
        "/abs",
        "a.md",
    ],
)
def test_bad_names_are_refused_and_nothing_is_written(memory: Memory, name: str) -> None:
    # P1, X1
    with pytest.raises(ValidationError, match="kebab-case"):
        memory.write_procedure(name, "# steps\n")
    assert not os.path.exists(memory.layout.procedures_dir) or not os.listdir(
        memory.layout.procedures_dir
    )


def test_name_of_64_chars_is_accepted(memory: Memory) -> None:  # P1
    name = "a" * 64
    assert memory.write_procedure(name, "ok").name == name


def test_frontmatter_is_optional_and_read(memory: Memory) -> None:  # P2
    memory.write_procedure("deploy-staging", DEPLOY)
    memory.write_procedure("plain", "# Rotate logs\nDelete old ones.\n")
    procs = {p.name: p for p in memory.procedures()}
    assert procs["deploy-staging"].description == "Ship the web app to staging"
    assert procs["plain"].description == "Rotate logs"  # first line when no frontmatter
    assert memory.procedure("plain").content == "# Rotate logs\nDelete old ones.\n"


def test_broken_frontmatter_is_refused_on_write(memory: Memory) -> None:  # P2, Z
    with pytest.raises(ValidationError, match="frontmatter"):
        memory.write_procedure("broken", "---\ndescription: [unclosed\n---\nbody\n")
    with pytest.raises(ValidationError, match="never closed"):
        memory.write_procedure("broken", "---\ndescription: x\nbody\n")
    with pytest.raises(NotFoundError):
        memory.procedure("broken")


def test_hand_broken_frontmatter_is_reported_and_left_in_place(memory: Memory) -> None:  # P2, Z
    memory.write_procedure("good", "# fine\n")
    folder = Path(memory.layout.procedures_dir)
    bad = "---\ndescription: [oops\n---\nrestart the worker\n"
    (folder / "hand-edited.md").write_text(bad)
    procs = {p.name: p for p in memory.procedures()}
    assert procs["good"].error is None
    assert procs["hand-edited"].error and "hand-edited.md" in procs["hand-edited"].error
    assert (folder / "hand-edited.md").read_text() == bad  # untouched
    assert memory.search("worker")[0].name == "hand-edited"  # still searchable


def test_substring_search_on_name_frontmatter_and_body(memory: Memory) -> None:  # P3
    memory.write_procedure("deploy-staging", DEPLOY)
    memory.write_procedure("rotate-logs", "# Rotate logs\nRun logrotate -f on the box.\n")
    by_name = memory.search("rotate-logs")
    assert [h.name for h in by_name] == ["rotate-logs"]
    assert [h.name for h in memory.search("staging")] == ["deploy-staging"]  # frontmatter + body
    assert [h.name for h in memory.search("logrot")] == ["rotate-logs"]  # a part of a word
    assert [h.name for h in memory.search("staging-eu")] == ["deploy-staging"]
    hit = memory.search("logrotate")[0]
    assert hit.kind == "procedure" and hit.path == "procedures/rotate-logs.md"
    assert hit.lines is not None and "logrotate" in hit.content


def test_search_returns_procedures_beside_facts(memory: Memory) -> None:  # P3, Q1
    memory.write_procedure("deploy-staging", DEPLOY)
    memory.add_fact("Staging is in eu-west-1", "learning")
    kinds = sorted(h.kind for h in memory.search("staging"))
    assert kinds == ["fact", "procedure"]
    assert [h.kind for h in memory.search("staging", category="learning")] == ["fact"]
    assert [h.kind for h in memory.search("staging", kinds=("procedure",))] == ["procedure"]


def test_hand_made_files_with_other_names_are_ignored(memory: Memory) -> None:  # P1
    folder = Path(memory.layout.procedures_dir)
    folder.mkdir(parents=True)
    (folder / "Notes Draft.md").write_text("staging")
    (folder / "readme.txt").write_text("staging")
    assert memory.procedures() == []


def test_oversized_procedure_is_refused(memory: Memory) -> None:  # X3
    with pytest.raises(ValidationError, match="over the cap"):
        memory.write_procedure("big", "x" * (memory.settings.max_entry_bytes + 1))
