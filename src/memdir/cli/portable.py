"""Commands that carry memory between stores: export (one archive of everything) and
import (an archive, or another tool's memory)."""

from __future__ import annotations

import argparse
import sys

from ..errors import MemdirError, ValidationError
from .common import Builder, as_json, memory_for, progress_bar, warn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..curation.archive import Exported
    from ..models import ImportReport

NATIVE = "memdir"
# how a count of each kind of item reads: kind -> (one, several)
LABELS = {
    "fact_usage": ("fact usage row", "fact usage rows"),
    "session_write": ("session write count", "session write counts"),
    "kv": ("stored value", "stored values"),
    "entry": ("global entry", "global entries"),
    "note": ("task note file", "task note files"),
    "daily": ("daily log", "daily logs"),
    "hot": ("hot memory file", "hot memory files"),
    "identity": ("identity file", "identity files"),
    "heartbeat": ("heartbeat state", "heartbeat states"),
}


def counted(n: int, kind: str) -> str:
    one, several = LABELS.get(kind, (kind, kind + "s"))
    return f"{n:,} {one if n == 1 else several}"


def add_export(b: Builder) -> None:
    export = b.command(
        b.commands,
        "export",
        _export,
        "write the whole store to one archive that `memdir import` restores",
    )
    export.add_argument(
        "--out",
        metavar="FILE",
        help="write the archive here, atomically (default: stdout, the summary to stderr)",
    )


def add_import(b: Builder) -> None:
    imp = b.command(
        b.commands,
        "import",
        _import,
        "bring memory in: a `memdir export` archive, or another tool's memory",
    )
    imp.add_argument("path", metavar="PATH", help="what to import, or - for stdin")
    imp.add_argument(
        "--from",
        dest="fmt",
        default=NATIVE,
        metavar="FORMAT",
        help=f"what PATH holds (default: {NATIVE}, an archive of `memdir export`)",
    )
    imp.add_argument(
        "--dry-run", action="store_true", help="report what would be imported; write nothing"
    )
    imp.add_argument(
        "--force",
        action="store_true",
        help="merge into a store that is not empty (an archive restores into an empty one)",
    )
    imp.add_argument(
        "--no-embed",
        action="store_true",
        help="leave embedding (semantic search) to `memdir reindex` or the server: "
        "until then search ranks what was imported by its words",
    )


def _export(args: argparse.Namespace) -> Any:
    from ..curation import archive

    memory = memory_for(args)
    if args.out is not None:
        done = archive.export_to(memory, args.out)
        return done.to_dict() if as_json(args) else _summary(done)
    if sys.stdout.isatty():
        raise ValidationError(
            "the archive would go to the terminal: give --out FILE, or pipe it somewhere"
        )
    done = archive.export(memory, sys.stdout.buffer)
    sys.stdout.flush()
    if as_json(args):
        import json

        print(json.dumps(done.to_dict(), ensure_ascii=False, indent=2), file=sys.stderr)
    else:
        print(_summary(done), file=sys.stderr)
    return None


def _summary(done: Exported) -> str:
    counts = ", ".join(counted(n, kind) for kind, n in done.counts.items() if n)
    lines = [f"exported {counts or 'an empty store'} to {done.path or 'stdout'}"]
    lines += [f"left out: {item}" for item in done.left_out]
    return "\n".join(lines)


def _import(args: argparse.Namespace) -> Any:
    memory = memory_for(args)
    if args.fmt == NATIVE:
        from ..curation import archive

        report = archive.import_archive(memory, args.path, dry_run=args.dry_run, force=args.force)
    else:
        from ..curation import importers

        if args.fmt not in importers.FORMATS:
            known = ", ".join((NATIVE, *importers.FORMATS))
            raise ValidationError(f"unknown import format {args.fmt!r}: one of {known}")
        report = importers.run(memory, args.fmt, args.path, dry_run=args.dry_run, force=args.force)
    embedded = 0
    if not args.dry_run and not args.no_embed:
        try:
            embedded = memory.embed_pending(None if as_json(args) else _embedding_bar)
        except MemdirError as exc:  # the import is done: only its vectors wait
            warn(f"imported, but not embedded: {exc}; run `memdir reindex` to embed")
    if as_json(args):
        return {**report.to_dict(), "embedded": embedded}
    text = _report(report)
    return text + (f"\n  embedded {embedded:,} items for semantic search" if embedded else "")


def _embedding_bar(done: int, total: int) -> None:
    progress_bar("embeddings", done, total)


def _report(report: ImportReport) -> str:
    """One line per kind imported or skipped, with counts, then each skipped item and why."""
    done, skip = ("would import", "would skip") if report.dry_run else ("imported", "skipped")
    lines = [f"{report.source} ({report.format}{', dry run' if report.dry_run else ''}):"]
    for verb, items in ((done, report.imported), (skip, report.skipped)):
        counts: dict[str, int] = {}
        for item in items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        lines += [f"  {verb} {counted(n, kind)}" for kind, n in counts.items()]
    if not report.imported and not report.skipped:
        lines.append("  nothing to import")
    lines += [
        f"  {done} {item.kind} {item.target} ({item.source}): {item.note}"
        for item in report.imported
        if item.note
    ]
    lines += [
        f"  {skip} {' '.join(filter(None, (item.kind, item.target)))} ({item.source}): "
        f"{item.reason}"
        for item in report.skipped
    ]
    return "\n".join(lines)


def add_migrate(b: Builder) -> None:
    move = b.command(
        b.commands,
        "migrate",
        _migrate,
        "copy the store to a team database (PostgreSQL) or back to memory.db, verified",
    )
    move.add_argument(
        "--to",
        required=True,
        metavar="URL|local",
        help="a PostgreSQL URL (postgresql://...; the password from PGPASSWORD or "
        "~/.pgpass), or `local` for memory.db",
    )
    move.add_argument(
        "--scope", metavar="NAME", help="the scope in that database (default: [storage] scope)"
    )


def _migrate(args: argparse.Namespace) -> Any:
    from ..curation.migrate import LOCAL, migrate

    memory = memory_for(args)
    done = migrate(memory, args.to, args.scope)
    if as_json(args):
        return done.to_dict()
    counts = ", ".join(counted(n, kind) for kind, n in done.counts.items() if n)
    then = (
        "remove [storage] url from config.toml (and unset MEMDIR_DATABASE_URL) to use it"
        if args.to == LOCAL
        else "set [storage] url to that URL in config.toml (or MEMDIR_DATABASE_URL) to use it"
    )
    return (
        f"copied {counts or 'an empty store'} and {done.vectors:,} fact vectors from "
        f"{done.source} to {done.target}, every record verified; {then}"
    )


COMMANDS = {"export": add_export, "import": add_import, "migrate": add_migrate}
