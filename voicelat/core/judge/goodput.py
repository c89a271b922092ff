"""Goodput: the share of turns that were fast enough *and* intelligible *and* cheap enough, and
the latency x cost / latency x quality Pareto fronts of a comparison (pure; no I/O).

A turn is *good* when it completed, its e2e is within the budget's e2e limit, its reply WER is at
most ``max_wer`` and its cost at most ``max_cost``. A criterion applies only when its limit
and its figures exist (no e2e limit in the budget, a run never scored for WER, a pipeline
without prices): the criteria that applied are listed with the share, so a goodput judged on
latency alone never passes for one judged on all three. A turn missing a figure an applied
criterion needs is not good (``unscored``): an unknown is never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicelat.core.base.turn import Turn

#: Reply WER above which a reply is not intelligible enough to count (Whisper tiny.en's own
#: error on clean TTS speech is a few per cent: docs/COMPARE.md).
DEFAULT_MAX_WER = 0.2
#: The budget percentiles whose e2e limit becomes the per-turn limit, in order of preference.
_E2E_KEYS = ("p90_ms", "p50_ms", "p99_ms")


@dataclass(frozen=True, slots=True)
class GoodputRule:
    """The per-turn limits; None: that criterion does not apply."""

    e2e_limit_ns: int | None = None
    max_wer: float | None = DEFAULT_MAX_WER
    max_cost: float | None = None

    @classmethod
    def from_budget(
        cls, budget: Mapping[str, Any], max_wer: float | None = DEFAULT_MAX_WER
    ) -> GoodputRule:
        """The rule a ``[budget]`` table implies: its e2e P90 limit (else P50, else P99) per
        turn, and its ``cost_per_turn`` as the cost ceiling."""
        e2e = budget.get("e2e")
        limit = None
        if isinstance(e2e, Mapping):
            found = [e2e[k] for k in _E2E_KEYS if isinstance(e2e.get(k), int | float)]
            limit = round(found[0] * 1_000_000) if found else None
        cost = budget.get("cost_per_turn")
        return cls(limit, max_wer, float(cost) if isinstance(cost, int | float) else None)


@dataclass(frozen=True, slots=True)
class Goodput:
    """The share of good turns among the completed-or-failed measured turns, and why the others
    were not."""

    share: float | None
    good: int
    turns: int
    criteria: tuple[str, ...]
    not_good: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "share": self.share,
            "good": self.good,
            "turns": self.turns,
            "criteria": list(self.criteria),
            "not_good": dict(self.not_good),
        }


def goodput(
    turns: Sequence[Turn],
    rule: GoodputRule,
    wer: Mapping[int, float],
    cost: Mapping[int, float],
) -> Goodput:
    """Goodput of the measured (not warm-up, not cold) turns; ``wer`` and ``cost`` map a turn
    index to its reply WER and its cost (absent: not scored / not priced)."""
    measured = [t for t in turns if not t.warmup and not t.cold]
    criteria = []
    if rule.e2e_limit_ns is not None:
        criteria.append(f"e2e <= {rule.e2e_limit_ns / 1e6:g} ms")
    use_wer = rule.max_wer is not None and bool(wer)
    if use_wer:
        criteria.append(f"reply WER <= {rule.max_wer:.0%}")
    use_cost = rule.max_cost is not None and bool(cost)
    if use_cost:
        criteria.append(f"cost <= {rule.max_cost:g}")
    not_good: dict[str, int] = {}
    good = 0
    for t in measured:
        why = _why_not(t, rule, wer if use_wer else None, cost if use_cost else None)
        if why is None:
            good += 1
        else:
            not_good[why] = not_good.get(why, 0) + 1
    share = good / len(measured) if measured else None
    return Goodput(share, good, len(measured), tuple(criteria), not_good)


def _why_not(
    t: Turn, rule: GoodputRule, wer: Mapping[int, float] | None, cost: Mapping[int, float] | None
) -> str | None:
    """The first criterion ``t`` breaks (None: a good turn)."""
    if not t.ok or t.e2e_ns is None:
        return "failed"
    if rule.e2e_limit_ns is not None and t.e2e_ns > rule.e2e_limit_ns:
        return "slow"
    if wer is not None and rule.max_wer is not None:
        w = wer.get(t.index)
        if w is None:
            return "unscored"
        if w > rule.max_wer:
            return "unintelligible"
    if cost is not None and rule.max_cost is not None:
        c = cost.get(t.index)
        if c is None:
            return "unpriced"
        if c > rule.max_cost:
            return "over cost"
    return None


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The names whose (x, y) no other point beats on both (lower is better on both axes), in
    order of x: the combinations worth choosing between."""
    front = []
    for name, (x, y) in points.items():
        dominated = any(
            ox <= x and oy <= y and (ox < x or oy < y)
            for other, (ox, oy) in points.items()
            if other != name
        )
        if not dominated:
            front.append(name)
    return sorted(front, key=lambda n: points[n])


__all__ = ["DEFAULT_MAX_WER", "Goodput", "GoodputRule", "goodput", "pareto_front"]
