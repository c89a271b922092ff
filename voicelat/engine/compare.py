"""The interleaved comparison: several STT x LLM x TTS combinations measured turn by turn on
one event loop, so drift (a provider's load, the machine's) hits them all alike.

Every combination's stages are entered once (each stage instance is its own connection or
worker), then the fair schedule (:func:`voicelat.files.matrix.fair_schedule`) drives one turn at
a time through each combination's :class:`~voicelat.engine.runner.Runner`: fixture A on every
combination, then B on every combination, ... Each combination's turns land in its own run
directory (``OUT/<combination>/turns.jsonl`` + ``summary.json``, the schema of ``voicelat run``).

``voicelat compare`` is the command around it (its flags become a :class:`CompareRequest`; it
prints the lines and writes the reports); the pytest plugin and the bench scripts can call
:func:`plan_comparison` and :func:`measure_comparison` without the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from voicelat.core.base import jsontext
from voicelat.core.base.errors import ConfigError, VoicelatError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.base.turn import Turn
from voicelat.core.judge.comparison_doc import ComparisonDoc
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.engine.comparison import (
    Ranking,
    check_currencies,
    combination_sample,
    comparison_document,
)
from voicelat.engine.progress import Progress, stderr_progress
from voicelat.engine.request import PlanRequest, region_from
from voicelat.files.matrix import (
    Combination,
    Slot,
    check_stages,
    combinations_from_files,
    load_matrix,
)
from voicelat.files.matrix import fair_schedule as make_schedule
from voicelat.files.results import SUMMARY_FILE, TURNS_FILE, TurnsWriter, write_calls, write_summary

if TYPE_CHECKING:
    from voicelat.engine.call import PlannedCall
    from voicelat.engine.network import NetworkRun
    from voicelat.engine.runner import Runner
    from voicelat.engine.stageset import StageSet
    from voicelat.files.fixtures import Fixture

__all__ = [
    "CombinationRun",
    "CompareObserver",
    "CompareRequest",
    "CompareSetup",
    "default_compare_out",
    "live_comparison_document",
    "measure_comparison",
    "plan_comparison",
    "prepare_comparison",
    "read_summaries",
    "score_comparison",
]


@dataclass(frozen=True)
class CompareRequest:
    """What an interleaved comparison measures: the pipeline files (``pipelines``) or a
    ``matrix`` of alternatives per stage, on the fixtures of ``fixtures_dir`` (None: the
    bundled ones) or a ``scenario``'s calls, under each of ``network``'s comma-separated
    profiles. ``out_dir`` None: ``runs/<time>-compare-<name>``."""

    pipelines: tuple[Path, ...] = ()
    matrix: Path | None = None
    fixtures_dir: Path | None = None
    plan: PlanRequest = field(default_factory=PlanRequest)
    out_dir: Path | None = None
    scenario: Path | None = None
    network: str | None = None
    #: The command line each combination's summary records.
    argv: tuple[str, ...] = ()
    #: ``--caller-cache DIR``: a simulated caller's clips (docs/CALLER.md).
    caller_cache: Path | None = None
    #: ``--region LABEL`` (None: ``VOICELAT_REGION``, else none): on every combination's turns.
    region: str | None = None


@dataclass(frozen=True)
class CompareSetup:
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
    argv: tuple[str, ...] = ()
    #: The plan as asked (``--repeat``, ``--warmup``: comparison.json's schedule says them).
    asked: PlanRequest = field(default_factory=PlanRequest)
    caller_cache: Path | None = None
    region: str | None = None


@dataclass
class CombinationRun:
    """One combination during (and after) a live comparison."""

    combo: Combination
    runner: Runner
    run_dir: Path
    writer: TurnsWriter | None = None
    stages: StageSet | None = None
    setup_error: str | None = None
    #: Its network profile's relay (``--network``; engine/network.py), or None.
    network: NetworkRun | None = None


class CompareObserver(Protocol):
    """What the driver says while it runs the schedule. Called between turns, never during
    one: nothing here runs while a turn is stamped."""

    def start(self) -> None:
        """Set-up is over: the first turn starts."""

    def skip(self, slot: Slot) -> None:
        """A turn of a combination that could not start: counted, not run."""

    def __call__(self, slot: Slot, combo: str, turn: Turn) -> None:
        """``slot``'s turn finished on combination ``combo``."""


# -- planning ------------------------------------------------------------------------------------
def plan_comparison(request: CompareRequest) -> CompareSetup:
    """Read the combinations, the fixtures and the plan; refuse bad input before anything."""
    from voicelat.core.base.plan import plan_turns
    from voicelat.files.fixtures import default_fixtures_dir, load_fixtures
    from voicelat.stages.base import load_stage_class

    region = region_from(request.region)  # a bad VOICELAT_REGION: exit 2, before anything
    if request.matrix is not None:
        matrix = load_matrix(request.matrix)
        combos, name, description = matrix.combinations, matrix.name, matrix.description
        excluded = list(matrix.excluded)
        source: dict[str, Any] = {"matrix": str(request.matrix)}
        where = str(request.matrix)
    else:
        combos = combinations_from_files(list(request.pipelines))
        name, description, excluded = "+".join(c.slug for c in combos)[:60], "", []
        source = {"pipelines": [str(p) for p in request.pipelines]}
        where = "pipelines"
    # Unknown stage names fail here, with the known ones listed, before anything starts.
    check_stages(combos, load_stage_class, where)
    combos = _network_axis(combos, request.network)
    check_currencies({c.name: c.pipeline.cost.currency for c in combos if c.pipeline.cost})
    out: Path = request.out_dir or default_compare_out(name)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"output directory {out} is not empty: choose another --out")
    head = (list(combos), name, description, excluded, source)
    p = request.plan
    if request.scenario is not None:
        fixtures, calls, plan = _plan_calls(request, request.scenario)
        schedule = _call_schedule(len(combos), calls)
        return CompareSetup(
            *head, fixtures, plan, schedule, out, tuple(calls), request.argv, p,
            request.caller_cache, region,
        )  # fmt: skip
    fixtures = load_fixtures(request.fixtures_dir or default_fixtures_dir())
    ids = [f.id for f in fixtures]
    plan = plan_turns(ids, repeat=p.repeat, turns=p.turns, warmup=p.warmup)
    schedule = make_schedule(len(combos), ids, repeat=p.repeat, turns=p.turns, warmup=p.warmup)
    return CompareSetup(
        *head, fixtures, plan, list(schedule), out, argv=request.argv, asked=p, region=region
    )


def default_compare_out(name: str) -> Path:
    """``runs/<time>-compare-<name>``, with ``-2``, ``-3``... when that already exists."""
    from voicelat.files.matrix import slug

    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{stamp}-compare-{slug(name)}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = Path(f"{base}-{n}")
    return out


def _call_schedule(n_combinations: int, calls: Sequence[PlannedCall]) -> list[Slot]:
    """Each call on every combination in turn, in the same combination order every time: one
    slot per turn, so progress counts turns as for single turns."""
    out: list[Slot] = []
    for call in calls:
        for c in range(n_combinations):
            for i, fid in enumerate(_turn_ids(call)):
                out.append(Slot(len(out), c, PlannedTurn(call.first_index + i, fid, 0, False)))
    return out


def _turn_ids(call: PlannedCall) -> list[str]:
    """A call's turns as planned: its ``say`` steps' fixtures, then a simulated caller's up to
    its hard limit (an upper bound: it may end sooner; each line's fixture is named when the
    caller renders it), as `voicelat run` plans them."""
    ids = call.scenario.fixture_ids()
    return ids + ["(caller)"] * (call.scenario.max_turns - len(call.scenario.says))


def _plan_calls(
    request: CompareRequest, scenario: Path
) -> tuple[list[Fixture], list[PlannedCall], list[PlannedTurn]]:
    """``--scenario``: the calls, their fixtures and their turns (the same for every one)."""
    from voicelat.engine.call import plan_calls
    from voicelat.engine.job import load_scenarios_for, scenario_fixtures

    if request.plan.turns is not None:
        raise ConfigError("--turns counts single turns: a scenario sets its own (use --repeat)")
    loaded = load_scenarios_for(scenario, request.fixtures_dir)
    calls = plan_calls([item.scenario for item in loaded], request.plan.repeat)
    plan = [
        PlannedTurn(c.first_index + i, fid, 0, False)
        for c in calls
        for i, fid in enumerate(_turn_ids(c))
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


# -- measuring -----------------------------------------------------------------------------------
def prepare_comparison(
    setup: CompareSetup, progress: Progress = stderr_progress
) -> list[CombinationRun]:
    """One runner per combination, validated (stage options, fixture audio) up front; a
    combination under a network profile gets its own relay (stopped if a later one fails)."""
    from voicelat.engine.job import with_stack_urls
    from voicelat.engine.network import open_network
    from voicelat.engine.runner import Runner

    argv = list(setup.argv or sys.argv)
    runs: list[CombinationRun] = []
    try:
        for c in setup.combos:
            run_dir = setup.out / c.slug
            try:
                pointed = with_stack_urls(c.pipeline, progress)
                net = open_network(None, pointed, progress)
                pipeline = net.pipeline if net else pointed
                pipeline, callers = _callers(setup, pipeline, run_dir, progress, bool(runs))
                runner = Runner(
                    pipeline, setup.fixtures, run_dir, argv=argv, calls=setup.calls,
                    callers=callers, region=setup.region,
                )  # fmt: skip
                runs.append(CombinationRun(c, runner, run_dir, network=net))
                runner.validate()
            except ConfigError as exc:
                raise ConfigError(f"combination {c.name}: {exc}") from None
    except BaseException:
        _stop_networks(runs)
        raise
    return runs


def _callers(
    setup: CompareSetup, pipeline: Any, run_dir: Path, progress: Progress, follow: bool
) -> tuple[Any, Any]:
    """A combination's simulated callers (None: no call has a ``[caller]``). The first
    combination's caller is the live one (its LLM writes each line from what its agent said);
    every other combination's replays those lines call by call (``follow``), so every
    combination hears the same caller audio, the point of a comparison (docs/CALLER.md)."""
    if not any(c.scenario.caller is not None for c in setup.calls):
        return pipeline, None
    from types import SimpleNamespace

    from voicelat.engine.caller import callers_for_run

    args = SimpleNamespace(caller_cache=setup.caller_cache, frozen=None)
    return callers_for_run(args, pipeline, setup.calls, run_dir, progress, follow=follow)


def measure_comparison(
    setup: CompareSetup,
    runs: Sequence[CombinationRun],
    observer: CompareObserver,
    progress: Progress = stderr_progress,
) -> None:
    """Measure the prepared combinations (:func:`prepare_comparison`) on the interleaved
    schedule, under the embedded stack when a combination needs it; every combination's
    summary is written however it ends, and its relay stopped."""
    try:
        _measure(setup, runs, observer, progress)
    finally:
        _stop_networks(runs)  # idempotent: each relay stopped once its summary is written


def read_summaries(runs: Sequence[CombinationRun]) -> dict[str, RunSummary]:
    """Each combination's ``summary.json`` as written (priced, scored), typed, by name."""
    return {
        r.combo.name: RunSummary.from_json(
            jsontext.loads((r.run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
        )
        for r in runs
    }


def _stop_networks(runs: Sequence[CombinationRun]) -> None:
    for r in runs:
        if r.network is not None:
            r.network.close()


def _measure(
    setup: CompareSetup,
    runs: Sequence[CombinationRun],
    observer: CompareObserver,
    progress: Progress,
) -> None:
    from voicelat.engine.job import stack_for

    combos = setup.combos
    stacked = next((c.pipeline for c in combos if c.pipeline.stack == "local"), None)
    started_wall = time.time()
    status = "complete"
    setup.out.mkdir(parents=True, exist_ok=True)
    with (
        stack_for(stacked or combos[0].pipeline, progress) as stack_info,
        _trace_receivers(runs, progress),
    ):
        for r in runs:
            r.runner.stack_info = stack_info
            r.writer = TurnsWriter(r.run_dir)
        try:
            asyncio.run(_drive(runs, setup.schedule, observer, progress))
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except BaseException:
            status = "failed"
            raise
        finally:
            for r in runs:
                _write_summary(r, setup, status, started_wall, progress)
            if status == "interrupted":
                kept = sum(len(r.runner.turns) for r in runs)
                progress(
                    f"interrupted: {kept} finished turn(s) kept, summaries written under "
                    f"{setup.out}"
                )


@contextlib.contextmanager
def _trace_receivers(runs: Sequence[CombinationRun], progress: Progress) -> Iterator[None]:
    """The agent combinations' trace receivers while the comparison lasts, as ``voicelat run``
    opens one (engine/job.py ``traces_for``): without them a traced agent's turns were all
    ``untraced``. One receiver per ``[agent]`` trace setting, shared by the combinations that
    name it (``--network lan,4g`` repeats one pipeline); the turns run one at a time, so each
    turn's window holds only its own call's spans."""
    from voicelat.engine.job import traces_for

    by_port: dict[int, tuple[Any, Any]] = {}
    with contextlib.ExitStack() as stack:
        for r in runs:
            p = r.runner.pipeline
            if p.agent is None or p.agent_traces.mapping == "none":
                continue
            t = p.agent_traces
            if t.port not in by_port:
                by_port[t.port] = (t, stack.enter_context(traces_for(p, progress)))
            elif by_port[t.port][0] != t:
                raise ConfigError(
                    f"combination {r.combo.name}: its [agent] traces settings differ from "
                    f"another combination's on the same trace_port {t.port}; give it its own "
                    "trace_port"
                )
            r.runner.trace_source = by_port[t.port][1]
        yield


def _write_summary(
    r: CombinationRun, setup: CompareSetup, status: str, started_wall: float, progress: Progress
) -> None:
    from voicelat.engine.runner import RunOutcome

    if r.writer is not None:
        r.writer.close()
    if setup.calls:
        write_calls(r.run_dir, r.runner.call_records)
    summary = RunSummary.from_json(
        r.runner.summary(setup.plan, "failed" if r.setup_error else status, started_wall)
    )
    summary = replace(
        summary,
        extra={
            **summary.extra,
            **({"setup_error": r.setup_error} if r.setup_error else {}),
            "comparison": {"name": setup.name, "combination": r.combo.name},
        },
    )
    write_summary(r.run_dir, summary)
    if r.network is not None:
        # Stops its relay; the requested and realised impairment (and a miss) into the
        # summary, which it writes again (the network's section is the relay's to add).
        r.network.record(RunOutcome(r.run_dir, [], summary.to_json()))
    _price(r.run_dir, progress)


def _price(run_dir: Path, progress: Progress) -> None:
    """Price a combination's turns once its measuring is over (core/judge/cost.py; cheap): a
    failure is a warning, the ranking stands without it."""
    from voicelat.score.run import score_run

    if not (run_dir / TURNS_FILE).is_file():
        return
    try:
        score_run(run_dir, "off")
    except (OSError, VoicelatError) as exc:
        progress(f"warning: {run_dir} not priced ({exc})")


def score_comparison(runs: Sequence[CombinationRun], mode: str, progress: Progress) -> None:
    """``compare --score wer|all``: score every combination's replies once the whole
    comparison is measured (never while another combination still measures: Whisper and
    DNSMOS take seconds a turn). One set of scorers serves all of them (each model loads
    once); a combination that cannot be scored is a warning, the ranking stands without it."""
    from voicelat.score.run import Scorers, score_run

    if mode == "off":
        return
    scorers = Scorers(mode)
    for r in runs:
        if not (r.run_dir / TURNS_FILE).is_file():
            continue
        started = time.monotonic()
        try:
            outcome = score_run(r.run_dir, mode, scorers=scorers)
        except (OSError, VoicelatError) as exc:
            progress(
                f"warning: {r.combo.name} not scored ({exc}); retry: voicelat score {r.run_dir}"
            )
            continue
        took = time.monotonic() - started
        progress(f"scored {r.combo.name}: {len(outcome.rows)} turn(s) in {took:.0f} s ({mode})")


async def _drive(
    runs: Sequence[CombinationRun],
    schedule: Sequence[Slot],
    show: CompareObserver,
    progress: Progress,
) -> None:
    """Enter every combination's stages once, then run the schedule one turn at a time."""
    from voicelat.engine.stageset import StageSet

    async with AsyncExitStack() as stack:
        for r in runs:
            try:
                stages = StageSet.of(r.runner.build_stages()).use_clock(r.runner.clock)
                r.stages = await stack.enter_async_context(stages)
            except Exception as exc:
                # This combination cannot run at all: it stays in the ranking as failed, with
                # this reason; the others still compare.
                r.setup_error = f"set-up failed: {exc}"
                progress(f"{r.combo.name}: {r.setup_error}")
        for r in runs[1:]:
            r.runner.share_loop_lag(runs[0].runner)
        # Probe the loop only once set-up (workers, handshakes) is done, as `voicelat run` does.
        probe = asyncio.create_task(runs[0].runner.probe_loop_lag())
        show.start()
        try:
            if any(r.runner.calls for r in runs):
                await _drive_calls(runs, schedule, show)
                return
            await _drive_turns(runs, schedule, show)
        finally:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe


async def _drive_turns(
    runs: Sequence[CombinationRun], schedule: Sequence[Slot], show: CompareObserver
) -> None:
    for slot in schedule:
        r = runs[slot.combination]
        if r.stages is None:
            show.skip(slot)
            continue
        # Where in the interleaved order it ran: the audit trail of the fair schedule.
        where: Mapping[str, Any] = {"compare_slot": slot.position, "combination": r.combo.name}
        turn = await r.runner.run_one(slot.planned, r.stages, extra=where)
        assert r.writer is not None
        r.writer.write(turn)
        show(slot, r.combo.name, turn)


async def _drive_calls(
    runs: Sequence[CombinationRun], schedule: Sequence[Slot], show: CompareObserver
) -> None:
    """``--scenario``: each planned call on every combination in turn (the combination's session
    stays open across its calls); every finished turn is written and shown as it comes."""
    slots = {(s.combination, s.planned.index): s for s in schedule}
    async with contextlib.AsyncExitStack() as entered:
        # The callers' stages are entered before any call (their set-up is never a turn's).
        for r in runs:
            if r.runner.callers is not None:
                await entered.enter_async_context(r.runner.callers)
        for planned in runs[0].runner.calls:
            await _one_call_everywhere(runs, planned, slots, show)
        for r in runs:  # the judge, once every call is over (no turn is running)
            if r.runner.callers is not None:
                r.runner.call_records[:] = await r.runner.callers.settle(r.runner.call_records)


async def _one_call_everywhere(
    runs: Sequence[CombinationRun],
    planned: PlannedCall,
    slots: Mapping[tuple[int, int], Slot],
    show: CompareObserver,
) -> None:
    """``planned`` on each combination in turn; a simulated caller's lines, once the first
    combination that could run it has, handed to the others' callers to replay."""
    from voicelat.engine.call import CallEngine

    said: list[Any] | None = None
    for k, r in enumerate(runs):
        if r.stages is None:
            for i in range(len(_turn_ids(planned))):
                show.skip(slots[k, planned.first_index + i])
            continue
        if not r.runner.inputs:
            r.runner.load_inputs(r.stages.input_rate)

        def done(turn: Turn, k: int = k, r: CombinationRun = r) -> None:
            turn = r.runner.stamp(replace(turn, extra={**turn.extra, "combination": r.combo.name}))
            r.runner.record(turn)
            assert r.writer is not None
            r.writer.write(turn)
            show(slots[k, turn.index], r.combo.name, turn)

        callers = r.runner.callers
        if callers is not None and said is not None:
            callers.replay(planned.call_id, said)
        source = None if callers is None else callers.source(planned, r.stages.input_rate)
        engine = CallEngine(r.runner.turn_engine(), r.runner.inputs)
        record = await engine.run(
            planned.scenario,
            r.stages,
            call_id=planned.call_id,
            first_index=planned.first_index,
            done=done,
            session=0,
            source=source,
        )
        if source is not None:
            record = callers.finished(source, record)
            if said is None:
                said = list(source.lines)
        r.runner.call_records.append(record)


# -- the document ----------------------------------------------------------------------------
def live_comparison_document(
    ranking: Ranking,
    setup: CompareSetup,
    runs: Sequence[CombinationRun],
    summaries: Mapping[str, RunSummary],
    scores: Mapping[str, Mapping[str, Any]] | None = None,
) -> ComparisonDoc:
    """``comparison.json`` of an interleaved comparison that was just measured."""
    from voicelat.files.fixtures import fixture_set_hash

    samples = [
        combination_sample(r.combo.name, r.runner.turns, r.setup_error, summaries.get(r.combo.name))
        for r in runs
    ]
    return comparison_document(
        ranking,
        name=setup.name,
        description=setup.description,
        source=setup.source,
        samples=samples,
        summaries=summaries,
        scores=scores,
        run_dirs={r.combo.name: r.run_dir.name for r in runs},
        labels={r.combo.name: r.combo.labels for r in runs},
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
            "warmup": setup.asked.warmup,
            "measured_per_combination": sum(not p.warmup for p in setup.plan),
            "repeat": setup.asked.repeat,
            "turns": len(setup.schedule),
            "combination_order": [r.combo.name for r in runs],
        },
        interleaved=True,
    )
