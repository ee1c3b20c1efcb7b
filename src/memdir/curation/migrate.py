"""`memdir migrate --to URL|local` (W1): copy this memory's store to another backend —
memory.db into a PostgreSQL scope, or the configured PostgreSQL scope into memory.db —
and verify the copy record for record.

What travels is what the archive carries of the store (rows.ARCHIVE_KINDS: facts with
their ids and links, their usage, sessions and their write counts, tasks, stored values)
and the facts' vectors of every model (so nothing is embedded again), and the markdown tiers
that are rows in team mode (storage/documents.py): into a scope, this memory root's files
become its rows (the root their rendered view); out of one, its rows are rendered into this
memory root, whose files are the truth from then on. Each is checked text for text. The rest
is derived and rebuilt by the target's next sync: the search index of the files, the groups,
the entry and procedure caches. The target must hold no memory (it is refused otherwise: nothing is
merged). The source is left as it was; which store memdir uses is the configuration's
choice (`[storage] url`, MEMDIR_DATABASE_URL), changed by the user afterwards.
"""

from __future__ import annotations

from ..errors import ConflictError, StorageError, ValidationError
from ..records import Record
from ..storage import open_store
from ..storage.carry import carry_to_files, carry_to_rows
from ..storage.documents import keeps_documents
from ..storage.rows import ARCHIVE_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..memory import Memory
    from ..storage.base import Store

LOCAL = "local"
BATCH = 5_000  # facts a transaction of the copy writes
SETTLE_PART = 4_096  # imported facts whose band keys one write of the copy indexes


class Migrated(Record):
    source: str  # where from (a URL shown without its password, or memory.db's path)
    target: str
    counts: dict[str, int]  # kind -> records copied and verified
    vectors: int

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def migrate(memory: Memory, to: str, scope: str | None = None) -> Migrated:
    """Copy memory's store to `to` (a PostgreSQL URL, or "local" for memory.db) and verify."""
    from ..storage.postgres.url import SCOPE_RE, is_database_url, redact

    settings = memory.settings
    if to == LOCAL:
        if not settings.storage_url:
            raise ValidationError(
                "this memory is local already (memory.db): to move it into a team "
                "database, give its URL: memdir migrate --to postgresql://..."
            )
        target_settings = settings._replace(storage_url="")
        shown = memory.layout.db
    elif is_database_url(to):
        if scope is not None and not SCOPE_RE.fullmatch(scope):
            raise ValidationError(f"--scope {scope!r} is not a scope name (lower-case a-z0-9_)")
        target_settings = settings._replace(
            storage_url=to, storage_scope=scope or settings.storage_scope
        )
        shown = f"{redact(to)} (scope {target_settings.storage_scope})"
        if settings.storage_url == to and settings.storage_scope == target_settings.storage_scope:
            raise ValidationError(f"the store is {shown} already: nothing to migrate")
    else:
        raise ValidationError(
            f"--to must be a PostgreSQL URL (postgresql://...) or {LOCAL!r}, not {to!r}"
        )
    source = memory.store
    source_shown = (
        f"{redact(settings.storage_url)} (scope {settings.storage_scope})"
        if settings.storage_url
        else memory.layout.db
    )
    target = open_store(memory.layout, target_settings)
    try:
        held = {k: n for k, n in target.archive_counts().items() if n}
        if held:
            what = ", ".join(f"{n} {kind}" for kind, n in held.items())
            raise ConflictError(
                f"{shown} holds memory already ({what}): nothing was copied; migrate into "
                "an empty store (another --scope, or a fresh database)"
            )
        if keeps_documents(target) and target.document_revision():
            raise ConflictError(
                f"{shown} holds memory already (its markdown tiers): nothing was copied; "
                "migrate into an empty store (another --scope, or a fresh database)"
            )
        memory.flush_hits()
        with source.snapshot():
            counts = _copy(source, target)
            vectors = _copy_vectors(source, target)
            _verify(source, target, shown)
        # the markdown tiers (W1): rows in a team scope, files on memory.db
        root = memory.layout.memory_dir
        if keeps_documents(target):
            counts["document"] = carry_to_rows(root, target)
        elif keeps_documents(source):
            counts["document"] = carry_to_files(root, source)
            from .. import entries

            entries.follow_view(memory.layout, target)  # MEMORY.md from the entries rendered
    finally:
        target.close()
    return Migrated(source_shown, shown, counts, vectors)


def _copy(source: Store, target: Store) -> dict[str, int]:
    counts: dict[str, int] = {}
    batch: list[dict[str, object]] = []
    n = 0
    for row in source.archive_rows("fact"):
        batch.append(row)
        if len(batch) >= BATCH:
            target.insert_fact_rows(batch, keep_ids=True)
            n += len(batch)
            batch = []
    if batch:
        target.insert_fact_rows(batch, keep_ids=True)
        n += len(batch)
    while target.settle_sketches(SETTLE_PART):  # the guard's keys, before it is verified
        pass
    counts["fact"] = n
    rest = {kind: list(source.archive_rows(kind)) for kind in ARCHIVE_KINDS if kind != "fact"}
    target.restore_rows(rest)
    counts.update({kind: len(rows) for kind, rows in rest.items()})
    return counts


def _copy_vectors(source: Store, target: Store) -> int:
    """The facts' vectors of every model: a chunk's id is the index's own (chunks are
    rebuilt from the files), so chunks are embedded again by the target."""
    from ..storage.rows_cold import NewVector

    copied = 0
    for model in source.vector_models():
        rows = [
            NewVector(owner, owner_id, "", vec)
            for owner, owner_id, vec in source.iter_vectors(model)
            if owner == "fact"
        ]
        if not rows:
            continue
        hashes = {
            u.owner_id: u.hash
            for u in target.unembedded_items(model, [r.owner_id for r in rows], [])
        }
        rows = [r._replace(hash=hashes[r.owner_id]) for r in rows if r.owner_id in hashes]
        for start in range(0, len(rows), BATCH):
            target.put_vectors(model, rows[start : start + BATCH])
        copied += len(rows)
    return copied


def _verify(source: Store, target: Store, shown: str) -> None:
    """Every record of every kind, field for field, in the same order."""
    for kind in ARCHIVE_KINDS:
        theirs = target.archive_rows(kind)
        for number, mine in enumerate(source.archive_rows(kind), 1):
            copied = next(theirs, None)
            if copied != mine:
                raise StorageError(
                    f"the copy in {shown} differs from the source at {kind} record {number} "
                    f"({mine!r} there is {copied!r}): the target is left as it is; remove "
                    "its scope (or database) and migrate again"
                )
        if next(theirs, None) is not None:
            raise StorageError(f"the copy in {shown} holds more {kind} records than the source")
    for model, n in source.vector_models().items():
        facts = sum(1 for owner, _, _ in source.iter_vectors(model) if owner == "fact")
        got = sum(1 for owner, _, _ in target.iter_vectors(model) if owner == "fact")
        if facts != got and n:
            raise StorageError(
                f"the copy in {shown} has {got} of the {facts} fact vectors of {model}"
            )
