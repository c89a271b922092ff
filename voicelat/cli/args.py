"""argparse value types shared by the subcommands: a bad value is one line naming the flag."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from voicelat.core.base.region import check_region


def _number(value: str, kind: type[int] | type[float]) -> float:
    try:
        return kind(value)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None


def region_label(value: str) -> str:
    """``--region``: a short label of letters, digits, '.', '_' and '-' (core/base/region.py)."""
    try:
        return check_region(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(value: str) -> int:
    """An integer of at least 1."""
    n = int(_number(value, int))
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return n


def non_negative_int(value: str) -> int:
    """An integer of at least 0."""
    n = int(_number(value, int))
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value} cannot be negative")
    return n


def non_negative_float(value: str) -> float:
    """A number of at least 0 (nan refused)."""
    x = _number(value, float)
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"{value} cannot be negative")
    return x


def confidence(value: str) -> float:
    """A confidence level within 0.5..1 (e.g. 0.95)."""
    x = _number(value, float)
    if not 0.5 <= x < 1:
        raise argparse.ArgumentTypeError(f"{value} must be within 0.5..1 (e.g. 0.95)")
    return x


#: ``--workers``: far more worker processes than any machine (or Ray cluster) runs usefully is a
#: typo, refused before the plan is sharded (1e9 workers was a MemoryError, nothing written).
MAX_WORKERS = 1024


def worker_count(value: str) -> int:
    """``--workers``: an integer within 1..:data:`MAX_WORKERS`."""
    n = positive_int(value)
    if n > MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"{value} is more than {MAX_WORKERS} worker processes: give at most one or two per "
            "core (the run caps them at its number of turns anyway)"
        )
    return n


def ray_address(value: str) -> str:
    """``--ray``: a non-empty address (``HOST:PORT`` or ``auto``; checked when it is used). An
    empty one (``--ray ""``, an unset variable in a script) used to run locally, silently."""
    if not value.strip():
        raise argparse.ArgumentTypeError(
            "an empty address: give HOST:PORT of the Ray head, or auto (RAY_ADDRESS, else "
            "this machine's `ray start`)"
        )
    return value.strip()


def bounded_seconds(limit_s: float) -> Callable[[str], float]:
    """An argparse type: seconds within 0..``limit_s`` (``inf``, ``1e308`` and nan refused: a
    wait that long overflows the threading timeout it becomes, after the run)."""

    def seconds(value: str) -> float:
        x = non_negative_float(value)
        if not x <= limit_s:
            raise argparse.ArgumentTypeError(f"{value} is more than {limit_s:g} seconds")
        return x

    return seconds


def positive_seconds(value: str) -> float:
    """A number of seconds above 0 (finite): a timeout."""
    x = _number(value, float)
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"{value} must be a positive number of seconds")
    return x


def device_latency(value: str) -> str | float:
    """``--latency``: a sound device latency, ``low``, ``high`` or seconds within 0..2."""
    if value in ("low", "high"):
        return value
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not low, high or a number of seconds"
        ) from None
    if not 0 < seconds < 2:
        raise argparse.ArgumentTypeError(f"{value} s is not a device latency (0 < s < 2)")
    return seconds


def add_region_argument(p: argparse.ArgumentParser) -> None:
    """``--region LABEL`` (``run``, ``ci``, ``compare``; docs/NETWORK.md, "Regions")."""
    p.add_argument(
        "--region",
        type=region_label,
        default=None,
        metavar="LABEL",
        help="where this profiler runs (e.g. eu-west; default: $VOICELAT_REGION): recorded on "
        "every turn and in the summary; turns from several regions read together get a "
        "per-region table (a Ray node's own VOICELAT_REGION labels its workers' turns; "
        "docs/NETWORK.md)",
    )
