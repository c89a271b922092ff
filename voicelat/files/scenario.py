"""Scenario files: a call as an ordered list of steps in TOML (docs/CALLS.md has the format).

::

    name = "booking"                 # default: the file's stem
    description = "..."
    fixtures = "../fixtures/calls"   # the fixture folder its steps name (default: the run's)
    on_failure = "continue"          # or "end": a step whose reply never came ends the call
    seed = 1                         # the gaps' spread is drawn from it
    greeting = "Hello, ..."          # what voicelat's own cascade says when it greets

    [[step]]
    expect_greeting = true           # the agent speaks first
    [[step]]
    say = "booking_01"               # a fixture id
    gap_ms = 600                     # after the reply ended (default 600), +- spread_ms
    spread_ms = 150
    [[step]]
    silence = 4000                   # the user says nothing for 4 s
    [[step]]
    say = "booking_02"
    at_ms = 20000                    # at a fixed offset on the call's clock instead
    [[step]]
    interrupt = "int_01_wait"        # cut into the previous step's reply (the next turn)
    after_ms = 1200                  # after that reply became audible (default 1000)
    [[step]]
    backchannel = "bc_mmhmm"         # "mm-hmm" during the reply: the agent should go on
    [[step]]
    noise = "noise_cough"            # a non-speech burst during the reply
    pause_ms = 600                   # a pause longer than this is a false barge-in
    [[step]]
    include = "common/goodbye.toml"  # that file's steps, here

A file or a folder of ``*.toml`` files (each one scenario) is read. Every mistake is one
:class:`~voicelat.core.base.errors.ConfigError` naming the file, the step and what to write.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.calls.call import OVERLAY_STEPS, Scenario, Step
from voicelat.files.caller import parse_caller
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline

__all__ = ["LoadedScenario", "check_overlays", "load_scenario", "load_scenarios"]

#: The longest gap, silence or fixed offset a step may ask for (an hour of call).
MAX_MS = 3_600_000
_STEP_KINDS = (
    "say = FIXTURE, interrupt = FIXTURE, backchannel = FIXTURE, noise = FIXTURE, "
    "silence = MS, expect_greeting = true or include = FILE"
)
_KINDS = ("say", "silence", "expect_greeting", *OVERLAY_STEPS)
_TOP_KEYS = {
    "name", "description", "fixtures", "on_failure", "seed", "greeting", "step", "caller",
}  # fmt: skip
_STEP_KEYS = {
    *_KINDS, "include", "gap_ms", "spread_ms", "at_ms", "after_ms", "pause_ms"
}  # fmt: skip


@dataclass(frozen=True)
class LoadedScenario:
    """A scenario and the fixtures its steps speak (read, not yet resampled)."""

    scenario: Scenario
    fixtures: dict[str, Fixture]


def load_scenarios(path: Path, fixtures_dir: Path | None = None) -> list[LoadedScenario]:
    """The scenario in ``path``, or every ``*.toml`` scenario in the folder ``path`` (sorted).
    ``fixtures_dir``: where steps' fixtures are when a scenario names no folder of its own."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.toml") if p.is_file())
        if not files:
            raise ConfigError(f"{path}: no *.toml scenario in this folder")
        return [load_scenario(p, fixtures_dir) for p in files]
    if not path.is_file():
        raise ConfigError(f"{path}: no such scenario file or folder (see docs/CALLS.md)")
    return [load_scenario(path, fixtures_dir)]


def load_scenario(path: Path, fixtures_dir: Path | None = None) -> LoadedScenario:
    """Read and check one scenario file and the fixtures it names."""
    data = _read(path)
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})"
        )
    # A simulated caller (files/caller.py) speaks after the scripted steps: a scenario with
    # one may have no steps, or only an `expect_greeting` before the caller's lines.
    caller = parse_caller(path, data["caller"]) if "caller" in data else None
    steps = _steps(path, data, chain=(path.resolve(),), optional=caller is not None)
    _check_overlays(steps)
    if caller is None and not any(s.kind == "say" for s in steps):
        raise ConfigError(
            f"{path}: the scenario has no `say` step: add [[step]] say = FIXTURE "
            "(or a [caller]: docs/CALLER.md)"
        )
    on_failure = data.get("on_failure", "continue")
    if on_failure not in ("continue", "end"):
        raise ConfigError(f"{path}: on_failure must be 'continue' or 'end', not {on_failure!r}")
    seed = data.get("seed", 1)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{path}: seed must be an integer, not {seed!r}")
    scenario = Scenario(
        name=_text(path, data, "name", path.stem),
        steps=tuple(steps),
        source=str(path),
        description=_text(path, data, "description", ""),
        on_failure=on_failure,
        seed=seed,
        greeting=_text(path, data, "greeting", Scenario.greeting),
        caller=caller,
    )
    return LoadedScenario(scenario, _fixtures(path, data, scenario, fixtures_dir))


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the scenario: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text: save the scenario as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


def _text(path: Path, data: Mapping[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {key} must be a string, not {value!r}")
    return value


def _steps(
    path: Path, data: Mapping[str, Any], chain: tuple[Path, ...], optional: bool = False
) -> list[Step]:
    raw = data.get("step", [])
    if not isinstance(raw, list) or not all(isinstance(s, dict) for s in raw):
        raise ConfigError(f"{path}: steps are [[step]] tables (see docs/CALLS.md)")
    if not raw and not optional:
        raise ConfigError(f"{path}: the scenario is empty: add [[step]] tables ({_STEP_KINDS})")
    steps: list[Step] = []
    for i, table in enumerate(raw, 1):
        where = f"{path}: step {i}"
        if "include" in table:
            steps += _include(path, where, table, chain)
        else:
            steps.append(_step(where, table))
    return steps


def _include(
    path: Path, where: str, table: Mapping[str, Any], chain: tuple[Path, ...]
) -> list[Step]:
    if set(table) != {"include"}:
        raise ConfigError(f"{where}: an include step has nothing but include = FILE")
    name = table["include"]
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: include must name a scenario file")
    target = (path.parent / name).resolve()
    if target in chain:
        cycle = " -> ".join(p.name for p in (*chain, target))
        raise ConfigError(f"{where}: includes form a cycle ({cycle}): remove one include")
    if not target.is_file():
        raise ConfigError(f"{where}: include {name!r}: no such file next to {path.name}")
    return _steps(target, _read(target), (*chain, target))


def _step(where: str, table: Mapping[str, Any]) -> Step:
    unknown = sorted(set(table) - _STEP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}: a step is {_STEP_KINDS}")
    kinds = [k for k in _KINDS if k in table]
    if len(kinds) != 1:
        what = "no step kind" if not kinds else f"two step kinds ({', '.join(kinds)})"
        raise ConfigError(f"{where}: {what}: write exactly one of {_STEP_KINDS}")
    timing = {k: _ms(where, k, table[k]) for k in ("gap_ms", "spread_ms", "at_ms") if k in table}
    if kinds[0] != "say" and timing:
        raise ConfigError(f"{where}: gap_ms, spread_ms and at_ms time a `say` step only")
    if kinds[0] in OVERLAY_STEPS:
        return _overlay(where, kinds[0], table)
    if "after_ms" in table or "pause_ms" in table:
        raise ConfigError(f"{where}: after_ms and pause_ms time an overlay step only ({_OVERLAYS})")
    if "at_ms" in timing and ("gap_ms" in timing or "spread_ms" in timing):
        raise ConfigError(f"{where}: at_ms is a fixed start: drop gap_ms/spread_ms, or at_ms")
    if timing.get("spread_ms", 0) > timing.get("gap_ms", Step.gap_ms):
        raise ConfigError(f"{where}: spread_ms cannot exceed gap_ms (a gap is never negative)")
    if kinds[0] == "expect_greeting":
        if table["expect_greeting"] is not True:
            raise ConfigError(f"{where}: expect_greeting = true (or leave the step out)")
        return Step("greeting", line=where)
    if kinds[0] == "silence":
        ms = _ms(where, "silence", table["silence"])
        if ms == 0:
            raise ConfigError(f"{where}: silence = 0 says nothing: give milliseconds > 0")
        return Step("silence", ms=ms, line=where)
    fixture = table["say"]
    if not isinstance(fixture, str) or not fixture:
        raise ConfigError(f"{where}: say names a fixture id (from the fixtures' manifest.json)")
    return Step(
        "say",
        fixture=fixture,
        gap_ms=timing.get("gap_ms", Step.gap_ms),
        spread_ms=timing.get("spread_ms", 0),
        at_ms=timing.get("at_ms"),
        line=where,
    )


_OVERLAYS = "interrupt, backchannel or noise"


def _overlay(where: str, kind: str, table: Mapping[str, Any]) -> Step:
    fixture = table[kind]
    if not isinstance(fixture, str) or not fixture:
        raise ConfigError(f"{where}: {kind} names a fixture id (from the fixtures' manifest.json)")
    after = _ms(where, "after_ms", table.get("after_ms", Step.after_ms))
    pause = _ms(where, "pause_ms", table["pause_ms"]) if "pause_ms" in table else None
    if pause is not None and kind == "interrupt":
        raise ConfigError(f"{where}: pause_ms judges a backchannel or noise, not an interrupt")
    return Step(kind, fixture=fixture, after_ms=after, pause_ms=pause, line=where)  # type: ignore[arg-type]


def _check_overlays(steps: Sequence[Step]) -> None:
    """An overlay plays during the reply of the step before it: a say or an interrupt."""
    for before, step in zip([None, *steps], steps, strict=False):
        if step.overlay and (before is None or before.kind not in ("say", "interrupt")):
            raise ConfigError(
                f"{step.line}: a {step.kind} step plays during the previous step's reply: "
                "put it right after a say (or interrupt) step"
            )


def _ms(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: {key} is milliseconds (a number), not {value!r}")
    if value != value or value < 0 or value > MAX_MS:  # NaN, negative, absurd
        raise ConfigError(f"{where}: {key} = {value!r} is out of range (0 to {MAX_MS:,} ms)")
    return int(value)


def _fixtures(
    path: Path, data: Mapping[str, Any], scenario: Scenario, fixtures_dir: Path | None
) -> dict[str, Fixture]:
    folder = data.get("fixtures")
    if folder is not None and not isinstance(folder, str):
        raise ConfigError(f"{path}: fixtures is a folder path (a string)")
    directory = (
        (path.parent / folder) if folder is not None else (fixtures_dir or default_fixtures_dir())
    )
    if not directory.is_dir():
        raise ConfigError(f"{path}: fixtures folder {directory} does not exist")
    known = {f.id: f for f in load_fixtures(directory)}
    for step in scenario.steps:
        if step.fixture is not None and step.fixture not in known:
            near = ", ".join(sorted(known)[:6])
            raise ConfigError(
                f"{step.line}: no fixture {step.fixture!r} in {directory} (it has: {near}...)"
            )
    for step in scenario.overlays:
        fx = known[step.fixture or ""]
        if fx.speech_start_ms is None or fx.speech_end_ms is None:
            raise ConfigError(
                f"{step.line}: fixture {step.fixture!r} has no speech bounds (speech_start_ms, "
                "speech_end_ms in its manifest): an overlay is timed from its onset; annotate "
                "it (voicelat fixtures annotate) or pick another"
            )
    return {k: known[k] for k in _unique(scenario.played_fixture_ids())}


def check_overlays(scenario: Scenario, pipeline: Pipeline) -> None:
    """Refuse, in one line, overlays on a pipeline that cannot hear them during a reply: a
    realtime stage whose user turns voicelat's endpointer ends (OpenAI ``turn_detection =
    "none"``, Gemini ``activity_detection = "manual"``) hears nothing but what voicelat commits."""
    if not scenario.overlays or pipeline.s2s is None:
        return
    s2s = pipeline.s2s
    manual = s2s.get("turn_detection") == "none" or s2s.get("activity_detection") == "manual"
    if manual:
        step = scenario.overlays[0]
        raise ConfigError(
            f"{step.line}: a {step.kind} step needs the realtime model to hear the line while "
            f"it speaks; [s2s] {s2s.get('stage')} ends turns by voicelat's endpointer here: set "
            "turn_detection = \"server_vad\" (OpenAI) or activity_detection = \"automatic\" "
            "(Gemini)"
        )


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))
