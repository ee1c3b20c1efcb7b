"""Secrets never reach memory (X2): every write's text is scanned before anything is
written, and a secret is refused with the kind of secret and where it is.

Our own patterns rather than detect-secrets: that library costs ~200 ms of import on every
CLI write, and its entropy plugins flag ordinary prose unless wrapped in its file filters.
The patterns below follow the well-known token formats (as detect-secrets, gitleaks and
the providers document them), plus two generic rules: a password inside a URL, and a
credential-named assignment whose value is not a placeholder or a code reference.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from .errors import ValidationError

# (kind, pattern); the first group, when there is one, is the secret itself
PATTERNS = (
    ("a private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("an AWS access key id", r"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b"),
    ("an AWS secret access key", r"(?i)aws.{0,20}secret.{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+]{40})\b"),
    ("a GitHub token", r"\b((?:gh[pousr]_[A-Za-z0-9]{36,})|github_pat_[A-Za-z0-9_]{22,})\b"),
    ("a Slack token", r"\b(xox[abposr]-[A-Za-z0-9-]{10,})\b"),
    ("a Slack webhook", r"(https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/\w+)"),
    ("an Anthropic API key", r"\b(sk-ant-[A-Za-z0-9_-]{20,})"),
    ("an OpenAI API key", r"\b(sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,})"),
    ("a Google API key", r"\b(AIza[0-9A-Za-z_-]{35})\b"),
    ("a Stripe secret key", r"\b((?:sk|rk)_live_[0-9a-zA-Z]{20,})\b"),
    ("a JSON Web Token", r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    ("a password in a URL", r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]+:([^\s/@]+)@[^\s/]"),
)
# What each pattern cannot match without (in the lower-cased text): a substring test per
# pattern is ~50x cheaper than running it, and most text holds none of them.
NEEDLES: dict[str, tuple[str, ...]] = {
    "a private key": ("private key",),
    "an AWS access key id": ("akia", "asia", "abia", "acca"),
    "an AWS secret access key": ("aws",),
    "a GitHub token": ("gho_", "ghp_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "a Slack token": ("xox",),
    "a Slack webhook": ("hooks.slack.com",),
    "an Anthropic API key": ("sk-ant-",),
    "an OpenAI API key": ("sk-",),
    "a Google API key": ("aiza",),
    "a Stripe secret key": ("_live_",),
    "a JSON Web Token": ("eyj",),
    "a password in a URL": ("://",),
}
ASSIGNMENT = re.compile(
    r"(?i)\b(password|passwd|passphrase|pwd|secret|client[_-]?secret|api[_-]?key|"
    r"access[_-]?key|auth[_-]?token|access[_-]?token|token|private[_-]?key)\b"
    r"[\"']?\s*[:=]\s*[\"']?([^\s\"',;]+)"
)
PLACEHOLDER = re.compile(
    r"(?i)^(?:<[^>]*>|\$\{?[\w.]+\}?|%\(?\w+\)?s?|\{\{?[^}]*\}\}?|\*+|x+|\.+|-+|_+|"
    r"null|none|nil|true|false|empty|redacted|changeme|example\w*|dummy\w*|placeholder|"
    r"your[_-]?\w+|my[_-]?\w+|secret|password|token|\w*_here)$"
)


class SecretError(ValidationError):
    """X2: the text holds a secret; nothing was written."""


def check(text: str, what: str) -> None:
    """Raise SecretError naming the first secret found in `text` (a fact, an entry...)."""
    found = find(text)
    if found is not None:
        kind, line, excerpt = found
        raise SecretError(
            f"refused: the {what} holds what looks like {kind} (line {line}: {excerpt}); "
            "memdir never stores secrets: keep it in a secret manager and store where it is"
        )


def find(text: str) -> tuple[str, int, str] | None:
    """(kind, line, masked excerpt) of the first secret in `text`, or None."""
    if not text:
        return None
    lowered = text.lower()
    any_needle = _needles().search(lowered) is not None  # one scan for the common case
    for kind, pattern in _compiled() if any_needle else ():
        if not any(needle in lowered for needle in NEEDLES[kind]):
            continue
        for match in pattern.finditer(text):
            value = match.group(1) if pattern.groups else match.group(0)
            if kind == "a password in a URL" and _placeholder(value):
                continue
            return kind, _line(text, match.start()), _mask(value)
    if ":" not in text and "=" not in text:
        return None
    for match in ASSIGNMENT.finditer(text):
        name, value = match.group(1).lower(), match.group(2)
        if _looks_like_credential(name, value):
            return f"a {name} value", _line(text, match.start()), _mask(value)
    return None


@lru_cache(maxsize=1)
def _needles() -> re.Pattern[str]:
    return re.compile("|".join(re.escape(n) for kind in NEEDLES for n in NEEDLES[kind]))


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((kind, re.compile(pattern)) for kind, pattern in PATTERNS)


def _looks_like_credential(name: str, value: str) -> bool:
    value = value.rstrip(".)]}")
    if _placeholder(value) or any(ch in value for ch in "()[]{}$<>`"):
        return False  # a placeholder, a template or code: get_password(), os.environ[...]
    if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", value):
        return False  # a dotted reference: settings.API_KEY, config.token
    if name in ("password", "passwd", "passphrase", "pwd"):
        return len(value) >= 6  # a password is a secret whatever its entropy
    return len(value) >= 16 and _entropy(value) >= 3.5


def _placeholder(value: str) -> bool:
    return bool(PLACEHOLDER.match(value))


def _entropy(value: str) -> float:
    counts = {ch: value.count(ch) for ch in set(value)}
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _mask(value: str) -> str:
    """Enough to recognise it, not enough to use it."""
    if len(value) <= 8:
        return "*" * len(value)
    return f"{value[:4]}…{value[-2:]}"
