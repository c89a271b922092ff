"""Latency distributions of emulator profiles, in milliseconds.

A profile value is either a bare number (a fixed delay) or a table naming the distribution::

    ttft = 120                                                # fixed 120 ms
    ttft = { dist = "fixed", ms = 120 }
    ttft = { dist = "normal", mean = 300, sd = 40 }
    ttft = { dist = "lognormal", median = 300, sigma = 0.4 }  # median = exp(mu)
    ttft = { dist = "empirical", values = [210, 250, 330] }   # drawn uniformly
    ttft = { dist = "normal", mean = 30, sd = 20, min = 5, max = 80 }   # clamped

Samples are never negative (a delay cannot run backwards). Sampling takes the caller's
``random.Random`` so a seeded emulator draws the same sequence every run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from voicelat.core.base.errors import ConfigError

__all__ = ["Dist", "Empirical", "Fixed", "LogNormal", "Normal", "parse_dist"]


@dataclass(frozen=True, slots=True)
class Dist:
    """Base: clamps every sample into ``[lo, hi]`` (``lo`` at least 0)."""

    lo: float = 0.0
    hi: float = math.inf

    def sample(self, rng: random.Random) -> float:
        """One delay in milliseconds."""
        return min(self.hi, max(self.lo, self._draw(rng)))

    def _draw(self, rng: random.Random) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        """A short human-readable form, for ``voicelat serve`` and the docs."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Fixed(Dist):
    """Always the same delay: what accuracy tests inject."""

    ms: float = 0.0

    def _draw(self, rng: random.Random) -> float:
        return self.ms

    def describe(self) -> str:
        return f"{self.ms:g} ms"


@dataclass(frozen=True, slots=True)
class Normal(Dist):
    mean: float = 0.0
    sd: float = 0.0

    def _draw(self, rng: random.Random) -> float:
        return rng.gauss(self.mean, self.sd)

    def describe(self) -> str:
        return f"normal(mean {self.mean:g} ms, sd {self.sd:g})"


@dataclass(frozen=True, slots=True)
class LogNormal(Dist):
    """Right-skewed, like real network and inference latency; ``median`` = exp(mu)."""

    median: float = 1.0
    sigma: float = 0.0

    def _draw(self, rng: random.Random) -> float:
        return rng.lognormvariate(math.log(self.median), self.sigma)

    def describe(self) -> str:
        return f"lognormal(median {self.median:g} ms, sigma {self.sigma:g})"


@dataclass(frozen=True, slots=True)
class Empirical(Dist):
    """Uniform draws from measured values (e.g. TTFTs recorded against the real provider)."""

    values: tuple[float, ...] = (0.0,)

    def _draw(self, rng: random.Random) -> float:
        return self.values[rng.randrange(len(self.values))]

    def describe(self) -> str:
        return f"empirical({len(self.values)} values)"


_PARAMS: dict[str, set[str]] = {
    "fixed": {"ms"},
    "normal": {"mean", "sd"},
    "lognormal": {"median", "sigma"},
    "empirical": {"values"},
}


def _number(value: object, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} must be a number of milliseconds, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {key} must be finite, got {value!r}")
    return float(value)


def parse_dist(value: object, where: str) -> Dist:
    """A distribution from a profile value; ``where`` names it in errors (``[openai.latency] ttft``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        ms = _number(value, where, "value")
        if ms < 0:
            raise ConfigError(f"{where}: a delay cannot be negative, got {value!r}")
        return Fixed(ms=ms)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{where}: must be a number of ms or a table like "
            f'{{ dist = "lognormal", median = 300, sigma = 0.4 }}, got {value!r}'
        )
    kind = value.get("dist")
    if kind not in _PARAMS:
        raise ConfigError(f"{where}: dist must be one of {', '.join(_PARAMS)}, got {kind!r}")
    allowed = _PARAMS[kind] | {"dist", "min", "max"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} for dist {kind!r}; "
            f"valid keys: {', '.join(sorted(allowed))}"
        )
    missing = sorted(_PARAMS[kind] - set(value))
    if missing:
        raise ConfigError(f"{where}: dist {kind!r} needs {', '.join(missing)}")
    lo = _number(value.get("min", 0.0), where, "min")
    hi = _number(value.get("max", math.inf), where, "max") if "max" in value else math.inf
    if lo < 0 or hi < lo:
        raise ConfigError(f"{where}: need 0 <= min <= max, got min {lo:g}, max {hi:g}")
    if kind == "fixed":
        ms = _number(value["ms"], where, "ms")
        if ms < 0:
            raise ConfigError(f"{where}: a delay cannot be negative, got {ms:g}")
        return Fixed(lo=lo, hi=hi, ms=ms)
    if kind == "normal":
        sd = _number(value["sd"], where, "sd")
        if sd < 0:
            raise ConfigError(f"{where}: sd cannot be negative, got {sd:g}")
        return Normal(lo=lo, hi=hi, mean=_number(value["mean"], where, "mean"), sd=sd)
    if kind == "lognormal":
        median = _number(value["median"], where, "median")
        sigma = _number(value["sigma"], where, "sigma")
        if median <= 0 or sigma < 0:
            raise ConfigError(f"{where}: lognormal needs median > 0 and sigma >= 0")
        return LogNormal(lo=lo, hi=hi, median=median, sigma=sigma)
    values = value["values"]
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise ConfigError(f"{where}: values must be a non-empty list of ms")
    parsed = tuple(_number(v, where, "values[]") for v in values)
    if min(parsed) < 0:
        raise ConfigError(f"{where}: values cannot be negative")
    return Empirical(lo=lo, hi=hi, values=parsed)
