"""Numbers on the command line, in ASCII digits only.

Python's int() and float() read any Unicode decimal digit: `--threads ８` (a full-width 8, typed
by an input method) or `--repeat ３` ran as 8 and 3 while the shell history, the manifest's
recorded command line and every script that greps it say something else. A number an option takes
is written in ASCII digits (an optional sign, a decimal point, an exponent); anything else is
refused by argparse with one line naming the option and the value.
"""

from __future__ import annotations

import argparse
import re

INT = re.compile(r"[+-]?[0-9]+")
# inf and nan pass as words: the setting that reads them says why they are not a duration
FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def parse_int(text: str) -> int:
    """`text` as a whole number in ASCII digits; ValueError else."""
    t = str(text).strip()
    if not INT.fullmatch(t):
        raise ValueError(f"expected a whole number in ASCII digits (0-9), got {text!r}")
    return int(t)


def parse_float(text: str) -> float:
    """`text` as a number in ASCII digits (or the words inf, nan: each option's own check says
    why they are refused, naming its setting); ValueError else."""
    t = str(text).strip()
    if not FLOAT.fullmatch(t):
        raise ValueError(f"expected a number in ASCII digits (0-9), got {text!r}")
    return float(t)


def ascii_int(text: str) -> int:
    """argparse type: a whole number (argparse names the option in its one-line error)."""
    try:
        return parse_int(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def ascii_int_in(low: int, high: int):
    """argparse type: a whole number in [low, high] (a seed a library takes as 32 bits: a larger
    one must be refused here, in one line, before anything is written)."""

    def parse(text: str) -> int:
        n = ascii_int(text)
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high}, got {text!r}")
        return n

    return parse


def ascii_float(text: str) -> float:
    """argparse type: a number (argparse names the option in its one-line error)."""
    try:
        return parse_float(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
