"""Bounded values for the commands' numeric options: argparse types that refuse with one line.

A number out of range (``--bootstrap 1000000000000``) or not a number (``--memory-limit lots``)
is refused while the arguments are parsed, as argparse refuses an unknown option: one line
naming the option, instead of a traceback from numpy or DuckDB minutes later. Every numeric
option of every command takes its type from here.

Pure: no Django, no app.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

__all__ = [
    "MAX_RESAMPLES",
    "SEED_LIMIT",
    "depth",
    "grade",
    "memory_size",
    "real_number",
    "resamples",
    "seed",
    "whole_number",
]

# Seeds are stored in 64-bit signed integer columns (a pool's display order).
SEED_LIMIT = 2**63
# One float per resample is kept (8 MB at this bound); 10,000 already gives intervals stable
# to the third decimal.
MAX_RESAMPLES = 1_000_000
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*", re.IGNORECASE)


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}, not {text}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in its messages
    return parse


def real_number(low: float, high: float) -> Callable[[str], float]:
    """An argparse type: a finite number from ``low`` to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}, not {text}")
        return value

    parse.__name__ = "number"
    return parse


seed = whole_number(0, SEED_LIMIT - 1)
resamples = whole_number(0, MAX_RESAMPLES)
grade = whole_number(-1_000, 1_000)  # a relevance threshold; qrels grades are small numbers
depth = whole_number(1, 100_000)  # documents per query and run in a pool


def memory_size(text: str) -> str:
    """An argparse type: an amount of memory as DuckDB takes it (``500MB``, ``2GB``, ``1.5GiB``)."""
    match = _MEMORY.fullmatch(text)
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"not an amount of memory: {text!r} (a number and a unit, e.g. 500MB or 2GB)"
        )
    return f"{match.group(1)}{match.group(2).upper()}"


memory_size.__name__ = "amount of memory"
