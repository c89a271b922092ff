"""Network impairment profiles: what a network does to each direction of a call, as data.

A :class:`NetworkProfile` holds one :class:`Direction` for ``up`` (voicelat toward the
provider or agent: the caller's audio, the requests) and one for ``down`` (back: the reply).
A direction is netem's vocabulary: a one-way delay, jitter with a distribution and a
correlation, random or Gilbert-Elliott (bursty) loss, reordering, duplication and a bandwidth
cap. The same profile drives the in-process relay (``engine/network.py``) and the kernel's
netem (``engine/netem.py``: :func:`netem_args` spells it as ``tc`` arguments).

Everything here is pure: the per-packet decisions come from :class:`Impairer`, seeded, so a
profile's draws are the same on every run; :class:`RealisedTally` sums what the relay actually
did (its measured delay and loss) and :func:`realised_misses` says where that missed what was
asked for, beyond :data:`DELAY_TOLERANCE_MS` / :data:`LOSS_TOLERANCE_PCT` (docs/NETWORK.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from voicelat.core.base.errors import ConfigError

__all__ = [
    "BUILTIN_PROFILES",
    "DELAY_TOLERANCE_MS",
    "DISTRIBUTIONS",
    "LOSS_TOLERANCE_PCT",
    "Direction",
    "Impairer",
    "NetworkProfile",
    "RealisedTally",
    "builtin_profile",
    "netem_args",
    "parse_profile",
    "profile_from_json",
    "realised_misses",
    "tcp_stall_ns",
]

NS_PER_MS = 1_000_000
#: Jitter distributions, as netem names them.
DISTRIBUTIONS = ("normal", "uniform", "pareto", "paretonormal")
#: A realised P50 one-way delay this far (or 10 %, whichever is more) from the requested one is
#: a miss the trust section reports.
DELAY_TOLERANCE_MS = 2.0
#: Realised loss this many percentage points (plus three binomial standard errors) off is a miss.
LOSS_TOLERANCE_PCT = 1.0

#: (key, low, high, high is exclusive) of a direction's numbers; ``None``: no upper bound.
_NUMBERS: dict[str, tuple[float, float, bool]] = {
    "delay_ms": (0, 10_000, False),
    "jitter_ms": (0, 5_000, False),
    "jitter_correlation_pct": (0, 100, False),
    "loss_pct": (0, 100, True),
    "ge_p_pct": (0, 100, False),
    "ge_r_pct": (0, 100, False),
    "ge_bad_loss_pct": (0, 100, False),
    "ge_good_loss_pct": (0, 100, True),
    "reorder_pct": (0, 100, False),
    "duplicate_pct": (0, 100, False),
    "rate_kbit": (8, 10_000_000, False),
}
_DIRECTION_KEYS = (*_NUMBERS, "jitter_distribution", "loss_model")
_PROFILE_KEYS = ("name", "profile", "mode", "seed", "codec", "jitter_buffer_ms", "source")
_MODES = ("relay", "netem", "auto")
_CODECS = ("none", "pcmu")


@dataclass(frozen=True)
class Direction:
    """What the network does to one direction (netem's parameters, in ms and percent)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    jitter_distribution: str = "normal"
    #: How much each jitter draw leans on the previous one (netem's correlation), 0..100.
    jitter_correlation_pct: float = 0.0
    #: "random" (``loss_pct`` per packet) or "gilbert" (Gilbert-Elliott: bursts).
    loss_model: str = "random"
    loss_pct: float = 0.0
    #: Gilbert-Elliott: P(good -> bad), P(bad -> good), loss in the bad and in the good state.
    ge_p_pct: float = 0.0
    ge_r_pct: float = 100.0
    ge_bad_loss_pct: float = 100.0
    ge_good_loss_pct: float = 0.0
    #: Packets sent at once, ahead of the delayed ones (netem's reorder); needs a delay.
    reorder_pct: float = 0.0
    duplicate_pct: float = 0.0
    #: A bandwidth cap in kbit/s (None: none).
    rate_kbit: float | None = None

    @property
    def mean_loss_pct(self) -> float:
        """The long-run loss rate: ``loss_pct``, or the Gilbert-Elliott chain's stationary one."""
        if self.loss_model == "random":
            return self.loss_pct
        p, r = self.ge_p_pct / 100, self.ge_r_pct / 100
        bad = p / (p + r) if p + r > 0 else 0.0
        return 100 * (bad * self.ge_bad_loss_pct / 100 + (1 - bad) * self.ge_good_loss_pct / 100)

    @property
    def lossy(self) -> bool:
        return self.mean_loss_pct > 0

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class NetworkProfile:
    """A named impairment, per direction, with where its numbers come from."""

    name: str
    up: Direction = Direction()
    down: Direction = Direction()
    #: "relay" (in-process), "netem" (the kernel's, in a namespace) or "auto" (netem if usable).
    mode: str = "relay"
    #: The seed of the per-packet draws (loss, jitter): the same draws every run.
    seed: int = 1
    #: "pcmu": the leg is G.711 mu-law 8 kHz (a phone call); recorded, the relay cannot transcode.
    codec: str = "none"
    #: A carrier's fixed jitter buffer (ms): every packet is held to delay + this; later is lost.
    jitter_buffer_ms: float = 0.0
    source: str = ""

    def direction(self, name: str) -> Direction:
        """``up`` or ``down``."""
        return self.up if name == "up" else self.down

    def expected_delay_ms(self, name: str) -> float:
        """The one-way delay a packet of this direction should see at P50 (delay + buffer)."""
        return self.direction(name).delay_ms + self.jitter_buffer_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "seed": self.seed,
            "codec": self.codec,
            "jitter_buffer_ms": self.jitter_buffer_ms,
            "source": self.source,
            "up": self.up.to_json(),
            "down": self.down.to_json(),
        }


def _both(**kw: Any) -> tuple[Direction, Direction]:
    d = Direction(**kw)
    return d, d


def _profile(name: str, source: str, **kw: Any) -> NetworkProfile:
    extra = {k: kw.pop(k) for k in ("codec", "jitter_buffer_ms") if k in kw}
    up, down = _both(**kw)
    return NetworkProfile(name=name, up=up, down=down, source=source, **extra)


#: The named built-ins; docs/NETWORK.md gives the source of every number.
BUILTIN_PROFILES: Mapping[str, NetworkProfile] = {
    p.name: p
    for p in (
        _profile("lan", "a switched LAN: 0.5 ms one way, no loss (illustrative)", delay_ms=0.5),
        _profile(
            "broadband",
            "fixed broadband to a nearby region: 10 ms one way, 2 ms jitter, 0.1 % loss "
            "(illustrative; docs/NETWORK.md)",
            delay_ms=10,
            jitter_ms=2,
            jitter_correlation_pct=25,
            loss_pct=0.1,
        ),
        _profile(
            "4g",
            "LTE to a cloud region: 35 ms one way, 10 ms jitter, 0.5 % loss, 10 Mbit/s "
            "(illustrative; docs/NETWORK.md)",
            delay_ms=35,
            jitter_ms=10,
            jitter_correlation_pct=25,
            loss_pct=0.5,
            rate_kbit=10_000,
        ),
        _profile(
            "3g-bad",
            "a poor 3G cell: 150 ms one way, 50 ms heavy-tailed jitter, bursty loss (~2.9 % "
            "long-run), 384 kbit/s (the UMTS R99 bearer's top rate; the rest illustrative)",
            delay_ms=150,
            jitter_ms=50,
            jitter_distribution="paretonormal",
            jitter_correlation_pct=50,
            loss_model="gilbert",
            ge_p_pct=1.5,
            ge_r_pct=50,
            rate_kbit=384,
        ),
        _profile(
            "transatlantic",
            "inland US to central Europe: 80 ms one way, 1 ms jitter (London-New York's "
            "fibre floor alone is 28 ms: 5,570 km at 2/3 c; docs/NETWORK.md)",
            delay_ms=80,
            jitter_ms=1,
        ),
        _profile(
            "phone",
            "a carrier leg: G.711 mu-law 8 kHz in 20 ms frames, 100 ms one way incl. a 40 ms "
            "fixed jitter buffer, 1 % loss (ITU-T G.114's 150 ms budget; Twilio Media Streams)",
            delay_ms=60,
            jitter_ms=10,
            loss_pct=1.0,
            codec="pcmu",
            jitter_buffer_ms=40,
        ),
    )
}


def builtin_profile(name: str) -> NetworkProfile:
    """A built-in by name (``ConfigError`` naming the built-ins for an unknown one)."""
    try:
        return BUILTIN_PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"unknown network profile {name!r}; built-ins: {', '.join(BUILTIN_PROFILES)} "
            "(or the path of a TOML file with a [network] table)"
        ) from None


ErrFn = Callable[[str, str | None, str], Exception]


def _default_err(table: str, key: str | None, msg: str) -> Exception:
    return ConfigError(f"[{table}] {key} {msg}" if key else f"[{table}] {msg}")


def parse_profile(
    data: Mapping[str, Any], *, err: ErrFn = _default_err, default_name: str = "custom"
) -> NetworkProfile:
    """A ``[network]`` table as a profile: top-level direction keys apply to both directions,
    ``[network.up]`` / ``[network.down]`` override them, ``profile = "4g"`` starts from a
    built-in. Every key is checked: an unknown one, a wrong type, a negative or absurd value
    or a loss of 100 % or more raises ``err(table, key, message)``."""
    table = "network"
    for key in data:
        if key not in (*_PROFILE_KEYS, *_DIRECTION_KEYS, "up", "down"):
            valid = ", ".join(sorted((*_PROFILE_KEYS, *_DIRECTION_KEYS, "up", "down")))
            raise err(table, key, f"is not a known key; valid keys: {valid}")
    base_name = data.get("profile")
    if base_name is not None and not isinstance(base_name, str):
        raise err(table, "profile", "must name a built-in profile")
    try:
        base = builtin_profile(base_name) if base_name else NetworkProfile(default_name)
    except ConfigError as exc:
        raise err(
            table, "profile", str(exc).replace("unknown network profile ", "names ")
        ) from None
    up = _direction(_sub(data, "up", err), _direction(data, base.up, table, err), "network.up", err)
    down_table = _sub(data, "down", err)
    down = _direction(down_table, _direction(data, base.down, table, err), "network.down", err)
    name = data.get("name", base_name or default_name)
    if not isinstance(name, str) or not name:
        raise err(table, "name", "must be a non-empty string")
    return replace(
        base,
        name=name,
        up=up,
        down=down,
        mode=_pick(data, "mode", _MODES, base.mode, table, err),
        codec=_pick(data, "codec", _CODECS, base.codec, table, err),
        seed=_seed(data, base.seed, err),
        jitter_buffer_ms=_number(
            data, "jitter_buffer_ms", base.jitter_buffer_ms, (0, 2000, False), table, err
        ),
        source=str(data.get("source", base.source if base_name else "a [network] table")),
    )


def _sub(data: Mapping[str, Any], key: str, err: ErrFn) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise err("network", key, "must be a table ([network.up] / [network.down])")
    for k in value:
        if k not in _DIRECTION_KEYS:
            raise err(
                f"network.{key}",
                k,
                f"is not a known key; valid keys: {', '.join(sorted(_DIRECTION_KEYS))}",
            )
    return value


def _direction(data: Mapping[str, Any], base: Direction, table: str, err: ErrFn) -> Direction:
    values: dict[str, Any] = {}
    for key, bounds in _NUMBERS.items():
        if key in data:
            values[key] = _number(data, key, 0.0, bounds, table, err)
    if "jitter_distribution" in data:
        values["jitter_distribution"] = _pick(
            data, "jitter_distribution", DISTRIBUTIONS, "normal", table, err
        )
    if "loss_model" in data:
        values["loss_model"] = _pick(
            data, "loss_model", ("random", "gilbert"), "random", table, err
        )
    out = replace(base, **values)
    if out.jitter_ms > 0 and out.jitter_ms > 10 * max(out.delay_ms, 1.0):
        raise err(
            table,
            "jitter_ms",
            f"{out.jitter_ms:g} is absurd beside a {out.delay_ms:g} ms delay: keep it within 10x the delay",
        )
    if out.reorder_pct > 0 and out.delay_ms <= 0:
        raise err(table, "reorder_pct", "needs a delay_ms: reordered packets overtake delayed ones")
    if out.loss_model == "gilbert" and out.mean_loss_pct >= 100:
        raise err(table, "ge_p_pct", "makes the long-run loss 100 %: nothing would get through")
    return out


def _number(
    data: Mapping[str, Any],
    key: str,
    default: float,
    bounds: tuple[float, float, bool],
    table: str,
    err: ErrFn,
) -> float:
    value = data.get(key, default)
    lo, hi, exclusive = bounds
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise err(table, key, f"must be a number, not {value!r}")
    if value < lo:
        raise err(table, key, f"must not be negative, not {value:g}")
    if value > hi or (exclusive and value >= hi):
        rule = f"below {hi:g}" if exclusive else f"at most {hi:g}"
        raise err(table, key, f"must be {rule}, not {value:g}")
    return float(value)


def _pick(
    data: Mapping[str, Any],
    key: str,
    choices: tuple[str, ...],
    default: str,
    table: str,
    err: ErrFn,
) -> str:
    value = data.get(key, default)
    if value not in choices:
        raise err(table, key, f"must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _seed(data: Mapping[str, Any], default: int, err: ErrFn) -> int:
    value = data.get("seed", default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise err("network", "seed", f"must be a non-negative integer, not {value!r}")
    return value


# -- per-packet draws ----------------------------------------------------------------------


@dataclass
class _DirectionState:
    last_jitter: float = 0.0
    bad: bool = False


class Impairer:
    """The per-packet draws of one direction: the delay a packet gets, whether it is lost,
    duplicated or sent ahead. Seeded (the profile's seed and the direction): reproducible."""

    def __init__(self, direction: Direction, seed: int, *, jitter_buffer_ms: float = 0.0) -> None:
        self.d = direction
        self._rng = random.Random(seed)
        self._state = _DirectionState()
        self._buffer_ns = round(jitter_buffer_ms * NS_PER_MS)

    def _unit(self) -> float:
        """One jitter draw in units of ``jitter_ms`` (mean 0, spread 1)."""
        dist = self.d.jitter_distribution
        if dist == "uniform":
            return self._rng.uniform(-1.0, 1.0)
        if dist == "normal":
            return self._rng.gauss(0.0, 1.0)
        # Pareto with shape 3 (mean 1.5, sd ~0.87), centred and scaled: a heavy right tail.
        pareto = (self._rng.paretovariate(3.0) - 1.5) / 0.866
        if dist == "pareto":
            return pareto
        return 0.75 * pareto + 0.25 * self._rng.gauss(0.0, 1.0)

    def delay_ns(self) -> int:
        """The one-way delay of the next packet (never negative), before any queueing."""
        d = self.d
        jitter = 0.0
        if d.jitter_ms > 0:
            c = d.jitter_correlation_pct / 100
            jitter = (1 - c) * self._unit() + c * self._state.last_jitter
            self._state.last_jitter = jitter
        return max(0, round((d.delay_ms + d.jitter_ms * jitter) * NS_PER_MS))

    def played_delay_ns(self) -> int | None:
        """With a fixed jitter buffer: the packet's delay held to delay + buffer, or None when
        it arrives after that (a late packet, dropped by the buffer)."""
        raw = self.delay_ns()
        if not self._buffer_ns:
            return raw
        due = round(self.d.delay_ms * NS_PER_MS) + self._buffer_ns
        return due if raw <= due else None

    def lost(self) -> bool:
        """Whether the next packet is lost (random, or the Gilbert-Elliott chain's state)."""
        d = self.d
        if d.loss_model == "random":
            return d.loss_pct > 0 and self._rng.random() * 100 < d.loss_pct
        s = self._state
        # The state for this packet, then its loss (netem's gemodel order: transition first).
        if s.bad:
            s.bad = not (self._rng.random() * 100 < d.ge_r_pct)
        else:
            s.bad = self._rng.random() * 100 < d.ge_p_pct
        p = d.ge_bad_loss_pct if s.bad else d.ge_good_loss_pct
        return p > 0 and self._rng.random() * 100 < p

    def duplicated(self) -> bool:
        return self.d.duplicate_pct > 0 and self._rng.random() * 100 < self.d.duplicate_pct

    def reordered(self) -> bool:
        """Sent at once, ahead of the packets still delayed (netem's reorder)."""
        return self.d.reorder_pct > 0 and self._rng.random() * 100 < self.d.reorder_pct

    def transmit_ns(self, nbytes: int) -> int:
        """How long ``nbytes`` take on the capped link (0 without a cap)."""
        if not self.d.rate_kbit:
            return 0
        return nbytes * 8 * 1_000_000 // round(self.d.rate_kbit)


def tcp_stall_ns(direction: Direction) -> int:
    """A lost TCP segment as the relay models it: a retransmission after an RTO of
    max(200 ms, RTT + 4 x jitter) (Linux's minimum RTO is 200 ms; RFC 6298)."""
    rtt = 2 * direction.delay_ms + 4 * direction.jitter_ms
    return round(max(200.0, rtt) * NS_PER_MS)


# -- netem ---------------------------------------------------------------------------------


def netem_args(direction: Direction, *, jitter_buffer_ms: float = 0.0) -> list[str]:
    """``tc qdisc ... netem`` arguments for one direction (after ``netem``).

    netem has no jitter buffer: a carrier's fixed buffer is spelled as added delay (its
    late-packet loss is not modelled by netem)."""
    d = direction
    args: list[str] = []
    delay = d.delay_ms + jitter_buffer_ms
    if delay > 0 or d.jitter_ms > 0:
        args += ["delay", f"{delay:g}ms"]
        if d.jitter_ms > 0:
            args += [f"{d.jitter_ms:g}ms"]
            if d.jitter_correlation_pct > 0:
                args += [f"{d.jitter_correlation_pct:g}%"]
            if d.jitter_distribution != "uniform":  # netem's default; it has no table file
                args += ["distribution", d.jitter_distribution]
    if d.loss_model == "random" and d.loss_pct > 0:
        args += ["loss", "random", f"{d.loss_pct:g}%"]
    elif d.loss_model == "gilbert" and d.ge_p_pct > 0:
        args += [
            "loss", "gemodel", f"{d.ge_p_pct:g}%", f"{d.ge_r_pct:g}%",
            f"{d.ge_bad_loss_pct:g}%", f"{d.ge_good_loss_pct:g}%",
        ]  # fmt: skip
    if d.duplicate_pct > 0:
        args += ["duplicate", f"{d.duplicate_pct:g}%"]
    if d.reorder_pct > 0:
        args += ["reorder", f"{d.reorder_pct:g}%"]
    if d.rate_kbit:
        args += ["rate", f"{d.rate_kbit:g}kbit"]
    return args


# -- what was realised ---------------------------------------------------------------------


@dataclass
class RealisedTally:
    """What one direction of the relay did: packets (TCP chunks or datagrams) seen, lost,
    duplicated, and the one-way delay each delivered one actually got (ns, as measured)."""

    packets: int = 0
    lost: int = 0
    duplicated: int = 0
    stalls: int = 0
    delays_ns: list[int] = field(default_factory=list)
    #: How late each was delivered against the relay's own schedule (its timekeeping).
    late_ns: list[int] = field(default_factory=list)
    #: Delays kept (a bounded sample: a long run must not grow the relay's memory).
    cap: int = 20_000

    def delivered(self, delay_ns: int, late_ns: int = 0) -> None:
        if len(self.delays_ns) < self.cap:
            self.delays_ns.append(delay_ns)
            self.late_ns.append(late_ns)

    def to_json(self) -> dict[str, Any]:
        ds, late = sorted(self.delays_ns), sorted(self.late_ns)

        def pct(p: float, xs: list[int] = ds) -> float | None:
            if not xs:
                return None
            return round(xs[min(len(xs) - 1, int(p / 100 * len(xs)))] / NS_PER_MS, 3)

        return {
            "packets": self.packets,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "stalls": self.stalls,
            "loss_pct": round(100 * self.lost / self.packets, 3) if self.packets else None,
            "delay_p50_ms": pct(50),
            "delay_p90_ms": pct(90),
            "delay_p99_ms": pct(99),
            "late_p50_ms": pct(50, late),
            "late_p99_ms": pct(99, late),
        }


def realised_misses(
    profile: NetworkProfile, realised: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Where the realised impairment (``{"up": tally.to_json(), "down": ...}``) missed the
    requested one beyond the documented tolerance; one sentence each.

    The delay is judged on its P50 when the direction has no jitter; with jitter a byte
    stream's in-order delivery holds a chunk behind a later-drawn one ahead of it, so its P50
    rightly exceeds the draws' (the kernel's TCP does the same to netem's). The relay's
    timekeeping (delivered vs its own schedule) is judged always."""
    out: list[str] = []
    for name in ("up", "down"):
        r = realised.get(name) or {}
        want = profile.expected_delay_ms(name)
        got = r.get("delay_p50_ms")
        late = r.get("late_p50_ms")
        if isinstance(late, int | float) and late > DELAY_TOLERANCE_MS:
            out.append(
                f"{name}: the relay delivered {late:g} ms behind its schedule at P50 "
                f"(tolerance {DELAY_TOLERANCE_MS:g} ms; a busy machine)"
            )
        if isinstance(got, int | float) and not profile.direction(name).jitter_ms:
            tol = max(DELAY_TOLERANCE_MS, 0.1 * want)
            if abs(got - want) > tol:
                out.append(
                    f"{name}: realised P50 one-way delay {got:g} ms, requested {want:g} ms "
                    f"(tolerance {tol:g} ms)"
                )
        n = r.get("packets") or 0
        lost = r.get("loss_pct")
        want_loss = profile.direction(name).mean_loss_pct
        if n and isinstance(lost, int | float):
            se = 100 * math.sqrt(max(want_loss / 100 * (1 - want_loss / 100), 1e-9) / n)
            tol = LOSS_TOLERANCE_PCT + 3 * se
            if abs(lost - want_loss) > tol:
                out.append(
                    f"{name}: realised loss {lost:g} % over {n} packets, requested "
                    f"{want_loss:g} % (tolerance {tol:.2g} points)"
                )
    return out


def profile_from_json(data: Mapping[str, Any]) -> NetworkProfile:
    """A profile back from :meth:`NetworkProfile.to_json` (the relay's child process)."""
    known = {f.name for f in fields(Direction)}

    def direction(d: Any) -> Direction:
        return Direction(**{k: v for k, v in dict(d or {}).items() if k in known})

    return NetworkProfile(
        name=str(data.get("name", "custom")),
        up=direction(data.get("up")),
        down=direction(data.get("down")),
        mode=str(data.get("mode", "relay")),
        seed=int(data.get("seed", 1)),
        codec=str(data.get("codec", "none")),
        jitter_buffer_ms=float(data.get("jitter_buffer_ms", 0.0)),
        source=str(data.get("source", "")),
    )
