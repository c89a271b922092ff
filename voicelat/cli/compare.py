"""``voicelat compare``: measure several STT x LLM x TTS combinations fairly, rank them honestly.

::

    voicelat compare P1.toml P2.toml ...        # one combination per pipeline file
    voicelat compare --matrix matrix.toml       # the product of a matrix's alternatives
    voicelat compare RUN_DIR RUN_DIR ...        # rank runs that already exist (not interleaved)

Every combination's stages are entered once (each stage instance is its own connection or
worker), then the fair schedule (:func:`voicelat.files.matrix.fair_schedule`) drives one turn at a
time through each combination's :class:`~voicelat.engine.runner.Runner` on one event loop: fixture A
on every combination, then B on every combination, ... Each combination's turns land in its own
run directory (``OUT/<combination>/turns.jsonl`` + ``summary.json``, the schema of
``voicelat run``); the ranking goes to ``OUT/comparison.json``, ``OUT/comparison.md`` and
``OUT/report.html``.

Exit codes: 0 ranked; 2 usage or configuration error (unknown stage, missing file, runs on
different fixtures); 3 no combination produced a single warm turn (each one's reason is in the
report); 130 interrupted (finished turns and their summaries are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.args import confidence, non_negative_int, positive_int
from voicelat.core import jsontext
from voicelat.core.compare import MIN_COMPARE_TURNS, instrument_error_ns, metric_rows
from voicelat.core.errors import EXIT_OK, ConfigError, InfraError, VoicelatError
from voicelat.core.plan import PlannedTurn
from voicelat.core.ranking import CombinationSample, check_same_fixtures, rank_combinations
from voicelat.core.run_summary import Trust
from voicelat.core.turn import Turn
from voicelat.core.version import __version__
from voicelat.engine.job import info as _info
from voicelat.files.matrix import (
    Combination,
    Slot,
    check_stages,
    combinations_from_files,
    load_matrix,
)
from voicelat.files.matrix import fair_schedule as make_schedule
from voicelat.files.results import (
    SCHEMA_VERSION,
    SUMMARY_FILE,
    TURNS_FILE,
    TurnsWriter,
    load_run,
    write_calls,
    write_summary,
)

if TYPE_CHECKING:
    from voicelat.engine.call import PlannedCall
    from voicelat.engine.runner import Runner
    from voicelat.engine.stageset import StageSet
    from voicelat.files.fixtures import Fixture

    _SubParsers = argparse._SubParsersAction[Any]
else:
    _SubParsers = Any

COMPARISON_JSON = "comparison.json"
COMPARISON_MD = "comparison.md"
REPORT_HTML = "report.html"


def add_parser(subparsers: _SubParsers) -> argparse.ArgumentParser:
    """Register ``compare``; it sets ``func`` to :func:`cmd_compare`."""

    p: argparse.ArgumentParser = subparsers.add_parser(
        "compare",
        help="measure STT x LLM x TTS combinations on the same fixtures and rank them",
        description=(
            "Measure several pipelines (files, or a --matrix of alternatives per stage) on the "
            "same fixtures, interleaved per fixture so drift hits all alike, and rank them by "
            "e2e latency with bootstrap CIs and significance against the best. Given run "
            "directories instead, ranks those existing runs."
        ),
    )
    p.add_argument(
        "inputs",
        nargs="*",
        type=Path,
        metavar="PIPELINE.toml|RUN_DIR",
        help="pipeline files to measure, or run directories to rank as they are",
    )
    p.add_argument(
        "--matrix", "-m", type=Path, metavar="MATRIX.toml", help="alternatives per stage"
    )
    p.add_argument(
        "--fixtures",
        "-f",
        type=Path,
        help="fixtures directory with manifest.json (default: bundled)",
    )
    p.add_argument(
        "--turns",
        "-n",
        type=positive_int,
        help="measured turns per combination (default: every fixture once per repeat)",
    )
    p.add_argument(
        "--repeat", "-r", type=positive_int, default=1, help="rounds over the fixtures (default 1)"
    )
    p.add_argument(
        "--warmup",
        "-w",
        type=non_negative_int,
        default=1,
        help="warm-up turns per combination, run first and excluded (default 1)",
    )
    p.add_argument(
        "--out", "-o", type=Path, help="output directory (default: runs/<time>-compare-<name>)"
    )
    _add_scenario_argument(p)
    p.add_argument(
        "--rank-by",
        choices=("p50", "p90"),
        default="p50",
        help="the e2e percentile that orders the ranking (default p50)",
    )
    p.add_argument(
        "--confidence",
        type=confidence,
        default=0.95,
        help="confidence level of the bootstrap intervals (default 0.95)",
    )
    p.add_argument(
        "--resamples", type=positive_int, default=2000, help="bootstrap resamples (default 2000)"
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="bootstrap seed: same input, same verdicts"
    )
    _add_network_argument(p)
    p.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the ranking in the terminal UI at the end (default: when stdout is a terminal)",
    )
    p.set_defaults(func=cmd_compare)
    return p


def _add_scenario_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE|DIR",
        help="compare whole calls: each scenario runs as one call on every combination in "
        "turn (--repeat rounds), interleaved call by call (docs/CALLS.md)",
    )


def _add_network_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--network",
        metavar="P1,P2,...",
        default=None,
        help="a network axis: every combination under each profile (built-ins or [network] "
        "files, comma-separated), interleaved, each through its own relay (docs/NETWORK.md)",
    )


# -- the command ---------------------------------------------------------------------------------
def cmd_compare(args: argparse.Namespace) -> int:
    inputs: list[Path] = list(args.inputs)
    if args.matrix is not None and inputs:
        raise ConfigError("give either --matrix MATRIX.toml or pipeline files, not both")
    if args.matrix is None and not inputs:
        raise ConfigError(
            "nothing to compare: give pipeline files, run directories or --matrix MATRIX.toml"
        )
    dirs = [p for p in inputs if p.is_dir()]
    if dirs and len(dirs) != len(inputs):
        raise ConfigError(
            "mix of run directories and pipeline files: rank existing runs, or measure "
            "pipelines, not both at once"
        )
    if len(dirs) == 1:
        # One run ranked against itself "wins" with exit 0: a comparison needs two.
        raise ConfigError(
            f"compare ranks two or more runs, got one ({dirs[0]}): give another run directory"
            f" (voicelat view {dirs[0]} shows one run)"
        )
    if dirs:
        return _compare_saved(args, dirs)
    return _compare_live(args)


@dataclass
class _Live:
    """One combination during a live comparison."""

    combo: Combination
    runner: Runner
    run_dir: Path
    writer: TurnsWriter | None = None
    stages: StageSet | None = None
    setup_error: str | None = None
    turns: list[Turn] = field(default_factory=list)
    #: Its network profile's relay (``--network``; engine/network.py ``NetworkRun``), or None.
    network: Any = None


@dataclass(frozen=True)
class _Setup:
    """What a live comparison measures: the combinations, the plan and the schedule."""

    combos: list[Combination]
    name: str
    description: str
    excluded: list[str]
    source: dict[str, Any]
    fixtures: list[Fixture]
    plan: list[PlannedTurn]
    schedule: list[Slot]
    out: Path
    #: ``--scenario``: the calls every combination runs, in order (the schedule is their turns).
    calls: tuple[PlannedCall, ...] = ()


def _compare_live(args: argparse.Namespace) -> int:
    setup = _setup(args)
    lives = _lives(setup)
    measured = sum(not p.warmup for p in setup.plan)
    what = (
        f"{len(setup.calls)} call(s) ({measured} turns) each, interleaved call by call"
        if setup.calls
        else f"{args.warmup} warm-up + {measured} measured turn(s) each, interleaved"
    )
    _info(
        f"compare {setup.name}: {len(setup.combos)} combinations x {len(setup.fixtures)} "
        f"fixtures; {what} ({len(setup.schedule)} turns); results -> {setup.out}"
    )
    try:
        _measure(setup, lives)
    finally:
        _stop_networks(lives)  # idempotent: each relay stopped once its summary is written
    summaries = {
        lv.combo.name: jsontext.loads((lv.run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
        for lv in lives
    }
    check_same_fixtures({k: s.get("fixture_set_sha256") for k, s in summaries.items()})
    _with_scores(summaries, {lv.combo.name: lv.run_dir for lv in lives})
    return _finish(args, _live_document(args, setup, lives, summaries), setup.out)


def _setup(args: argparse.Namespace) -> _Setup:
    """Read the combinations, the fixtures and the plan; refuse bad input before anything."""
    from voicelat.core.plan import plan_turns
    from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
    from voicelat.stages.base import load_stage_class

    if args.matrix is not None:
        matrix = load_matrix(args.matrix)
        combos, name, description = matrix.combinations, matrix.name, matrix.description
        excluded = list(matrix.excluded)
        source: dict[str, Any] = {"matrix": str(args.matrix)}
        where = str(args.matrix)
    else:
        combos = combinations_from_files(list(args.inputs))
        name, description, excluded = "+".join(c.slug for c in combos)[:60], "", []
        source = {"pipelines": [str(p) for p in args.inputs]}
        where = "pipelines"
    # Unknown stage names fail here, with the known ones listed, before anything starts.
    check_stages(combos, load_stage_class, where)
    combos = _network_axis(combos, getattr(args, "network", None))
    _check_currencies({c.name: c.pipeline.cost.currency for c in combos if c.pipeline.cost})
    out: Path = args.out or _default_out(name)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"output directory {out} is not empty: choose another --out")
    if getattr(args, "scenario", None) is not None:
        fixtures, calls, plan = _plan_compare_calls(args)
        schedule = _call_schedule(len(combos), calls)
        return _Setup(
            list(combos), name, description, excluded, source, fixtures, plan, schedule, out,
            tuple(calls),
        )  # fmt: skip
    fixtures = load_fixtures(args.fixtures or default_fixtures_dir())
    ids = [f.id for f in fixtures]
    plan = plan_turns(ids, repeat=args.repeat, turns=args.turns, warmup=args.warmup)
    schedule = make_schedule(
        len(combos), ids, repeat=args.repeat, turns=args.turns, warmup=args.warmup
    )
    return _Setup(
        list(combos), name, description, excluded, source, fixtures, plan, list(schedule), out
    )


def _call_schedule(n_combinations: int, calls: Sequence[PlannedCall]) -> list[Slot]:
    """Each call on every combination in turn, in the same combination order every time: one
    slot per turn, so progress counts turns as for single turns."""
    out: list[Slot] = []
    for call in calls:
        for c in range(n_combinations):
            for i, fid in enumerate(call.scenario.fixture_ids()):
                out.append(Slot(len(out), c, PlannedTurn(call.first_index + i, fid, 0, False)))
    return out


def _plan_compare_calls(
    args: argparse.Namespace,
) -> tuple[list[Fixture], list[PlannedCall], list[PlannedTurn]]:
    """``--scenario``: the calls, their fixtures and their turns (the same for every one)."""
    from voicelat.engine.call import plan_calls
    from voicelat.engine.job import load_scenarios_for, scenario_fixtures

    if args.turns is not None:
        raise ConfigError("--turns counts single turns: a scenario sets its own (use --repeat)")
    loaded = load_scenarios_for(args, args.scenario)
    if any(item.scenario.caller is not None for item in loaded):
        raise ConfigError(
            "compare --scenario with a simulated caller ([caller]) is not supported yet: run "
            "each pipeline with `voicelat run --scenario FILE --frozen RUN_DIR` to replay the "
            "same caller lines on each (docs/CALLER.md)"
        )
    calls = plan_calls([item.scenario for item in loaded], args.repeat)
    plan = [
        PlannedTurn(c.first_index + i, fid, 0, False)
        for c in calls
        for i, fid in enumerate(c.scenario.fixture_ids())
    ]
    return scenario_fixtures(loaded), calls, plan


def _network_axis(combos: Sequence[Combination], spec: str | None) -> list[Combination]:
    """``--network lan,4g``: each combination once per profile, labelled with it."""
    if not spec:
        return list(combos)
    from voicelat.files.network import load_network

    profiles = [load_network(name.strip()) for name in spec.split(",") if name.strip()]
    if len({p.name for p in profiles}) != len(profiles):
        raise ConfigError(f"--network {spec}: a profile is named twice")
    return [
        Combination(
            f"{c.name} @ {p.name}" if len(combos) > 1 else p.name,
            {**c.labels, "network": p.name},
            replace(c.pipeline, network=p),
        )
        for c in combos
        for p in profiles
    ]


def _lives(setup: _Setup) -> list[_Live]:
    """One runner per combination, validated (stage options, fixture audio) up front; a
    combination under a network profile gets its own relay (stopped if a later one fails)."""
    from voicelat.engine.job import with_stack_urls
    from voicelat.engine.network import open_network
    from voicelat.engine.runner import Runner

    lives: list[_Live] = []
    try:
        for c in setup.combos:
            run_dir = setup.out / c.slug
            try:
                net = open_network(argparse.Namespace(), with_stack_urls(c.pipeline), _info)
                pipeline = net.pipeline if net else with_stack_urls(c.pipeline)
                lives.append(
                    _Live(
                        c,
                        Runner(
                            pipeline,
                            setup.fixtures,
                            run_dir,
                            argv=list(sys.argv),
                            calls=setup.calls,
                        ),
                        run_dir,
                        network=net,
                    )
                )
                lives[-1].runner.validate()
            except ConfigError as exc:
                raise ConfigError(f"combination {c.name}: {exc}") from None
    except BaseException:
        _stop_networks(lives)
        raise
    return lives


def _stop_networks(lives: Sequence[_Live]) -> None:
    for lv in lives:
        if lv.network is not None:
            lv.network.close()


def _measure(setup: _Setup, lives: Sequence[_Live]) -> None:
    """Run the interleaved schedule under the stack; every combination's summary is written
    however it ends."""
    from voicelat.engine.job import stack_for

    combos = setup.combos
    stacked = next((c.pipeline for c in combos if c.pipeline.stack == "local"), None)
    started_wall = time.time()
    status = "complete"
    setup.out.mkdir(parents=True, exist_ok=True)
    with stack_for(stacked or combos[0].pipeline) as stack_info:
        for lv in lives:
            lv.runner.stack_info = stack_info
            lv.writer = TurnsWriter(lv.run_dir)
        try:
            asyncio.run(_drive(lives, setup.schedule, _Progress(setup.schedule, len(lives))))
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except BaseException:
            status = "failed"
            raise
        finally:
            for lv in lives:
                _write_summary(lv, setup, status, started_wall)
            if status == "interrupted":
                kept = sum(len(lv.runner.turns) for lv in lives)
                _info(
                    f"interrupted: {kept} finished turn(s) kept, summaries written under "
                    f"{setup.out}"
                )


def _write_summary(lv: _Live, setup: _Setup, status: str, started_wall: float) -> None:
    if lv.writer is not None:
        lv.writer.close()
    if setup.calls:
        write_calls(lv.run_dir, lv.runner.call_records)
    summary = lv.runner.summary(setup.plan, "failed" if lv.setup_error else status, started_wall)
    if lv.setup_error:
        summary["setup_error"] = lv.setup_error
    summary["comparison"] = {"name": setup.name, "combination": lv.combo.name}
    write_summary(lv.run_dir, summary)
    if lv.network is not None:
        # Stops its relay; the requested and realised impairment (and a miss) into the summary.
        lv.network.record(argparse.Namespace(run_dir=lv.run_dir, summary=summary))
    _price(lv.run_dir)


def _price(run_dir: Path) -> None:
    """Price a combination's turns once its measuring is over (core/cost.py; cheap): a
    failure is a warning, the ranking stands without it."""
    from voicelat.score.run import score_run

    if not (run_dir / TURNS_FILE).is_file():
        return
    try:
        score_run(run_dir, "off")
    except (OSError, VoicelatError) as exc:
        _info(f"warning: {run_dir} not priced ({exc})")


def _with_scores(summaries: dict[str, dict[str, Any]], dirs: Mapping[str, Path]) -> None:
    """Each combination's price, reply quality and goodput (voicelat/score) beside its latency."""
    from voicelat.score.run import combination_scores

    for name, run_dir in dirs.items():
        if name in summaries and (run_dir / TURNS_FILE).is_file():
            summaries[name]["scores"] = combination_scores(run_dir)
    _check_currencies(
        {
            name: str(cost.get("currency"))
            for name, s in summaries.items()
            if isinstance(cost := (s.get("scores") or {}).get("cost"), Mapping)
        }
    )


def _check_currencies(currency: Mapping[str, str]) -> None:
    """One currency across the priced combinations (their costs share one axis)."""
    if len(set(currency.values())) > 1:
        mix = ", ".join(f"{n} in {c}" for n, c in sorted(currency.items()))
        raise ConfigError(
            f"the combinations are priced in different currencies ({mix}): "
            "price every combination in one currency to compare their cost"
        )


def _live_document(
    args: argparse.Namespace,
    setup: _Setup,
    lives: Sequence[_Live],
    summaries: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    from voicelat.files.fixtures import fixture_set_hash

    samples = [
        _sample(lv.combo.name, lv.runner.turns, lv.setup_error, summaries.get(lv.combo.name))
        for lv in lives
    ]
    doc = _document(
        args,
        name=setup.name,
        description=setup.description,
        source=setup.source,
        samples=samples,
        summaries=summaries,
        run_dirs={lv.combo.name: lv.run_dir.name for lv in lives},
        labels={lv.combo.name: lv.combo.labels for lv in lives},
        excluded=setup.excluded,
        fixtures={
            "count": len(setup.fixtures),
            "ids": [f.id for f in setup.fixtures],
            "set_sha256": fixture_set_hash(list(setup.fixtures)),
        },
        schedule={
            "order": (
                "interleaved per call: each planned call on every combination in turn"
                if setup.calls
                else "interleaved per fixture: each planned turn on every combination in turn"
            ),
            "warmup": args.warmup,
            "measured_per_combination": sum(not p.warmup for p in setup.plan),
            "repeat": args.repeat,
            "turns": len(setup.schedule),
            "combination_order": [lv.combo.name for lv in lives],
        },
        interleaved=True,
    )
    calls = {k: v["calls"] for k, v in summaries.items() if isinstance(v.get("calls"), dict)}
    if calls:
        doc["calls"] = calls  # a comparison of whole calls: each combination's call figures
    return doc


class _Progress:
    """Each finished turn's line on stdout, and the comparison's progress with an ETA on
    stderr (turns, combinations finished, elapsed, ETA from the mean turn so far).

    Called between turns, never during one: nothing here runs while a turn is stamped.
    """

    def __init__(
        self, schedule: Sequence[Slot], combos: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from voicelat.report.text import turn_line

        self._turn_line = turn_line
        self.total = len(schedule)
        self.combos = combos
        #: The position of each combination's last turn: past it, the combination is done.
        self.last = {s.combination: s.position for s in schedule}
        self.clock = clock
        self.t0 = self.mark = clock()
        self.done = self.failed = 0
        self.finished: set[int] = set()
        self.turn_s: list[float] = []

    def start(self) -> None:
        """Set-up is over: the clock of the ETA starts with the first turn."""
        self.t0 = self.mark = self.clock()

    def skip(self, slot: Slot) -> None:
        """A turn of a combination that could not start: counted, not timed."""
        self.done += 1
        self._count(slot)

    def __call__(self, slot: Slot, combo: str, turn: Turn) -> None:
        now = self.clock()
        self.turn_s.append(now - self.mark)
        self.mark = now
        self.done += 1
        self.failed += turn.failed
        self._count(slot)
        width = len(str(self.total))
        line = self._turn_line(turn, 1).split("] ", 1)[-1]
        print(f"[{slot.position + 1:>{width}}/{self.total}] {combo:<28} {line}", flush=True)
        print(self.line(), file=sys.stderr, flush=True)

    def _count(self, slot: Slot) -> None:
        if self.last.get(slot.combination) == slot.position:
            self.finished.add(slot.combination)

    def line(self) -> str:
        from voicelat.report.progress import CompareProgress, progress_line

        return progress_line(
            CompareProgress(
                done=self.done,
                total=self.total,
                combos_done=len(self.finished),
                combos=self.combos,
                elapsed_s=self.clock() - self.t0,
                turn_s=tuple(self.turn_s),
                failed=self.failed,
            )
        )


async def _drive(lives: Sequence[_Live], schedule: Sequence[Slot], show: _Progress) -> None:
    """Enter every combination's stages once, then run the schedule one turn at a time."""
    from voicelat.engine.stageset import StageSet

    async with AsyncExitStack() as stack:
        for lv in lives:
            try:
                stages = StageSet.of(lv.runner.build_stages()).use_clock(lv.runner.clock)
                lv.stages = await stack.enter_async_context(stages)
            except Exception as exc:
                # This combination cannot run at all: it stays in the ranking as failed, with
                # this reason; the others still compare.
                lv.setup_error = f"set-up failed: {exc}"
                _info(f"{lv.combo.name}: {lv.setup_error}")
        for lv in lives[1:]:
            lv.runner.share_loop_lag(lives[0].runner)
        # Probe the loop only once set-up (workers, handshakes) is done, as `voicelat run` does.
        probe = asyncio.create_task(lives[0].runner.probe_loop_lag())
        show.start()
        try:
            if any(lv.runner.calls for lv in lives):
                await _drive_calls(lives, schedule, show)
                return
            for slot in schedule:
                lv = lives[slot.combination]
                if lv.stages is None:
                    show.skip(slot)
                    continue
                turn = await lv.runner.run_one(slot.planned, lv.stages)
                # Where in the interleaved order it ran: the audit trail of the fair schedule.
                turn = replace(
                    turn,
                    extra={
                        **turn.extra,
                        "compare_slot": slot.position,
                        "combination": lv.combo.name,
                    },
                )
                lv.runner.turns[-1] = turn
                assert lv.writer is not None
                lv.writer.write(turn)
                show(slot, lv.combo.name, turn)
        finally:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe


async def _drive_calls(lives: Sequence[_Live], schedule: Sequence[Slot], show: _Progress) -> None:
    """``--scenario``: each planned call on every combination in turn (the combination's session
    stays open across its calls); every finished turn is written and shown as it comes."""
    from voicelat.engine.call import CallEngine

    slots = {(s.combination, s.planned.index): s for s in schedule}
    for planned in lives[0].runner.calls:
        for k, lv in enumerate(lives):
            if lv.stages is None:
                for i in range(len(planned.scenario.says)):
                    show.skip(slots[k, planned.first_index + i])
                continue
            if not lv.runner.inputs:
                lv.runner.load_inputs(lv.stages.input_rate)

            def done(turn: Turn, k: int = k, lv: _Live = lv) -> None:
                turn = replace(turn, extra={**turn.extra, "combination": lv.combo.name})
                lv.runner.turns.append(turn)
                lv.runner.call_turns.append(turn)
                assert lv.writer is not None
                lv.writer.write(turn)
                show(slots[k, turn.index], lv.combo.name, turn)

            engine = CallEngine(lv.runner.turn_engine(), lv.runner.inputs)
            record = await engine.run(
                planned.scenario,
                lv.stages,
                call_id=planned.call_id,
                first_index=planned.first_index,
                done=done,
                session=0,
            )
            lv.runner.call_records.append(record)


def _sample(
    name: str,
    turns: Sequence[Turn],
    setup_error: str | None = None,
    summary: dict[str, Any] | None = None,
) -> CombinationSample:
    """A combination's turns as the plain integers the ranking works on (``summary``: its
    summary.json, for the run's instrument error when it was calibrated)."""
    measured = [t for t in turns if not t.warmup]
    failures = Counter(
        f"{t.failure_stage}: {t.failure_reason}" for t in measured if t.failed and t.failure_reason
    )
    failure = setup_error or (failures.most_common(1)[0][0] if failures else None)
    return CombinationSample(
        name=name,
        rows=metric_rows(turns),
        measured=len(measured),
        failed=sum(t.failed for t in measured),
        warmup=sum(t.warmup for t in turns),
        cold=sum(t.cold and not t.warmup and t.ok for t in turns),
        failure=failure,
        instrument_ns=instrument_error_ns(summary),
    )


def _document(
    args: argparse.Namespace,
    *,
    name: str,
    description: str,
    source: dict[str, Any],
    samples: Sequence[CombinationSample],
    summaries: dict[str, dict[str, Any]],
    run_dirs: dict[str, str],
    labels: dict[str, dict[str, str]],
    excluded: Sequence[str],
    fixtures: dict[str, Any],
    schedule: dict[str, Any],
    interleaved: bool,
) -> dict[str, Any]:
    """``comparison.json``: the ranking plus what it was made from."""
    by = 50 if args.rank_by == "p50" else 90
    ranked = rank_combinations(
        samples, by=by, level=args.confidence, resamples=args.resamples, seed=args.seed
    )
    combos = []
    for r in ranked:
        s = summaries.get(r.name, {})
        wf = s.get("waterfall") or {}
        combos.append(
            r.to_json()
            | {
                "run_dir": run_dirs.get(r.name, ""),
                "labels": labels.get(r.name, {}),
                "stages": s.get("stages") or {},
                "waterfall": {k: v for k, v in wf.items() if k in ("p50", "p90")},
            }
            | _trust_of(s)
            | ({"scores": s["scores"]} if "scores" in s else {})
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "voicelat-comparison",
        "tool": f"voicelat {__version__}",
        "name": name,
        "description": description,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": list(sys.argv),
        "source": source,
        "interleaved": interleaved,
        "fixtures": fixtures,
        "schedule": schedule,
        "statistics": {
            "rank_by": args.rank_by,
            "level": args.confidence,
            "resamples": args.resamples,
            "seed": args.seed,
            "min_turns": MIN_COMPARE_TURNS,
            "method": "percentile bootstrap over headline turns; vs best = this minus #1",
        },
        "combinations": combos,
        "excluded": list(excluded),
        # The combinations whose runs distrusted their machine (their "trust" says why).
        "untrusted": [c["name"] for c in combos if not c.get("trust", {}).get("trustworthy", 1)],
    }


def _trust_of(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A combination's ``trust`` for comparison.json: whether its run trusted its figures and
    why not (the run's own assessment); nothing when its summary has no trust section."""
    if not isinstance(summary.get("trust"), Mapping):
        return {}
    trust = Trust.from_json(summary["trust"])
    return {
        "trust": {
            "trustworthy": trust.trustworthy,
            "reasons": [r.message for r in trust.reasons],
            "codes": [r.code for r in trust.reasons],
        }
    }


def _finish(args: argparse.Namespace, doc: dict[str, Any], out: Path) -> int:
    from voicelat.cli.view import comparison_page, load_comparison
    from voicelat.report.comparison import comparison_markdown, comparison_text

    out.mkdir(parents=True, exist_ok=True)
    _write(out / COMPARISON_JSON, json.dumps(doc, indent=2) + "\n")
    _write(out / COMPARISON_MD, comparison_markdown(doc))
    # Read back as `voicelat view OUT` reads it: the page and the screen show the same turns.
    loaded = load_comparison(out)
    _write(out / REPORT_HTML, comparison_page(loaded))
    print()
    print(comparison_text(doc))
    print()
    print(f"reports: {out / COMPARISON_MD}, {out / REPORT_HTML}, {out / COMPARISON_JSON}")
    print(f"open it again: voicelat view {out}")
    from voicelat.tui.live import want_tui

    if want_tui(args):
        # The measurement is over: the UI cannot disturb a stamp any more.
        from voicelat.tui.compare import show_comparison

        show_comparison(doc, loaded.runs)
    if not any(c.get("status") == "ok" for c in doc["combinations"]):
        first = doc["combinations"][0] if doc["combinations"] else {}
        raise InfraError(
            f"no combination produced a warm turn; {first.get('name', '?')}: "
            f"{first.get('failure') or first.get('status')} (reports in {out})"
        )
    return EXIT_OK


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _default_out(name: str) -> Path:
    from voicelat.files.matrix import slug

    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{stamp}-compare-{slug(name)}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


# -- ranking runs that already exist --------------------------------------------------------------
def _compare_saved(args: argparse.Namespace, dirs: Sequence[Path]) -> int:
    runs = [load_run(d) for d in dirs]
    resolved = [run.path.resolve() for run in runs]
    twice = next((d for i, d in enumerate(resolved) if d in resolved[:i]), None)
    if twice is not None:
        raise ConfigError(
            f"run {twice} is given twice: ranked against itself it says nothing; "
            "give different runs"
        )
    names: list[str] = []
    summaries: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.summary is None:
            raise ConfigError(
                f"{run.path} has no {SUMMARY_FILE}: its fixtures are unknown, so it cannot be "
                "compared (give directories voicelat wrote)"
            )
        name = run.path.name
        if name in names:
            name = f"{run.path.parent.name}/{name}"
        names.append(name)
        summaries[name] = run.summary
    # Latency depends on what was said: runs on different audio are not comparable.
    check_same_fixtures({n: s.get("fixture_set_sha256") for n, s in summaries.items()})
    samples = [
        _sample(n, list(run.turns), None, summaries[n]) for n, run in zip(names, runs, strict=True)
    ]
    _with_scores(summaries, {n: run.path for n, run in zip(names, runs, strict=True)})
    first = next(iter(summaries.values()))
    out: Path = args.out or _default_out("runs")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"output directory {out} is not empty: choose another --out")
    fx = first.get("fixtures") or []
    doc = _document(
        args,
        name=" vs ".join(names)[:80],
        description=(
            "Existing runs, measured separately (not interleaved): drift between them "
            "is not controlled."
        ),
        source={"runs": [str(d) for d in dirs]},
        samples=samples,
        summaries=summaries,
        run_dirs={n: str(run.path) for n, run in zip(names, runs, strict=True)},
        labels={},
        excluded=[],
        fixtures={
            "count": len(fx),
            "ids": [f.get("id") for f in fx if isinstance(f, dict)],
            "set_sha256": first.get("fixture_set_sha256"),
        },
        schedule={
            "order": "separate runs (not interleaved)",
            "warmup": max((s.get("counts") or {}).get("warmup", 0) for s in summaries.values()),
            "measured_per_combination": "see n",
        },
        interleaved=False,
    )
    return _finish(args, doc, out)


__all__ = ["COMPARISON_JSON", "COMPARISON_MD", "REPORT_HTML", "add_parser", "cmd_compare"]
