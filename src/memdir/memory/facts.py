"""The Memory facade's fact archive (F1-F5): facts written through the duplicate guard
(X5), superseded with their validity windows, imported whole from an archive or another
tool."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .. import advice, facts
from ..errors import MemdirError, NotFoundError, ValidationError
from ..lazy import lazy
from ..models import Fact, Similar
from .base import MemoryBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import duplicates
    from ..search import worker
    from ..types import Category
else:
    duplicates = lazy("memdir.duplicates")
    worker = lazy("memdir.search.worker")

GUARD_WORKER = "memdir.guard_worker"


class FactMemory(MemoryBase):
    """Facts: add, supersede, remove, read, their history; imports of many."""

    def add_fact(self, content: str, category: Category, *, valid_from: str | None = None) -> Fact:
        """A new fact. An exact duplicate of an active fact (the same text up to case,
        Unicode form and spacing: similarity.normalize) is not stored: the answer is that
        fact, `duplicate` set, with a hint to supersede it; near duplicates (punctuation
        apart, or close words) are stored and named in `similar` (X5). `valid_from`: when
        it began to hold."""
        facts.check_category(category)
        content = facts.check_content(content, self.settings.max_entry_bytes)
        start = self._valid_from(valid_from)
        self.require_writable("facts")
        self.refuse_secrets("fact", text=content, category=category, valid_from=valid_from)
        fact = self.store.add_fact(category, content, self._now(), self._provenance(), start)
        if fact.duplicate:
            return fact._replace(hint=duplicates.fact_hint(fact))
        fact = self._with_similar(fact)
        self._embed_written([fact.id])
        return fact

    def _valid_from(self, valid_from: str | None) -> str | None:
        """When a fact began to hold: now or before. The archive records what holds, not
        plans: a fact that takes effect later is written when it does."""
        start = facts.normalize_since(valid_from)
        if start is not None and start > self._now():
            raise ValidationError(
                f"valid_from {valid_from} is in the future: store the fact when it takes "
                "effect (memory records what holds now or held before)"
            )
        return start

    def _with_similar(self, fact: Fact, exclude: int | None = None) -> Fact:
        """The near duplicates of a fact just written (a report: never fails the write).
        By meaning only when the model is loaded (never 0.4 s for one write), and in a
        server after the answer (compare_later)."""
        semantic = None
        if self._embedder is not None and self.compare_later is None:
            semantic = (self._embedder, self.settings.duplicate_semantic, self._vectors)
        try:
            similar = duplicates.similar_facts(
                self.store, fact, self.settings.duplicate_lexical, semantic
            )
        except MemdirError:
            similar = ()
        similar = tuple(s for s in similar if s.ref != exclude)
        if self.compare_later is not None:
            named = {int(s.ref) for s in similar} | ({exclude} if exclude is not None else set())
            self.compare_later(fact.id, frozenset(named))
        return fact._replace(similar=similar, hint=duplicates.similar_hint(similar, fact.id))

    def similar_later(self, fact_id: int, named: frozenset[int]) -> tuple[Similar, ...]:
        """N1 in a server, after the answer: the active facts that mean nearly what fact
        `fact_id` says (cosine at least [duplicates] semantic), those in `named` (its
        answer's) left out; none when it is no longer active. Loads the model."""
        fact = self.store.get_fact(fact_id)
        if fact is None or fact.status != "active":
            return ()
        model = self._owner or self  # a companion's model is its owner's
        model._embedder = model._embedder or model._load_embedder()
        semantic = (model._embedder, self.settings.duplicate_semantic, self._vectors)
        return duplicates.similar_by_meaning(self.store, fact, semantic, named | {fact_id})

    def add_facts(self, rows: list[tuple[str, str]]) -> list[int]:
        """Bulk import: (content, category) pairs in one transaction."""
        from ..storage.rows_cold import NewFact

        checked = [
            NewFact(
                facts.check_category(category),
                facts.check_content(content, self.settings.max_entry_bytes),
            )
            for content, category in rows
        ]
        self.require_writable("facts")

        def refuse_secrets(part: Sequence[NewFact]) -> None:  # in the store's transaction
            self.refuse_secrets_each(
                "fact", ({"text": content, "category": category} for category, content in part)
            )

        ids = self.store.add_facts(checked, self._now(), self._provenance(), refuse_secrets)
        self._settle_later()
        self._embed_written(ids)
        return ids

    def settle_imported(self, limit: int) -> int:
        """N1: index the band keys of up to `limit` facts that a bulk import left for later
        (the guard's worker does it in the background, guard_worker.py); how many wait
        after. 0 does nothing but count."""
        if limit > 0:
            self.require_writable("facts")
        return self.store.settle_sketches(limit)

    def _settle_later(self) -> None:
        """An import that left its band keys for later starts the guard's worker, which
        indexes them between other writes (never fails the import: a write that needs the
        keys first indexes them itself)."""
        try:
            if self.store.settle_sketches(0) > 0:
                places = worker.Places(self.state.path)
                if not worker.running(places.guard_lock):  # one import of many batches
                    worker.start(places, GUARD_WORKER, self.layout.memory_dir)
        except (MemdirError, OSError):
            pass

    def supersede_fact(
        self,
        fact_id: int | str,
        content: str,
        category: Category | None = None,
        *,
        valid_from: str | None = None,
    ) -> Fact:
        """F3: the new version; the old one's validity ends when the new one's begins
        (`valid_from`, default now). Text another active fact holds is refused."""
        fact_id = facts.check_id(fact_id)
        if category is not None:
            facts.check_category(category)
        content = facts.check_content(content, self.settings.max_entry_bytes)
        start = self._valid_from(valid_from)
        self.require_writable("facts")
        self.refuse_secrets("fact", text=content, category=category, valid_from=valid_from)
        old, new = self.store.supersede_fact(
            fact_id, category, content, self._now(), self._provenance(), start
        )
        if new.duplicate:
            return new._replace(hint=f"fact {new.id} says this already; nothing changed")
        if new.supersedes != fact_id:  # a fork settled: the old version ends in its sibling
            return new._replace(hint=self._settled(old, new))
        new = self._with_similar(new, exclude=fact_id)
        if old.superseded_by != new.id:
            new = self._forked(old, new)
        self._embed_written([new.id])
        return new

    def _forked(self, old: Fact, new: Fact) -> Fact:
        """F3: `old` was superseded already (another writer, from the same view of it):
        `new` is its second successor; the result names what holds beside it and how to
        keep one."""
        chain = self.store.fact_chain(new.id)
        others = tuple(i for i in facts.heads(chain, old.id) if i != new.id)
        said = f"fact {old.id} was superseded already by fact {old.superseded_by}"
        if not others:
            note = f"{said}, which no longer holds: fact {new.id} holds in its place"
            return new._replace(hint=note)
        both = ", ".join(f"fact {i}" for i in others) + (" holds" if len(others) == 1 else " hold")
        first = others[0]
        note = (
            f"{said}: its history forked, and {both} beside fact {new.id}. Keep one: if this "
            f"version is right, {advice.fact_supersede(first, new.content)}; if fact {first} "
            f"is, {advice.fact_remove(new.id)}"
        )
        similar = tuple(s for s in new.similar if s.ref not in others)  # said above
        also = duplicates.similar_hint(similar, new.id)
        note = f"{note}. {also}" if also else note
        return new._replace(forked=others, similar=similar, hint=note)

    def _settled(self, old: Fact, new: Fact) -> str:
        """The hint when a version took the text of another that holds (a fork settled)."""
        chain = self.store.fact_chain(new.id)
        left = [point for point, _ends in facts.open_forks(chain)]
        still = f"; fact(s) {', '.join(map(str, left))} still forked" if left else ""
        return (
            f"fact {new.id} says this already: fact {old.id} now ends in it and nothing new "
            f"was stored{still}"
        )

    def remove_fact(self, fact_id: int | str) -> Fact:
        fact_id = facts.check_id(fact_id)
        self.require_writable("facts")
        return self.store.remove_fact(fact_id, self._now())

    def fact_saying(self, content: str) -> Fact | None:
        """The active fact that says exactly `content` (case, Unicode form and spacing
        aside; punctuation counts, X5)."""
        return self.store.fact_saying(content)

    def import_facts(
        self,
        rows: list[dict[str, object]],
        *,
        keep_ids: bool = False,
        fresh: bool = False,
        held: dict[int, int] | None = None,
    ) -> dict[int, int]:
        """Facts as another store or tool holds them (storage.sqlite.FACT_FIELDS keys: their
        own ids, supersede links, times, provenance, validity), in one transaction; returns
        their id -> the id stored. Each row's category and content are checked (F2, X2,
        X3) before anything is written; a missing `status` is active, missing times are now.
        `fresh`: brought in from another tool now, so doctor counts them stale from today,
        not from their (old) creation. `held`: ids of the rows' numbering the store holds
        already -> the store's ids, for links that lead to them (a merge)."""
        now = self._now()
        checked: list[dict[str, object]] = []

        def scanned() -> Iterator[dict[str, object]]:
            """Each row checked, then its fields to scan, row by row (the first problem
            reported is the first row's)."""
            for row in rows:
                fact = dict(row)
                # the ignores below: a row's values are objects; each check raises unless a str
                facts.check_category(fact.get("category"))  # type: ignore[arg-type]
                fact["content"] = facts.check_content(
                    fact.get("content"),  # type: ignore[arg-type]
                    self.settings.max_entry_bytes,
                )
                fact["status"] = facts.check_status(fact.get("status"))
                # X2: every stored field of the row, its provenance too (agent, session,
                # surface)
                yield {"text": fact["content"], **{k: v for k, v in fact.items() if k != "content"}}
                for field in ("created", "updated", "valid_from"):
                    if not fact.get(field):
                        fact[field] = fact.get("created") or now
                checked.append(fact)

        self.refuse_secrets_each("fact", scanned())
        # A superseded fact without an end held until its successor began; a removed one
        # until it was removed (its last update).
        begins = {row.get("id"): row["valid_from"] for row in checked}
        for fact in checked:
            if fact["status"] != "active" and not fact.get("valid_to"):
                successor = begins.get(fact.get("superseded_by"))
                superseded = fact["status"] == "superseded" and successor
                fact["valid_to"] = successor if superseded else fact["updated"]
        self.require_writable("facts")
        stored = self.store.insert_fact_rows(checked, keep_ids, now if fresh else None, held)
        self._settle_later()
        self._embed_written(list(stored.values()))
        return stored

    def get_fact(self, fact_id: int | str) -> Fact:
        fact_id = facts.check_id(fact_id)
        fact = self.store.get_fact(fact_id)
        if fact is None:
            raise NotFoundError(
                f"no fact with id {fact_id}: search for it with {advice.search(kind='fact')}",
                kind="fact",
                key=fact_id,
            )
        return fact

    def fact_history(self, fact_id: int | str) -> list[Fact]:
        """F3: the whole supersede chain the fact belongs to, oldest first."""
        self.get_fact(fact_id)
        return self.store.fact_chain(facts.check_id(fact_id))
