"""`memdir hook EVENT` (K2): memdir inside an agent host's loop. The host (Claude Code)
runs the command at a lifecycle event with the event's JSON on stdin and reads what it
prints; this module turns one event into one reply.

A hook never breaks the host: bad input, a missing field, an unknown event, a broken
store or a bug is one line on stderr and exit 0 with nothing printed, and a hook that
would run past `[hooks] timeout_ms` gives up the same way (a watchdog ends the process:
SQLite's transactions and memdir's file writes are atomic, so what was under way is
either done or not). It starts as fast as any CLI call: json, the facade, nothing more
(tools.py only when a subagent calls a memdir tool).

One handler per event in EVENTS: a new event (Stop, PreCompact...) is one more function.
"""

from __future__ import annotations

import os
import sys
import time

from . import process
from .errors import MemdirError, SecretError, ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from .identity import BootPart
    from .memory import Memory
    from .settings import Settings

SURFACE = "claude-code"
SESSION_END_MS = 1200  # Claude Code gives SessionEnd hooks 1.5 s unless told otherwise
PROJECT_ENV = "CLAUDE_PROJECT_DIR"  # the project Claude Code runs in: its .memdir/ is found
READ_ONLY_LINE = (
    "memdir: memory is read-only in this subagent: search it and read files "
    "(memory_search, memory_get, memory_recall); hand what should be remembered back to the "
    "main session, which writes it."
)


class Reply:
    """What the hook prints (stdout, for the host) and the one line it says on stderr."""

    def __init__(self, out: str = "", warning: str | None = None) -> None:
        self.out, self.warning = out, warning


class Hook:
    """One event's input and the store it reaches, opened on first use."""

    def __init__(
        self,
        event: str,
        data: dict[str, Any],
        env: Mapping[str, str],
        state_dir: str | None,
        surface: str = SURFACE,
    ) -> None:
        self.event, self.data, self.env, self.state_dir = event, data, env, state_dir
        self.surface = surface  # the host: claude-code, or codex (`memdir hook --host`)
        self._memory: Memory | None = None
        self._timer: Watchdog | None = None
        self._started = time.monotonic()
        self.warnings: list[str] = []
        from .settings import DEFAULTS

        # from the start: a slow transcript or store open counts too (until the store's
        # settings are read, the general budget: a prompt's short one starts with them)
        self._arm(DEFAULTS, short=False)

    def field(self, name: str) -> str:
        value = self.data.get(name)
        if not isinstance(value, str) or not value:
            raise ValidationError(f"the {self.event} input has no {name!r}")
        return value

    @property
    def memory(self) -> Memory:
        return self.open()

    def open(self, session: str | None = None) -> Memory:
        """The store, as `session` (whose writes then carry the host's session id) or as
        a plain caller."""
        if self._memory is None:
            from .memory import Memory

            given = self.env.get(PROJECT_ENV) or _str(self.data.get("cwd"))
            cwd = given if given and os.path.isdir(given) else os.getcwd()
            memory = Memory(
                self.state_dir, session=session, surface=self.surface, env=self.env, cwd=cwd
            )
            # the host waits for its hooks: a write never loads the model here (~0.35 s);
            # the server's worker or `memdir reindex` embeds it, search finds it by its words
            memory.settings = memory.settings._replace(search_embed_on_write="loaded")
            self._memory = memory
            self._arm(memory.settings)  # the store's own budget, counted from the start
        return self._memory

    def _arm(self, settings: Settings, short: bool = True) -> None:
        """(Re)start the watchdog for what is left of this event's budget."""
        budget = settings.hooks_timeout_ms
        if self.event == "SessionEnd":
            budget = min(budget, SESSION_END_MS)
        key = "timeout_ms"
        if self.event == "UserPromptSubmit" and short:  # the user waits: a short budget
            key = "prompt_timeout_ms"
            budget = min(budget, settings.hooks_prompt_timeout_ms)
        if self._timer is None:
            self._timer = Watchdog()
        self._timer.arm(
            f"memdir: hook {self.event} gave up after {budget:,} ms ([hooks] {key}); "
            "nothing was injected\n",
            self._started + budget / 1000,
        )

    def active(self) -> bool:
        """Memory is on ([memory] enabled) and this event is not in [hooks] off."""
        settings = self.memory.settings
        return settings.enabled and self.event not in settings.hooks_off

    def close(self) -> None:
        """Done in time: the watchdog is called off before anything is printed. The store
        is closed, but in a forked call's child (cli/common.close_opened says why)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._memory is not None and not process.forked():
            self._memory.close()


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def context(event: str, text: str) -> str:
    """Claude Code's answer that puts `text` in front of the model."""
    import json

    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}},
        ensure_ascii=False,
    )


# -- the events --------------------------------------------------------------------------


def session_start(hook: Hook) -> str:
    """E3 at the host's SessionStart (startup, resume, clear, compact): the host's session
    is adopted (U1; a resumed one opened again), and the boot context goes in front of
    the model within `[hooks] start_budget_chars`."""
    memory = hook.memory
    if not hook.active():
        return ""
    try:
        session_id = hook.field("session_id")
        # the host's MCP server lives as long as the host process, across /clear
        from .sessions import host_process

        memory.adopt_session(session_id, hook.surface, reopen=True, host=host_process(hook.env))
    except MemdirError as exc:  # the context still reaches the model
        hook.warnings.append(f"the session was not recorded: {exc}")
    boot = memory.boot(subagent=False)
    text = fit(boot.parts, memory.settings.hooks_start_budget_chars, memory.path)
    return context("SessionStart", text) if text else ""


def subagent_start(hook: Hook) -> str:
    """U2 at SubagentStart: the read-only slice (HOT.md and the line that says memory is
    read-only here), not the whole boot; the subagent is recorded under its parent."""
    memory = hook.memory
    if not hook.active():
        return ""
    agent, parent = hook.field("agent_id"), hook.field("session_id")
    try:
        memory.adopt_session(agent, hook.surface, parent=parent)
    except MemdirError as exc:
        hook.warnings.append(f"the subagent session was not recorded: {exc}")
    hot = [p for p in memory.boot(subagent=True).parts if p.name == "HOT.md"]
    budget = memory.settings.hooks_start_budget_chars - len(READ_ONLY_LINE) - 1
    text = fit(hot, budget, memory.path, header=False)
    return context("SubagentStart", f"{text}{READ_ONLY_LINE}")


def pre_tool_use(hook: Hook) -> str:
    """U2 at PreToolUse: a memdir write tool called inside a subagent (the input carries
    agent_id, which only a subagent's calls have) is denied with the one-line reason the
    model sees; anything else is let through with no answer."""
    if not _str(hook.data.get("agent_id")):
        return ""
    tool = _memdir_tool(hook.field("tool_name"))
    if tool is None:
        return ""
    from .tools import TOOLS  # only here: a subagent calling one of memdir's tools

    found = TOOLS.get(tool)
    if found is None or found.read_only or not hook.active():
        return ""
    import json

    reason = (
        f"memdir: {tool} was not run: memory is read-only in a subagent; search and read it "
        "(memory_search, memory_get), and hand what should be remembered back to the main "
        "session in your answer."
    )
    return json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    )


def session_end(hook: Hook) -> str:
    """U3 at SessionEnd: the host's session is recorded ended, with the counts of what it
    wrote (adopted first if memdir never saw it)."""
    memory = hook.memory
    if not hook.active():
        return ""
    session_id = hook.field("session_id")
    found = memory.adopt_session(session_id, hook.surface)
    if found.ended is None:
        memory.end_session(session_id)
    return ""


def stop(hook: Hook) -> str:
    """M1-M6 at Stop: the memorize blocks of the main session's last answer are applied as
    the host's session, once however often the host hands over the same answer; what was
    stored, or why not, is a line the user sees."""
    session_id = hook.field("session_id")
    answer = _last_answer(hook, "transcript_path")
    if BLOCK_KEYWORD not in answer:  # most turns: no store opened
        return ""
    memory = hook.open(session_id)
    if not hook.active():
        return ""
    ingested = memory.ingest_once(answer, session_id)
    if ingested is None:
        return ""
    said = [
        f"logged a note in {a.target}"
        if a.action == "logged"
        else f"memorized {a.scope} {a.target} ({a.action})"
        for a in ingested.applied
    ]
    return _system_message([*said, *ingested.warnings])


def subagent_stop(hook: Hook) -> str:
    """U2 at SubagentStop: a subagent's memory is read-only, so the blocks in its last
    answer are dropped, with a line saying so; the main session writes what it hands back."""
    agent, parent = hook.field("agent_id"), hook.field("session_id")
    if hook.data.get("agent_type") == "":
        return ""  # the host's own helper (2.1.332's compaction summarizer), not a subagent
    answer = _last_answer(hook, "agent_transcript_path")
    if BLOCK_KEYWORD not in answer:
        return ""
    memory = hook.memory
    if not hook.active():
        return ""
    memory.adopt_session(agent, hook.surface, parent=parent)
    memory.bind_session(agent)
    ingested = memory.ingest(answer)  # refused by U2: nothing is written
    if not ingested.warnings:
        return ""
    return _system_message(
        [
            f"subagent {agent}: {w}; the main session writes what it hands back"
            for w in ingested.warnings
        ]
    )


def compaction(hook: Hook) -> str:
    """E1 at PreCompact / PostCompact: the compaction goes in today's daily log as the
    host's session, with the host's summary where it gives one (PostCompact), so the next
    SessionStart (compact) re-injects it with the log."""
    session_id = hook.field("session_id")
    memory = hook.open(session_id)
    if not hook.active():
        return ""
    trigger = _str(hook.data.get("trigger")) or "unknown trigger"
    done = "compacted" if hook.event == "PostCompact" else "is compacting"
    host = HOST_NAMES.get(hook.surface, hook.surface)
    line = f"{host} {done} the context of session {session_id} ({trigger})."
    instructions = _str(hook.data.get("custom_instructions"))
    if instructions:
        line += f" Instructions: {_cut(' '.join(instructions.split()), 500)}"
    summary = _str(hook.data.get("compact_summary"))
    text = f"{line}\n\nIts summary:\n\n{_cut(summary.strip(), SUMMARY_MAX)}" if summary else line
    try:
        memory.daily_append(text)
    except SecretError as exc:  # the summary quotes a credential: the line alone is logged
        if text == line:
            raise
        memory.daily_append(line + " (its summary was not logged: it holds a secret)")
        hook.warnings.append(f"the summary was not logged: {exc}")
    return ""


HOST_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}
SUMMARY_MAX = 2000  # chars of the host's summary logged: the log is part of every boot
BLOCK_KEYWORD = "_MEMORIZE_BEGIN"  # in every block, whatever the prefix (M1)
TRANSCRIPT_TAIL = 8 << 20  # bytes read from a transcript's end to find the last answer


def _cut(text: str, most: int) -> str:
    if len(text) <= most:
        return text
    end = text.rfind("\n", 0, most)
    end = end if end > most // 2 else text.rfind(" ", 0, most)
    end = end if end > most // 2 else most
    return f"{text[:end].rstrip()} [... cut: {len(text):,} chars in all]"


def _system_message(lines: list[str]) -> str:
    """Claude Code's answer that shows the user one line (a Stop hook cannot reach the
    model without making it go on)."""
    import json

    from .markers import defang  # R4: what a block said is shown, never live

    if not lines:
        return ""
    said = defang("memdir: " + "; ".join(lines))
    return json.dumps({"systemMessage": said}, ensure_ascii=False)


def _last_answer(hook: Hook, transcript_field: str) -> str:
    """The text of the last assistant message: the host's `last_assistant_message`, or
    (a host that does not send it) the last assistant message in the JSONL transcript."""
    given = hook.data.get("last_assistant_message")
    if isinstance(given, str):
        return given
    path = _str(hook.data.get(transcript_field))
    if path is None:
        raise ValidationError(
            f"the {hook.event} input has neither 'last_assistant_message' nor {transcript_field!r}"
        )
    return last_assistant_text(path)


def last_assistant_text(path: str) -> str:
    """The text blocks of the last assistant message of a Claude Code transcript (JSONL:
    one line per content block, the blocks of one message sharing its `message.id`)."""
    import json
    import stat

    try:
        with open(path, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValidationError(f"the transcript {path} is not a file")
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - TRANSCRIPT_TAIL))
            tail = handle.read(TRANSCRIPT_TAIL)  # a file still growing: no more than this
    except OSError as exc:
        raise ValidationError(f"cannot read the transcript {path}: {exc.strerror}") from exc
    lines = tail.decode("utf-8", errors="replace").splitlines()
    if size > TRANSCRIPT_TAIL:
        lines = lines[1:]  # the first is cut
    texts: list[str] = []
    seen, message_id = False, None
    for raw in reversed(lines):
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or entry.get("type") not in ("assistant", "user"):
            continue  # summaries, system lines, metadata
        if entry["type"] == "user" or (seen and message.get("id") != message_id):
            break  # the message before the last answer
        seen, message_id = True, message.get("id")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in reversed(blocks if isinstance(blocks, list) else []):
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                texts.append(text if isinstance(text, str) else "")
    return "\n".join(reversed(texts))


def user_prompt_submit(hook: Hook) -> str:
    """K2 at UserPromptSubmit, when `[hooks] recall_on_prompt` is on: the few hits the
    prompt's words find, within `[hooks] prompt_budget_chars`. Lexical only, even with the
    embeddings extra: loading the model takes longer than the whole time budget, and a
    hook that gives up injects nothing. The prompt is untrusted text, never query syntax:
    its words are searched as plain words. Nothing is injected when no hit shares at
    least two of them (a one-word prompt, "yes" or "go on", recalls nothing), nor what
    HOT.md, already in the boot context, holds."""
    memory = hook.memory
    settings = memory.settings
    if not (hook.active() and settings.hooks_recall_on_prompt):
        return ""
    words = prompt_words(_str(hook.data.get("prompt")) or "")
    if len(words) < PROMPT_MIN_WORDS:
        return ""
    hits = memory.search(" ".join(words), limit=PROMPT_CANDIDATES, mode="lexical")
    hot = " ".join(memory.hot().split())
    lines: list[str] = []
    room = settings.hooks_prompt_budget_chars - len(PROMPT_HEADER)
    for hit in hits:
        text = " ".join(hit.content.split())
        if covered(words, text) < PROMPT_MIN_WORDS or (hot and text in hot):
            continue
        line = _hit_line(hit.kind, hit.id, hit.path, hit.lines, hit.category, text)
        if len(line) + 1 > room:
            continue
        lines.append(line)
        room -= len(line) + 1
        if len(lines) == PROMPT_HITS:
            break
    if not lines:
        return ""
    return context("UserPromptSubmit", PROMPT_HEADER + "".join(f"{line}\n" for line in lines))


PROMPT_HITS = 3  # the few most relevant hits a prompt is given
PROMPT_CANDIDATES = 12  # searched for them: some fall under the floor or are in HOT.md
PROMPT_MIN_WORDS = 2  # the floor: a hit shares at least this many of the prompt's words
PROMPT_SCAN_CHARS = 2000  # of a prompt, the start is searched: a pasted log is not a query
PROMPT_MAX_WORDS = 24  # ...and at most this many of its distinct words
SNIPPET_CHARS = 300
# What a prompt says to the agent, not about the work: never searched for.
PROMPT_CHATTER = frozenset(
    "ok okay yes yeah yep sure no nope thanks thank please go continue hi hello hey great "
    "fine cool good lgtm".split()
)
PROMPT_HEADER = (
    "# memdir: memory that may bear on this prompt (read more with memory_get PATH from "
    "LINE, find more with memory_search)\n"
)


def prompt_words(prompt: str) -> list[str]:
    """The words of a prompt a search looks for: lower-cased, no stopwords, chatter
    ("ok, go on") or single letters, each once, from its start. Plain words only, so no
    quote, operator or parenthesis in a prompt is ever read as query syntax."""
    from .query import STOPWORDS, WORD_RE

    found: dict[str, None] = {}
    for word in WORD_RE.findall(prompt[:PROMPT_SCAN_CHARS].lower()):
        word = word.strip("_")
        if len(word) > 1 and word not in STOPWORDS and word not in PROMPT_CHATTER:
            found[word] = None
            if len(found) == PROMPT_MAX_WORDS:
                break
    return list(found)


def covered(words: list[str], text: str) -> int:
    """How many of `words` `text` holds, words alike in their first four letters (all of a
    shorter word) counting as one: the index stems words (porter), so "signed" found
    "signing"; this counts them alike without a stemmer, and "tests testing" as one word."""
    from .query import WORD_RE

    stems = {w[:4] for w in WORD_RE.findall(text.lower())}
    return len(stems & {w[:4] for w in words})


def _hit_line(
    kind: str,
    item: int | None,
    path: str | None,
    lines: tuple[int, int] | None,
    category: str | None,
    text: str,
) -> str:
    """One hit on one line: what it is, where to read it, its start (defanged, R4)."""
    from .markers import defang

    if path is not None:
        where = f"{kind} {path}" + (f" line {lines[0]}" if lines else "")
    else:
        where = f"{kind} #{item}" + (f" ({category})" if category else "")
    text = defang(text)
    snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 2] + " …"
    return f"- [{where}] {snippet}"


def _memdir_tool(name: str) -> str | None:
    """The memdir tool an MCP tool name calls: mcp__<server>__<tool> with memdir in the
    server's name (`memdir`, or a plugin's `plugin_memdir_memdir`)."""
    if not name.startswith("mcp__"):
        return None
    server, _, tool = name[5:].rpartition("__")
    return tool if "memdir" in server and tool else None


EVENTS: dict[str, Callable[[Hook], str]] = {
    "SessionStart": session_start,
    "SubagentStart": subagent_start,
    "PreToolUse": pre_tool_use,
    "Stop": stop,
    "SubagentStop": subagent_stop,
    "PreCompact": compaction,
    "PostCompact": compaction,
    "SessionEnd": session_end,
    "UserPromptSubmit": user_prompt_submit,
}


# -- the budget ----------------------------------------------------------------------------

TRAILER_ROOM = 400  # chars kept for the last line, which names what was left out
MIN_CUT = 200  # a part cut shorter than this is left out whole instead


def fit(parts: list[BootPart], budget: int, root: str, header: bool = True) -> str:
    """The parts in order, each whole while it fits in `budget`; the first that does not
    is cut at a line break (if enough room is left), later ones only if they fit whole.
    A last line names what was left out and how to read it."""
    chunks: list[str] = []
    left_out: list[str] = []
    room = budget - TRAILER_ROOM
    if header:
        chunks.append("# memdir: memory from earlier sessions\n")
        room -= len(chunks[0])
    for part in parts:
        title = f"## {part.name}\n"
        body = part.text.rstrip("\n") + "\n"
        name = _readable(part.path, root)
        if len(title) + len(body) + 1 <= room:
            chunks.append(f"{title}{body}\n")
            room -= len(chunks[-1])
            continue
        keep = room - len(title) - 1
        if keep >= MIN_CUT:
            end = body.rfind("\n", 0, keep)
            head = body[: end if end > 0 else keep].rstrip("\n") + "\n"
            chunks.append(f"{title}{head}\n")
            room -= len(chunks[-1])
            left_out.append(f"{name} (cut after {len(head):,} of {len(body):,} chars)")
        else:
            left_out.append(f"{name} ({len(body):,} chars)")
    if not parts:
        return ""
    text = "".join(chunks).rstrip("\n") + "\n"
    if left_out:
        text += "\n" + _trailer(left_out, budget - len(text) - 1)
    return text


def _trailer(left_out: list[str], room: int) -> str:
    how = (
        "; read them with the memory_get tool (its path as named here) or "
        "`memdir get PATH`, or find what you need with memory_search.\n"
    )
    named: list[str] = []
    for i, item in enumerate(left_out):
        rest = len(left_out) - i - 1
        more = f" and {rest} more" if rest else ""
        line = "memdir: left out to stay within the budget: " + ", ".join([*named, item]) + more
        if len(line) + len(how) > room and named:
            break
        named.append(item)
    rest = len(left_out) - len(named)
    more = f" and {rest} more" if rest else ""
    return "memdir: left out to stay within the budget: " + ", ".join(named) + more + how


def _readable(path: str, root: str) -> str:
    """The name `memdir get` and memory_get take: relative to the memory root, or the
    identity file's own name."""
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return os.path.basename(path) if rel.startswith("../") else rel


# -- the dispatcher ------------------------------------------------------------------------


def run(
    event: str | None,
    stdin: str,
    env: Mapping[str, str] | None = None,
    state_dir: str | None = None,
    surface: str = SURFACE,
) -> Reply:
    """One event's reply; never raises. `surface` names the host whose sessions these
    are (claude-code, codex: Codex's hook input and replies have Claude Code's shape)."""
    import json

    env = os.environ if env is None else env
    handler = EVENTS.get(event or "")
    if handler is None:
        known = ", ".join(EVENTS)
        return Reply(warning=f"unknown hook event {event!r}: memdir answers {known}")
    if not stdin.strip():
        return Reply(warning="no input on stdin, where the host sends the event's JSON")
    try:
        data = json.loads(stdin)
    except ValueError as exc:
        return Reply(warning=f"the input is not JSON ({exc}); nothing was done")
    if not isinstance(data, dict):
        return Reply(warning="the input is not a JSON object; nothing was done")
    hook = Hook(event or "", data, env, state_dir, surface)
    try:
        out = handler(hook)
    except MemdirError as exc:
        return Reply(warning=f"{exc}; nothing was done")
    except Exception as exc:  # a bug: still never the host's problem
        return Reply(warning=f"internal error: {type(exc).__name__}: {exc} (please report it)")
    finally:
        hook.close()
    return Reply(out, "; ".join(hook.warnings) or None)


class Watchdog:
    """Give up once the hook has run its budget: one line on stderr, exit 0, nothing
    printed; the host goes on as if the hook had said nothing. One thread for the whole
    event, whose deadline may move (the store's own budget, once its settings are read)."""

    def __init__(self) -> None:
        import threading

        self._changed = threading.Condition()
        self._deadline: float | None = None
        self._message = ""
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._started = False

    def arm(self, message: str, deadline: float) -> None:
        """Give up with `message` at `deadline` (time.monotonic), unless called off."""
        with self._changed:
            self._message, self._deadline = message, deadline
            self._changed.notify()
        if not self._started:
            self._started = True
            self._thread.start()

    def cancel(self) -> None:
        with self._changed:
            self._deadline = None
            self._changed.notify()

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._deadline is None:
                    self._changed.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left <= 0:
                    sys.stderr.write(self._message)
                    sys.stderr.flush()
                    os._exit(0)
                self._changed.wait(left)
