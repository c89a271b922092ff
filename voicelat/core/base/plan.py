"""The order turns run in: fixtures interleaved (A B C A B C), warm-up turns first and marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from voicelat.core.base.errors import ConfigError

#: The most turns one run plans (a million turns of ~2 s is weeks of measuring).
MAX_TURNS = 1_000_000


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    index: int
    fixture: str
    repeat: int
    warmup: bool


def plan_turns(
    fixture_ids: Sequence[str], *, repeat: int = 1, turns: int | None = None, warmup: int = 1
) -> list[PlannedTurn]:
    """Warm-up turns (cycling through the fixtures), then ``repeat`` interleaved rounds.

    ``turns`` caps the number of measured turns (cycling through the fixtures as needed).
    """
    if not fixture_ids:
        raise ValueError("no fixtures to plan")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if warmup < 0:
        raise ValueError("warmup cannot be negative")
    n_measured = turns if turns is not None else repeat * len(fixture_ids)
    if n_measured + warmup > MAX_TURNS:
        # Checked before building the list: `--turns 10**30` used to hang here.
        raise ConfigError(
            f"{n_measured + warmup:,} turns is more than a run may plan ({MAX_TURNS:,}): "
            "lower --turns, --repeat or --warmup"
        )
    out: list[PlannedTurn] = []
    for i in range(warmup):
        out.append(PlannedTurn(len(out), fixture_ids[i % len(fixture_ids)], 0, True))
    for k in range(n_measured):
        out.append(
            PlannedTurn(len(out), fixture_ids[k % len(fixture_ids)], k // len(fixture_ids), False)
        )
    return out
