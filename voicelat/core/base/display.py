"""How numbers are shown: the one milliseconds formatter and the one rounding-to-total (pure).

Every report, the TUI and the gate print durations through :func:`fmt_ms`; its parameters are
the variants they need (width, decimals, unit, sign, the text for a missing value), so a figure
reads the same wherever it is printed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

NS_PER_MS = 1_000_000


def fmt_ms(
    ns: object,
    *,
    width: int = 0,
    decimals: int = 0,
    unit: str = "",
    missing: str = "-",
    sign: bool = False,
    fine_below_ms: float | None = None,
) -> str:
    """``ns`` in milliseconds, right-aligned to ``width``; ``missing`` when it is no number.

    ``fine_below_ms``: one decimal below that many ms whatever ``decimals`` says (sub-spans
    live there, and "0" would hide them); ``sign``: always print the sign (differences).
    """
    if isinstance(ns, bool) or not isinstance(ns, int | float):
        return missing.rjust(width)
    ms = ns / NS_PER_MS
    places = 1 if fine_below_ms is not None and abs(ms) < fine_below_ms else decimals
    text = f"{ms:+.{places}f}" if sign else f"{ms:.{places}f}"
    if text.lstrip("+-").strip("0.") == "":
        # -0.3 ms rounds to "-0": a zero has no sign worth printing ("+0" for differences).
        text = text.replace("-", "+") if sign else text.lstrip("-")
    return f"{text}{unit}".rjust(width)


def round_to_total(values: Mapping[str, float], total: int) -> dict[str, int]:
    """Round each value to an integer so that they still sum to ``total`` (largest remainder).

    Bars labelled with independently rounded numbers could miss the printed total by a few
    units; a waterfall promises that its labels add up to the total it prints.
    """
    floors = {k: math.floor(v) for k, v in values.items()}
    short = total - sum(floors.values())
    by_remainder = sorted(values, key=lambda k: values[k] - floors[k], reverse=short > 0)
    if by_remainder:
        # More units short than values only happens when the values do not sum to the total
        # (a hand-edited turns.jsonl: e2e with no segments); then every value takes an equal
        # share of the whole rounds first (in O(n): a billion-ns gap once took minutes), and
        # the rest goes by remainder, rather than leaving the sum wrong.
        step = 1 if short > 0 else -1
        rounds, rest = divmod(abs(short), len(by_remainder))
        for i, k in enumerate(by_remainder):
            floors[k] += step * (rounds + (1 if i < rest else 0))
    return floors


__all__ = ["NS_PER_MS", "fmt_ms", "round_to_total"]
