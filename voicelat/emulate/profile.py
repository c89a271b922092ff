"""Emulator profiles: latency distributions, faults, content and wire behaviour per emulator.

A profile is a TOML file with one table per emulator (see docs/EMULATORS.md)::

    seed = 7                      # optional; `voicelat serve --seed` overrides it

    [openai]
    api_key_env = "EMULATOR_KEY"  # optional: pin the key to this variable's value

    [openai.latency]              # milliseconds; a number or a distribution table
    headers = 20
    ttft = { dist = "lognormal", median = 300, sigma = 0.4 }
    token = { dist = "normal", mean = 18, sd = 4 }

    [openai.faults]               # probability per request, or a table with parameters
    http_429 = 0.02
    stall = { p = 0.01, seconds = 8, after = 3 }

    [openai.content]
    reply = "Sure. It is sunny in Paris today."

    [openai.wire]
    nodelay = true
    coalesce_headers = false

Which latency, content and fault keys exist is declared by each emulator class, so a profile
is validated against the emulator it configures and a typo is one clear error line.
"""

from __future__ import annotations

import math
import os
import random
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.emulate.dist import Dist, parse_dist
from voicelat.emulate.names import known_emulators
from voicelat.emulate.spec import EmulatorSpec

__all__ = [
    "FAULT_KINDS",
    "HTTP_FAULTS",
    "STREAM_FAULTS",
    "WS_FAULTS",
    "EmulatorConfig",
    "Fault",
    "Profile",
    "Wire",
    "builtin_profiles",
    "load_profile",
]

#: Every fault the framework can inject, with what the client sees.
FAULT_KINDS: dict[str, str] = {
    "http_429": "HTTP 429 with the provider's rate-limit error body (websocket: handshake rejected)",
    "http_500": "HTTP 500 with the provider's server-error body (websocket: handshake rejected)",
    "error_event": "the provider's mid-stream error event after `after` chunks, then the stream ends",
    "stall": "no bytes for `seconds` after `after` chunks, then the stream resumes",
    "truncate": "the connection drops after `after` chunks (mode 'abort': no terminator; "
    "'eof': the body ends cleanly but early)",
    "refuse": "the request's connection is reset (RST, no response), then new connections are "
    "refused for `seconds`",
    "slow_handshake": "the websocket upgrade answer (101) is delayed by `seconds`",
    "close_1011": "websocket close 1011 with the provider's reason text after `after` chunks",
    "close_1008": "websocket close 1008 with the provider's reason text after `after` chunks",
}
#: Faults an HTTP endpoint can take.
HTTP_FAULTS = frozenset({"http_429", "http_500", "error_event", "stall", "truncate", "refuse"})
#: Faults a websocket endpoint can take.
WS_FAULTS = frozenset(FAULT_KINDS)
#: Faults that strike mid-stream, at a chunk boundary (the rest act before the response).
STREAM_FAULTS = frozenset({"error_event", "stall", "truncate", "close_1011", "close_1008"})

_FAULT_DEFAULT_SECONDS = {"stall": 5.0, "slow_handshake": 2.0, "refuse": 1.0}
_FAULT_KEYS = {"p", "seconds", "after", "endpoints", "message", "mode"}
_EMULATOR_KEYS = {"api_key_env", "auth", "latency", "faults", "content", "wire"}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault a profile enables, with its probability per request (or per connection)."""

    kind: str
    p: float
    seconds: float = 0.0
    after: int = 1
    endpoints: frozenset[str] | None = None
    message: str | None = None
    mode: str = "abort"

    def applies_to(self, endpoint: str) -> bool:
        return self.endpoints is None or endpoint in self.endpoints


@dataclass(frozen=True, slots=True)
class Wire:
    """How bytes leave the server: what issue 8 varies to show transport effects."""

    nodelay: bool = True
    """TCP_NODELAY on accepted sockets; false lets Nagle hold small writes (the ~40 ms trap)."""
    coalesce_headers: bool = False
    """Hold the status line, headers and any event before the first token or audio chunk, and
    write them together with it: one write, so one TCP segment on loopback."""
    timer: str = "sleep"
    """'sleep' (asyncio timers, ~1 ms late) or 'spin' (sleep to 2 ms before, then yield-spin to
    the deadline: exact, but it burns CPU while it waits)."""
    idle_timeout_s: float = 0.0
    """Close keep-alive connections idle this long (0: never), like uvicorn's 5 s."""


@dataclass(frozen=True)
class EmulatorConfig:
    """A profile resolved for one emulator: every key validated against what it declares."""

    name: str
    latency: Mapping[str, Dist]
    faults: tuple[Fault, ...]
    content: Mapping[str, Any]
    wire: Wire = Wire()
    api_key: str | None = field(default=None, repr=False)
    auth: bool = True

    def draw_fault(self, rng: random.Random, endpoint: str, kinds: frozenset[str]) -> Fault | None:
        """At most one fault for this request: one uniform draw against cumulative p."""
        u = rng.random()
        acc = 0.0
        for fault in self.faults:
            if fault.kind not in kinds or not fault.applies_to(endpoint):
                continue
            acc += fault.p
            if u < acc:
                return fault
        return None


@dataclass(frozen=True)
class Profile:
    """A parsed profile file: a seed and the raw table of each emulator it configures."""

    seed: int | None = None
    tables: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = "built-in defaults"

    def with_seed(self, seed: int | None) -> Profile:
        return Profile(seed if seed is not None else self.seed, self.tables, self.source)

    def resolve(self, emulator: type[EmulatorSpec]) -> EmulatorConfig:
        """This profile's settings for ``emulator``, defaults filled in, errors one line each."""
        return _resolve(emulator, self.tables.get(emulator.name, {}), self.source)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], source: str = "profile", extra_names: Iterable[str] = ()
    ) -> Profile:
        """Build from the same structure a TOML file has (tests and benches use this).

        ``extra_names`` are emulators given as classes rather than registered names.
        """
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"{source}: seed must be an integer, got {seed!r}")
        tables: dict[str, Mapping[str, Any]] = {}
        for key, value in data.items():
            if key == "seed":
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"{source}: {key!r} must be a table named after an emulator ([{key}])"
                )
            tables[key] = value
        known = {*known_emulators(), *extra_names}
        unknown = sorted(set(tables) - known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown emulator table(s) {', '.join(f'[{u}]' for u in unknown)}; "
                f"known emulators: {', '.join(sorted(known))}"
            )
        return cls(seed, tables, source)


def builtin_profiles() -> dict[str, Path]:
    """Profiles shipped with voicelat, by name (``voicelat serve --profile realistic``)."""
    here = Path(__file__).resolve().parent / "profiles"
    return {p.stem: p for p in sorted(here.glob("*.toml"))}


def load_profile(path_or_name: str | Path) -> Profile:
    """Read a profile file, or a built-in profile by name."""
    path = Path(path_or_name)
    builtin = builtin_profiles()
    if not path.exists() and str(path_or_name) in builtin:
        path = builtin[str(path_or_name)]
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"profile {path_or_name} does not exist (built-in profiles: "
            f"{', '.join(builtin) or 'none'})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return Profile.from_dict(data, source=str(path))


def _resolve(emulator: type[EmulatorSpec], table: Mapping[str, Any], source: str) -> EmulatorConfig:
    name = emulator.name
    where = f"{source}: [{name}]"
    unknown = sorted(set(table) - _EMULATOR_KEYS)
    if unknown:
        raise ConfigError(
            f"{where} has unknown key(s) {', '.join(unknown)}; "
            f"valid keys: {', '.join(sorted(_EMULATOR_KEYS))}"
        )
    latency: dict[str, Dist] = dict(emulator.LATENCY)
    for key, value in _subtable(table, "latency", where).items():
        if key not in emulator.LATENCY:
            raise ConfigError(
                f"{where[:-1]}.latency] {key} is not a latency of the {name} emulator; "
                f"valid: {', '.join(sorted(emulator.LATENCY))}"
            )
        latency[key] = parse_dist(value, f"{where[:-1]}.latency] {key}")
    faults = _faults(_subtable(table, "faults", f"{where[:-1]}.faults]"), emulator, where)
    content = _content(_subtable(table, "content", where), emulator, where)
    wire = _wire(_subtable(table, "wire", where), where)
    key_env = table.get("api_key_env")
    api_key: str | None = None
    if key_env is not None:
        if not isinstance(key_env, str) or not key_env:
            raise ConfigError(f"{where} api_key_env must name an environment variable")
        api_key = os.environ.get(key_env)
        if not api_key:
            raise ConfigError(
                f"{where} pins the API key to ${key_env}, which is not set: export {key_env}=..."
            )
    auth = table.get("auth", True)
    if not isinstance(auth, bool):
        raise ConfigError(f"{where} auth must be true or false, got {auth!r}")
    return EmulatorConfig(name, latency, faults, content, wire, api_key, auth)


def _subtable(table: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} {key} must be a table")
    return value


def _faults(
    table: Mapping[str, Any], emulator: type[EmulatorSpec], where: str
) -> tuple[Fault, ...]:
    out: list[Fault] = []
    for kind, value in table.items():
        if kind not in FAULT_KINDS:
            raise ConfigError(
                f"{where[:-1]}.faults] {kind} is not a fault; valid: {', '.join(FAULT_KINDS)}"
            )
        if kind not in emulator.FAULTS:
            raise ConfigError(
                f"{where[:-1]}.faults] {kind} does not apply to the {emulator.name} emulator; "
                f"it supports: {', '.join(sorted(emulator.FAULTS))}"
            )
        spec: Mapping[str, Any] = value if isinstance(value, Mapping) else {"p": value}
        at = f"{where[:-1]}.faults] {kind}"
        bad = sorted(set(spec) - _FAULT_KEYS)
        if bad:
            raise ConfigError(
                f"{at}: unknown key(s) {', '.join(bad)}; valid keys: {', '.join(sorted(_FAULT_KEYS))}"
            )
        p = spec.get("p")
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
            raise ConfigError(f"{at}: p must be a probability between 0 and 1, got {p!r}")
        seconds = spec.get("seconds", _FAULT_DEFAULT_SECONDS.get(kind, 0.0))
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ConfigError(f"{at}: seconds must be a non-negative number, got {seconds!r}")
        after = spec.get("after", 1)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ConfigError(f"{at}: after must be a chunk count >= 0, got {after!r}")
        endpoints = spec.get("endpoints")
        if endpoints is not None:
            if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
                raise ConfigError(f"{at}: endpoints must be a list of endpoint names")
            bad_ep = sorted(set(endpoints) - set(emulator.ENDPOINTS))
            if bad_ep:
                raise ConfigError(
                    f"{at}: unknown endpoint(s) {', '.join(bad_ep)}; "
                    f"the {emulator.name} emulator has: {', '.join(emulator.ENDPOINTS)}"
                )
        message = spec.get("message")
        if message is not None and not isinstance(message, str):
            raise ConfigError(f"{at}: message must be a string")
        mode = spec.get("mode", "abort")
        if mode not in ("abort", "eof"):
            raise ConfigError(f"{at}: mode must be 'abort' or 'eof', got {mode!r}")
        out.append(
            Fault(
                kind=kind,
                p=float(p),
                seconds=float(seconds),
                after=after,
                endpoints=frozenset(endpoints) if endpoints is not None else None,
                message=message,
                mode=mode,
            )
        )
    # Faults are exclusive per request: their probabilities share one uniform draw.
    for endpoint in emulator.ENDPOINTS:
        total = sum(f.p for f in out if f.applies_to(endpoint))
        if total > 1 + 1e-9:
            raise ConfigError(
                f"{where[:-1]}.faults] probabilities add up to {total:g} for endpoint "
                f"{endpoint!r}: at most one fault strikes a request, so they must sum to <= 1"
            )
    return tuple(out)


def _content(table: Mapping[str, Any], emulator: type[EmulatorSpec], where: str) -> dict[str, Any]:
    content = dict(emulator.CONTENT)
    for key, value in table.items():
        if key not in emulator.CONTENT:
            raise ConfigError(
                f"{where[:-1]}.content] {key} is not a content option of the {emulator.name} "
                f"emulator; valid: {', '.join(sorted(emulator.CONTENT))}"
            )
        default = emulator.CONTENT[key]
        ok = (
            isinstance(value, type(default))
            or (isinstance(default, float) and isinstance(value, int))
        ) and not (isinstance(value, bool) and not isinstance(default, bool))
        if isinstance(default, list):
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not ok:
            raise ConfigError(
                f"{where[:-1]}.content] {key} must be a {type(default).__name__}, got {value!r}"
            )
        if (
            isinstance(value, float | int)
            and not isinstance(value, bool)
            and (not math.isfinite(value) or value < 0)
        ):
            raise ConfigError(f"{where[:-1]}.content] {key} must be a non-negative number")
        content[key] = float(value) if isinstance(default, float) else value
    return content


def _wire(table: Mapping[str, Any], where: str) -> Wire:
    allowed = {"nodelay", "coalesce_headers", "timer", "idle_timeout_s"}
    bad = sorted(set(table) - allowed)
    if bad:
        raise ConfigError(
            f"{where[:-1]}.wire] unknown key(s) {', '.join(bad)}; valid keys: {', '.join(sorted(allowed))}"
        )
    for key in ("nodelay", "coalesce_headers"):
        if key in table and not isinstance(table[key], bool):
            raise ConfigError(f"{where[:-1]}.wire] {key} must be true or false")
    timer = table.get("timer", "sleep")
    if timer not in ("sleep", "spin"):
        raise ConfigError(f"{where[:-1]}.wire] timer must be 'sleep' or 'spin', got {timer!r}")
    idle = table.get("idle_timeout_s", 0.0)
    if isinstance(idle, bool) or not isinstance(idle, int | float) or idle < 0:
        raise ConfigError(f"{where[:-1]}.wire] idle_timeout_s must be a non-negative number")
    return Wire(
        nodelay=bool(table.get("nodelay", True)),
        coalesce_headers=bool(table.get("coalesce_headers", False)),
        timer=str(timer),
        idle_timeout_s=float(idle),
    )
