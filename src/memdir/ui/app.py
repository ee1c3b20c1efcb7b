"""The memory browser's pages (V1-V5): each handler parses the request, calls the Memory
facade and renders a template. No memory logic lives here.

Every request opens its own Memory on the store (cheap: the database opens on first use)
and closes it when answered: a page may be rendered on any of the server's threads, and
what another process wrote since is seen at once. Writes act as the browser's session
(surface `ui`, started with the server), so they are writes like any other front end's:
the same locks, secret scan, duplicate guard and caps, and the timeline says who made them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import facts
from ..errors import ConflictError, MemdirError, NotFoundError, ValidationError
from ..models import CATEGORIES
from . import render

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ..memory import Memory

SEARCH_KINDS = ("fact", "global", "procedure", "task", "daily")  # global: entries
SEARCH_MODES = ("lexical", "semantic", "hybrid")
TIMELINE_LIMIT = 200


class Browser:
    """What every page needs: how to open the store, as whom, and under which prefix."""

    def __init__(
        self, open_memory: Callable[[], Memory], prefix: str = "", session_id: str | None = None
    ) -> None:
        self.open_memory = open_memory
        self.prefix = prefix.rstrip("/")
        self.session_id = session_id

    @contextlib.contextmanager
    def memory(self) -> Iterator[Memory]:
        memory = self.open_memory()
        try:
            yield memory
        finally:
            memory.close()

    def url(self, path: str) -> str:
        return self.prefix + path

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        from starlette.responses import HTMLResponse

        state = request.scope.get("state", {})
        context.setdefault("note", request.query_params.get("note"))
        html = render.page(
            template,
            url=self.url,
            csrf=state.get("csrf", ""),
            q=request.query_params.get("q", ""),
            session_id=self.session_id,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def problem(self, request: Request, exc: MemdirError) -> Response:
        status = 404 if isinstance(exc, NotFoundError) else 400
        return self.page(request, "problem.html", status=status, message=str(exc))

    def redirect(self, path: str, note: str | None = None) -> Response:
        from urllib.parse import quote

        from starlette.responses import RedirectResponse

        where = self.url(path) + (f"?note={quote(note)}" if note else "")
        return RedirectResponse(where, status_code=303)


def build(browser: Browser) -> Starlette:
    """The browser's Starlette app (mounted at `browser.prefix` by its caller)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    pages = Pages(browser)
    routes = [
        Route("/", pages.overview),
        Route("/doctor", pages.doctor),
        Route("/timeline", pages.timeline),
        Route("/timeline/rows", pages.timeline_rows),
        Route("/search", pages.search),
        Route("/browse", pages.browse),
        Route("/hot", pages.hot, methods=["GET", "POST"]),
        Route("/fact/{fact_id:int}", pages.fact),
        Route("/fact/{fact_id:int}/supersede", pages.fact_supersede, methods=["POST"]),
        Route("/fact/{fact_id:int}/remove", pages.fact_remove, methods=["POST"]),
        Route("/entry/{name}", pages.entry, methods=["GET", "POST"]),
        Route("/entry/{name}/remove", pages.entry_remove, methods=["POST"]),
        Route("/procedure/{name}", pages.procedure, methods=["GET", "POST"]),
        Route("/task/{task_id}", pages.task),
        Route("/daily/{day}", pages.daily),
        Mount("/static", StaticFiles(directory=render.STATIC), name="static"),
    ]
    return Starlette(routes=routes)


@dataclass(frozen=True)
class File:
    """What differs between the edit pages of two kinds of markdown file (an entry, a
    procedure): the flow around them (page, V5 confirmation, save, conflict) is one."""

    kind: str  # its URL's first part, and the word the pages use
    title: str
    template: str
    fields: tuple[str, ...]  # the form's fields besides `revision`
    what: Callable[[str], str]  # the confirmation's line: what the save will do
    load: Callable[[Memory, str], dict[str, Any]]  # the page's context; NotFoundError
    missing: dict[str, Any]  # the context when there is no such file yet
    save: Callable[[Memory, str, dict[str, str]], Any]  # the write; has .duplicate


def _load_entry(memory: Memory, name: str) -> dict[str, Any]:
    entry = memory.entry(name)
    revision = memory.revision("entry", name)
    return {"entry": entry, "revision": revision, "raw": memory.get(entry.path).text}


def _load_procedure(memory: Memory, name: str) -> dict[str, Any]:
    proc = memory.procedure(name)
    return {"proc": proc, "revision": memory.revision("procedure", name)}


ENTRY = File(
    kind="entry",
    title="Entry",
    template="entry.html",
    fields=("description", "content"),
    what=lambda name: f"global/{name}.md will hold this (MEMORY.md follows):",
    load=_load_entry,
    missing={"entry": None, "revision": "none", "raw": ""},
    save=lambda memory, name, draft: memory.write_entry(
        name, draft["description"], draft["content"], expected=draft["revision"]
    ),
)
PROCEDURE = File(
    kind="procedure",
    title="Procedure",
    template="procedure.html",
    fields=("content",),
    what=lambda name: f"procedures/{name}.md will hold this:",
    load=_load_procedure,
    missing={"proc": None, "revision": "none"},
    save=lambda memory, name, draft: memory.write_procedure(
        name, draft["content"], expected=draft["revision"]
    ),
)


class Pages:
    def __init__(self, browser: Browser) -> None:
        self.b = browser

    # -- V1: the overview -------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        """Cheap: doctor reads every file of the store, so its findings are a page of
        their own (`doctor`), run when opened, never a cached run shown as fresh."""
        with self.b.memory() as memory:
            try:
                stats = memory.stats()
                main = memory.boot(subagent=False)
                sub = memory.boot(subagent=True)
            except MemdirError as exc:
                return self.b.problem(request, exc)
            hot = memory.hot()
        return self.b.page(
            request,
            "overview.html",
            title="Overview",
            hot=hot,
            stats=stats,
            boots=[("Next main session", main), ("Next subagent", sub)],
        )

    def doctor(self, request: Request) -> Response:
        """V1: doctor's findings (N2), from a run made for this request."""
        from ..curation import doctor

        with self.b.memory() as memory:
            try:
                report = doctor.run(memory, fix=False)
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(request, "doctor.html", title="Doctor", report=report)

    # -- V2: the timeline -------------------------------------------------------------------

    def _events(self, request: Request) -> tuple[dict[str, str], list[Any]]:
        filters = {
            k: v.strip()
            for k in ("tier", "session", "agent")
            if (v := request.query_params.get(k, "")).strip()
        }
        with self.b.memory() as memory:
            events = memory.timeline(
                tier=filters.get("tier"),
                session=filters.get("session"),
                agent=filters.get("agent"),
                limit=TIMELINE_LIMIT,
            )
        return filters, events

    def timeline(self, request: Request) -> Response:
        from ..timeline import TIERS

        try:
            filters, events = self._events(request)
        except MemdirError as exc:
            return self.b.problem(request, exc)
        return self.b.page(
            request,
            "timeline.html",
            title="Timeline",
            events=events,
            filters=filters,
            tiers=TIERS,
        )

    def timeline_rows(self, request: Request) -> Response:
        """The timeline's rows alone: what the page's script polls for to stay live."""
        from starlette.responses import HTMLResponse

        try:
            _filters, events = self._events(request)
        except MemdirError as exc:
            return HTMLResponse(str(exc), status_code=400)
        html = render.page("timeline_rows.html", events=events, url=self.b.url)
        return HTMLResponse(html)

    # -- V3: search -------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        params = request.query_params
        q = params.get("q", "").strip()
        form: dict[str, Any] = {
            "mode": params.get("mode", ""),
            "kinds": [k for k in params.getlist("kind") if k],
            "as_of": params.get("as_of", "").strip(),
            "category": params.get("category", ""),
        }
        hits: list[Any] = []
        whys: list[Any] = []
        notice = None
        mode = None
        if q:
            with self.b.memory() as memory:
                try:
                    hits = memory.search(
                        q,
                        kinds=form["kinds"] or None,
                        mode=form["mode"] or None,
                        as_of=form["as_of"] or None,
                        category=form["category"] or None,
                        limit=20,
                    )
                except MemdirError as exc:
                    return self.b.page(
                        request,
                        "search.html",
                        status=400,
                        title="Search",
                        error=str(exc),
                        hits=[],
                        form=form,
                        kinds=SEARCH_KINDS,
                        modes=SEARCH_MODES,
                        categories=CATEGORIES,
                        notice=None,
                        mode=None,
                    )
                whys = memory.explain(q, hits, as_of=bool(form["as_of"]))
                notice = memory.search_notice()
                mode = memory.searched_mode
        return self.b.page(
            request,
            "search.html",
            title=f"Search: {q}" if q else "Search",
            error=None,
            hits=list(zip(hits, whys, strict=True)),
            form=form,
            kinds=SEARCH_KINDS,
            modes=SEARCH_MODES,
            categories=CATEGORIES,
            notice=notice,
            mode=mode,
        )

    # -- V4: items --------------------------------------------------------------------------

    def browse(self, request: Request) -> Response:
        with self.b.memory() as memory:
            try:
                entries = memory.entries()
                procedures = memory.procedures()
                tasks = memory.store.all_tasks()
                days = memory.daily_days()
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(
            request,
            "browse.html",
            title="Browse",
            entries=entries,
            procedures=procedures,
            tasks=sorted(tasks, key=lambda t: t.started, reverse=True),
            days=days,
        )

    def fact(self, request: Request, error: str | None = None, status: int = 200) -> Response:
        fact_id = request.path_params["fact_id"]
        with self.b.memory() as memory:
            try:
                fact = memory.get_fact(fact_id)
                chain = memory.fact_history(fact_id)
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(
            request,
            "fact.html",
            status=status,
            title=f"Fact #{fact.id}",
            fact=fact,
            chain=chain,
            successors=facts.successors(chain),
            categories=CATEGORIES,
            error=error,
        )

    async def fact_supersede(self, request: Request) -> Response:
        form = await request.form()
        fact_id = request.path_params["fact_id"]
        content = str(form.get("content", ""))
        category: Any = str(form.get("category", "")) or None  # checked by the facade
        valid_from = str(form.get("valid_from", "")).strip() or None
        if form.get("confirm") != "yes":
            return await self._confirm(
                request,
                f"Supersede fact #{fact_id}",
                f"Fact #{fact_id} will stop holding now and this will hold from "
                f"{valid_from or 'now'} on:",
                content,
                dict(form),
            )

        def write(memory: Memory) -> Any:
            return memory.supersede_fact(fact_id, content, category, valid_from=valid_from)

        try:
            new = await self._write(write)
        except MemdirError as exc:
            return self.fact(request, error=str(exc), status=_status(exc))
        if new.duplicate:
            return self.fact(request, error=new.hint or "nothing changed", status=409)
        done = f"fact {new.id} supersedes fact {fact_id}"
        if new.forked:  # superseded meanwhile by another writer: both versions hold (F3)
            done = f"{done}; {new.hint}"
        return self.b.redirect(f"/fact/{new.id}", done)

    async def fact_remove(self, request: Request) -> Response:
        form = await request.form()
        fact_id = request.path_params["fact_id"]
        if form.get("confirm") != "yes":
            return await self._confirm(
                request,
                f"Remove fact #{fact_id}",
                "The fact stops holding now; it stays in its history as removed.",
                None,
                dict(form),
            )
        try:
            await self._write(lambda memory: memory.remove_fact(fact_id))
        except MemdirError as exc:
            return self.fact(request, error=str(exc), status=_status(exc))
        return self.b.redirect(f"/fact/{fact_id}", f"fact {fact_id} removed")

    # entries and procedures: one edit flow (page, confirm, save), told apart by a File

    def _file_page(
        self,
        request: Request,
        file: File,
        name: str,
        error: str | None = None,
        status: int = 200,
        draft: dict[str, str] | None = None,
    ) -> Response:
        """The file's page; with a draft (a save refused), the draft shown beside what the
        file holds now, or alone when there is no such file yet."""
        with self.b.memory() as memory:
            try:
                shown = file.load(memory, name)
            except NotFoundError as exc:
                if draft is None:
                    return self.b.problem(request, exc)
                shown = file.missing
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(
            request,
            file.template,
            status=status,
            title=f"{file.title} {name}",
            name=name,
            error=error,
            draft=draft,
            **shown,
        )

    async def _file_edit(self, request: Request, file: File) -> Response:
        """GET: the page. POST: V5's confirmation, then the save (refused: the page again,
        with the error and the draft)."""
        name = request.path_params["name"]
        if request.method == "GET":
            return self._file_page(request, file, name)
        form = await request.form()
        draft = {k: str(form.get(k, "")) for k in (*file.fields, "revision")}
        if form.get("confirm") != "yes":
            return await self._confirm(
                request,
                f"Save {file.kind} {name}",
                file.what(name),
                draft["content"],
                dict(form),
            )
        try:
            saved = await self._write(lambda memory: file.save(memory, name, draft))
        except MemdirError as exc:
            return self._file_page(request, file, name, str(exc), _status(exc), draft)
        note = "unchanged: it held exactly this" if saved.duplicate else "saved"
        return self.b.redirect(f"/{file.kind}/{name}", note)

    async def entry(self, request: Request) -> Response:
        return await self._file_edit(request, ENTRY)

    async def entry_remove(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        if form.get("confirm") != "yes":
            return await self._confirm(
                request,
                f"Remove entry {name}",
                f"global/{name}.md will be deleted and MEMORY.md rewritten without it.",
                None,
                dict(form),
            )
        try:
            await self._write(lambda memory: memory.remove_entry(name))
        except MemdirError as exc:
            return self._file_page(request, ENTRY, name, str(exc), _status(exc))
        return self.b.redirect("/browse", f"entry {name} removed")

    async def procedure(self, request: Request) -> Response:
        return await self._file_edit(request, PROCEDURE)

    async def hot(self, request: Request) -> Response:
        if request.method == "GET":
            return self._hot_page(request)
        form = await request.form()
        draft = {k: str(form.get(k, "")) for k in ("content", "revision")}
        if form.get("confirm") != "yes":
            return await self._confirm(
                request,
                "Save HOT.md",
                "HOT.md will hold this (the old one goes to HOT.md.bak):",
                draft["content"],
                dict(form),
            )
        try:
            result = await self._write(
                lambda memory: memory.hot_set(draft["content"], expected=draft["revision"])
            )
        except MemdirError as exc:
            return self._hot_page(request, str(exc), _status(exc), draft)
        return self.b.redirect("/hot", result.warning or f"saved: {result.chars:,} chars")

    def _hot_page(
        self,
        request: Request,
        error: str | None = None,
        status: int = 200,
        draft: dict[str, str] | None = None,
    ) -> Response:
        with self.b.memory() as memory:
            try:
                text = memory.hot()
                revision = memory.revision("hot")
                stats = memory.stats()
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(
            request,
            "hot.html",
            status=status,
            title="HOT.md",
            text=text,
            revision=revision,
            stats=stats,
            error=error,
            draft=draft,
        )

    def task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        with self.b.memory() as memory:
            try:
                family = memory.task_family(task_id)
                notes = memory.notes(task_id)
            except MemdirError as exc:
                return self.b.problem(request, exc)
        if family.task is None and not notes:
            missing = NotFoundError(f"no task {task_id}: neither registered nor with notes")
            return self.b.problem(request, missing)
        return self.b.page(
            request,
            "task.html",
            title=f"Task {task_id}",
            task_id=task_id,
            family=family,
            notes=notes,
        )

    def daily(self, request: Request) -> Response:
        day = request.path_params["day"]
        with self.b.memory() as memory:
            try:
                date, text = memory.daily_log(day)
            except MemdirError as exc:
                return self.b.problem(request, exc)
        return self.b.page(request, "daily.html", title=f"Daily log {date}", day=date, text=text)

    # -- shared ---------------------------------------------------------------------------

    async def _write(self, write: Callable[[Memory], Any]) -> Any:
        """A write, on a worker thread (it takes file locks and may wait for them)."""
        from starlette.concurrency import run_in_threadpool

        def run() -> Any:
            with self.b.memory() as memory:
                return write(memory)

        return await run_in_threadpool(run)

    async def _confirm(
        self,
        request: Request,
        title: str,
        what: str,
        content: str | None,
        fields: dict[str, Any],
    ) -> Response:
        """V5: nothing is written until the person confirms: this page shows what will
        be, and posts the same form again with confirm=yes."""
        kept = {k: str(v) for k, v in fields.items() if k not in ("csrf", "confirm")}
        return self.b.page(
            request,
            "confirm.html",
            title=title,
            what=what,
            content=content,
            fields=kept,
            action=request.url.path,
            back=request.url.path.removesuffix("/supersede").removesuffix("/remove"),
        )


def _status(exc: MemdirError) -> int:
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, NotFoundError):
        return 404
    return 400 if isinstance(exc, ValidationError) else 422


def cookie_name(port: int) -> str:
    return f"memdir_ui_{port}"


def state_dir_env(memory: Memory) -> dict[str, str]:
    """What a per-request Memory needs to reach the same store (L5), whatever named it."""
    return {**os.environ, **memory.child_env()}
