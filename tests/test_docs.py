"""Docs generated from the code stay in step with it, and docs/spec.md defines every id the
code cites (STYLE 13)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gen() -> ModuleType:
    """docs/gen.py, the one generator: it defines what counts as a citation and a section."""
    spec = importlib.util.spec_from_file_location("memdir_docs_gen", ROOT / "docs" / "gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _gen()


def test_generated_docs_are_current() -> None:
    """cli.md, configuration.md, mcp.md, api.md and spec-index.md are what the code makes
    of them now (C, A1, A3, S)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


def test_check_names_a_stale_page_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--check exits 1 and names the page that no longer matches the code, writing nothing;
    pages that match are not named."""
    for page in gen.PAGES:
        (tmp_path / page).write_bytes((ROOT / "docs" / page).read_bytes())
    stale = tmp_path / "configuration.md"
    stale.write_text(stale.read_text() + "\nhand edit\n")
    (tmp_path / "api.md").unlink()
    assert gen.main(["--check"], folder=str(tmp_path)) == 1
    said = capsys.readouterr().err
    assert "docs/configuration.md" in said and "docs/api.md" in said
    assert "docs/cli.md" not in said and "docs/mcp.md" not in said
    assert stale.read_text().endswith("hand edit\n")  # --check writes nothing
    assert not (tmp_path / "api.md").exists()


def test_every_id_cited_in_src_is_defined_in_the_spec() -> None:
    """An id in a comment or docstring of src/ (a numbered id, a range of them, or an area's
    letter in parentheses) leads to a section of docs/spec.md."""
    sections = gen.spec_sections()
    cited = gen.citations("src")
    missing = {key: sorted(paths) for key, paths in cited.items() if key not in sections}
    assert not missing, f"cited in src/ but not in docs/spec.md: {missing}"


def test_every_id_cited_in_tests_is_defined_in_the_spec() -> None:
    """Tests name the id they cover: each names one docs/spec.md defines."""
    sections = gen.spec_sections()
    cited = gen.citations("tests")
    missing = {key: sorted(paths) for key, paths in cited.items() if key not in sections}
    assert not missing, f"cited in tests/ but not in docs/spec.md: {missing}"


def test_every_id_the_spec_defines_is_cited_or_planned() -> None:
    """No section of docs/spec.md describes something nothing carries out: each id is cited
    in src/ (or, for the benchmarks' targets, bench/), or is marked planned."""
    sections = gen.spec_sections()
    untraced = set(sections) - gen.traced(sections, gen.code_citations()) - gen.planned(sections)
    assert not untraced, f"defined in docs/spec.md, cited nowhere, not planned: {sorted(untraced)}"


def test_planned_ids_are_not_cited_in_src() -> None:
    """An id marked planned is work not built: code that cites it means the spec is behind."""
    sections = gen.spec_sections()
    cited = gen.citations("src")
    built = sorted(key for key in gen.planned(sections) if key in cited)
    assert not built, f"marked planned in docs/spec.md but cited in src/: {built}"


@pytest.mark.parametrize(
    ("prose", "ids"),
    [
        ("Hot memory (H1-H6): HOT.md", {"H1", "H2", "H3", "H4", "H5", "H6"}),
        ("settings S1-S3 apply", {"S1", "S2", "S3"}),
        ("refused (X1), scanned (X2)", {"X1", "X2"}),
        ("a broken memory.db (Z)", {"Z"}),
        ("task and global memory (G, T, M, R)", {"G", "T", "M", "R"}),
        ("who may talk (A2, X; see below)", {"A2", "X"}),
        ("F2/X3: the facts", {"F2", "X3"}),
        ("a 64-bit key, like 0x9E3779B9 or MD5", set()),
    ],
)
def test_citations_are_read_as_the_code_writes_them(prose: str, ids: set[str]) -> None:
    assert gen.cited_ids(prose) == ids


def test_only_comments_and_docstrings_cite() -> None:
    """A regex's character class or a timestamp in a string is data, not a citation."""
    source = '"""Doc (F3)."""\nPATTERN = "[A-Z0-9]{4}T23:59"\nx = 1  # see (U2)\n'
    said = " ".join(text for _, text in gen.prose(source))
    assert gen.cited_ids(said) == {"F3", "U2"}


def test_every_id_has_an_anchor_a_reader_can_jump_to() -> None:
    """Each id is an <a id> right before its heading, so spec.md#<id> lands on it, and the
    index lists every one of them with its section."""
    sections = gen.spec_sections()
    assert {"L1", "F3", "X5", "K", "W", "V", "K1", "W1", "V1"} <= set(sections)
    index = (ROOT / "docs" / "spec-index.md").read_text()
    for key in sections:
        assert f"[{key}](spec.md#{key})" in index


def test_no_spec_outside_the_repository_is_referred_to() -> None:
    """The spec lives in docs/spec.md: nothing points readers at ../shared/SPEC.md."""
    for folder in ("src", "docs", "bench"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".md"}:
                assert "SPEC.md" not in path.read_text(encoding="utf-8"), path
    assert "SPEC.md" not in (ROOT / "README.md").read_text()


ISSUE_RE = re.compile(r"(?i)\bissues? \d")


def test_nothing_cites_an_issue_number() -> None:
    """Code and docs cite the ids of docs/spec.md, which lead a reader to the rule meant; a
    number in the issue tracker leads nowhere from the repository."""
    paths = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    for folder in ("src", "tests", "bench", "docs"):
        paths += (
            p
            for p in (ROOT / folder).rglob("*")
            # bench/results: what the scripts wrote (stores a run may be making meanwhile)
            if p.is_file() and (ROOT / "bench" / "results") not in p.parents
        )
    found = []
    for path in sorted(paths):
        if "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        except FileNotFoundError:
            continue  # a file of a run that went meanwhile
        for number, line in enumerate(text.splitlines(), 1):
            if ISSUE_RE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "cite spec ids, not issue numbers:\n" + "\n".join(found)


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("\n")[:6]
    assert any(line.startswith("make run") for line in head)
    assert any(line.startswith("make test") for line in head)
