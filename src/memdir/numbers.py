"""Whole numbers from outside (CLI options, tool arguments, config, hand-written files):
one validator, so every number is range-checked at the boundary and none reaches SQLite,
time functions or a loop unchecked (X3). Each kind of number has its range here."""

from __future__ import annotations

import re

from .errors import ValidationError

INT64_MAX = 2**63 - 1  # SQLite's INTEGER; a larger id overflows in the driver
MAX_LINES = 1_000_000_000  # lines of one file: more than any file memdir reads has
MAX_CHARS = 10_000_000  # an injection or distillation budget: far above any context window
MAX_DAYS = 36_500  # a hundred years
MAX_HOURS = 87_600.0  # ten years: a heartbeat threshold
MAX_UNIX = 253_402_300_799  # 9999-12-31T23:59:59Z: the last moment a date renders
MAX_TIMEOUT_MS = 600_000  # ten minutes of waiting for a lock
MAX_BYTES = 64 * 1024 * 1024  # one entry or fact

_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only: int() also takes '١٢' and '1_0'


def check_int(
    value: object,
    what: str,
    *,
    low: int = 1,
    high: int = INT64_MAX,
    strings: bool = False,
    hint: str = "",
) -> int:
    """`value` as an int in [low, high], else one clear ValidationError. Booleans and
    floats are refused (JSON's `true` and `1.5` are not counts); a string is taken only
    where the caller allows it (`strings`, e.g. an id typed on the command line) and only
    as plain ASCII digits."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif strings and isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        number = int(value.strip())
    if number is None or not low <= number <= high:
        top = f" to {high:,}"
        raise ValidationError(
            f"bad {what} {_show(value)}: give a whole number from {low:,}{top}"
            + (f"; {hint}" if hint else "")
        )
    return number


def check_number(
    value: object, what: str, *, low: float, high: float, above: bool = False
) -> float:
    """A finite int or float in [low, high] (or (low, high] with `above`); booleans, NaN
    and infinities are refused."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        number = float(value)  # type: ignore[arg-type]  # `ok`: an int or float, unseen by mypy
        ok = (number > low if above else number >= low) and number <= high
    if not ok:
        side = "above" if above else "from"
        raise ValidationError(
            f"bad {what} {_show(value)}: give a number {side} {low:g} to {high:g}"
        )
    return float(value)  # type: ignore[arg-type]  # `ok` held: an int or float


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_whole(text: str) -> int:
    """argparse `type=` for whole-number options: ASCII digits with an optional sign only
    (int() would take '１２', '٣' and '1_0'); the range is checked by the facade."""
    if not isinstance(text, str) or not re.fullmatch(r"-?[0-9]{1,30}", text.strip()):
        raise ValueError(text)
    return int(text.strip())


parse_whole.__name__ = "whole number"
