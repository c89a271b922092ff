"""A measuring run as a job: a pipeline on fixtures, the embedded stack when it is needed, the
fixture runner on a new event loop, and the run's outcome.

``voicelat run``, ``voicelat ci``, ``voicelat compare``, ``voicelat live`` and the pytest plugin
all start runs this way, so the steps live here, below the command line: nothing but the
``voicelat`` command should import :mod:`voicelat.cli`. What the run is asked to do comes as one
frozen :class:`~voicelat.engine.request.RunRequest` (the command line builds it from its flags in
``cli/request.py``); its progress lines go to the ``progress`` callable the caller hands in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.plan import PlannedTurn, plan_turns
from voicelat.core.measure.schedule import Load
from voicelat.engine.probes import run_measuring_loop
from voicelat.engine.progress import (
    NullObserver,
    Observer,
    Progress,
    no_progress,
    stderr_progress,
)
from voicelat.engine.request import RunRequest
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline, default_pipeline_path, load_pipeline

if TYPE_CHECKING:
    # Only for the annotations: the runner pulls in numpy and the stages, which
    # `voicelat --help` and the subcommands that only read results do not need.
    from voicelat.engine.runner import Runner, RunOutcome

__all__ = [
    "default_out_dir",
    "execute_run",
    "export_options",
    "load_scenarios_for",
    "resolve_inputs",
    "scenario_fixtures",
    "stack_for",
    "with_stack_urls",
]


def export_options(request: RunRequest, pipeline: Pipeline, out_dir: Path) -> Any:
    """What the run exports besides turns.jsonl and summary.json: ``turns.csv`` always,
    OTLP with ``--otlp-endpoint`` (or the OTEL_EXPORTER_OTLP_* variables), Prometheus with
    ``--metrics-port``."""
    from voicelat.export import ExportOptions

    ex = request.exports
    return ExportOptions(
        pipeline=pipeline.to_json(),
        run_dir=out_dir,
        otlp_endpoint=ex.otlp_endpoint,
        metrics_port=ex.metrics_port,
        metrics_linger_s=ex.metrics_linger_s,
        csv=True,
        wall_anchor_ns=(time.time_ns(), time.perf_counter_ns()),
    )


def resolve_inputs(request: RunRequest) -> tuple[Pipeline, list[Fixture]]:
    """The pipeline and fixtures the request names (its loaded ones when it has them; else
    ``pipeline_path`` / ``fixtures_dir``, by default the embedded local stack's pipeline and
    the bundled fixtures; a scenario's fixtures for a run of calls); ``save_audio`` turns on
    saving."""
    pipeline = request.pipeline or load_pipeline(request.pipeline_path or default_pipeline_path())
    if request.fixtures is not None:
        fixtures = list(request.fixtures)
    elif request.scenario is not None:
        # A run of calls speaks its scenarios' fixtures (checked here, before anything starts).
        fixtures = scenario_fixtures(load_scenarios_for(request.scenario, request.fixtures_dir))
    else:
        fixtures = load_fixtures(request.fixtures_dir or default_fixtures_dir())
    if request.save_audio:
        pipeline = replace(pipeline, output=replace(pipeline.output, save_audio=True))
    return pipeline, fixtures


def default_out_dir(pipeline: Pipeline, kind: str = "") -> Path:
    """``runs/<time>-<pipeline>[-kind]``, with ``-2``, ``-3``... when that already exists."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{stamp}-{pipeline.name}{'-' + kind if kind else ''}"
    out = Path("runs") / name
    n = 1
    while out.exists():
        n += 1
        out = Path("runs") / f"{name}-{n}"
    return out


def with_stack_urls(pipeline: Pipeline, progress: Progress = no_progress) -> Pipeline:
    """Point stages that name no server at the embedded stack's servers (when it is used),
    and stages naming an emulator's default address at where ``voicelat serve`` really
    listens (``engine/served.py``: a busy default port, ``--port``; said on ``progress``)."""
    from voicelat.engine.served import with_served_emulators

    pipeline = with_served_emulators(pipeline, progress)
    if pipeline.stack != "local":
        return pipeline
    from voicelat.stack import StackConfig
    from voicelat.stages.base import load_stage_class

    cfg = StackConfig()
    urls = {"stt": cfg.stt_url, "tts": cfg.tts_url, "llm": f"{cfg.llm_url}/v1"}
    tables: dict[str, dict[str, Any]] = {}
    for kind in ("stt", "llm", "tts"):
        table = getattr(pipeline, kind).copy()  # a StageTable keeps its file and lines
        cls = load_stage_class(table["stage"], kind)
        # Only stages that talk to an embedded server say which option holds its address
        # (in-process engines such as pocketsphinx have none).
        key = getattr(cls, "stack_url_option", None)
        if key:
            table.setdefault(key, urls[kind])
        tables[kind] = table
    return replace(pipeline, stt=tables["stt"], llm=tables["llm"], tts=tables["tts"])


@contextlib.contextmanager
def stack_for(pipeline: Pipeline, progress: Progress = stderr_progress) -> Iterator[dict[str, Any]]:
    """Bring the embedded stack up when the pipeline needs it; stop only what was started here.

    Yields what the run records about each server (url, version, whether it was reused).
    """
    if pipeline.stack != "local":
        yield {}
        return
    from voicelat.stack import LocalStack, StackConfig

    stack = LocalStack(StackConfig())
    t0 = time.monotonic()
    progress("embedded stack: checking / starting servers (first start assembles the models) ...")
    status = stack.up(progress=lambda p: progress(f"  {p}"))
    progress(f"embedded stack ready in {time.monotonic() - t0:.1f} s")
    for line in status.lines():
        progress(f"  {line}")
    try:
        yield {
            s.name: {
                "url": s.url,
                "package": s.package,
                "version": s.version,
                "pid": s.pid,
                "reused": s.name not in stack.started,
            }
            for s in status
        }
    finally:
        if stack.started:
            progress(f"stopping the servers this run started: {', '.join(stack.started)}")
        stack.release()


@contextlib.contextmanager
def traces_for(pipeline: Pipeline, progress: Progress = stderr_progress) -> Iterator[Any]:
    """An agent pipeline's trace receiver while the run lasts (docs/AGENTS.md), or None when
    there are no agent traces to read (``[agent] traces = "none"``, or not an agent)."""
    t = pipeline.agent_traces
    if pipeline.agent is None or t.mapping == "none":
        yield None
        return
    # Imported here: the receiver pulls in opentelemetry-proto, which black-box runs skip.
    from voicelat.engine.trace_receiver import TraceReceiver

    receiver = TraceReceiver(
        port=t.port,
        mapping=t.mapping,
        clock_offset_ns=round(t.clock_offset_ms * 1_000_000),
        offset_uncertainty_ns=round(t.clock_uncertainty_ms * 1_000_000),
    )
    with receiver:
        progress(f"agent traces ({t.mapping}): point the agent's OTLP exporter at {receiver.url}")
        yield receiver


def execute_run(
    request: RunRequest,
    observer: Observer | None = None,
    progress: Progress = stderr_progress,
) -> RunOutcome:
    """Run the request's plan on the current thread's new event loop; returns the outcome.

    Stage options and fixture audio are validated before any server starts, so bad input
    fails in a second, not after the stack's start-up. On Ctrl-C the finished turns and the
    summary are kept (the runner writes them) and ``KeyboardInterrupt`` goes on up.
    """
    # Imported here: the runner pulls in numpy and the stages (not needed by `--help`).
    from voicelat.engine.runner import Runner

    observer = observer if observer is not None else NullObserver()
    pipeline, fixtures = resolve_inputs(request)
    out_dir = request.out_dir or default_out_dir(pipeline)
    load = request.load.load()
    fixtures, calls, plan = _plan(request, fixtures, load, pipeline)
    from voicelat.engine.network import open_network
    from voicelat.export import ExportObserver, open_exports

    pipeline, callers = _callers_for(request, pipeline, calls, out_dir, progress)
    # --network / [network]: the stages pointed at the impairment relay (docs/NETWORK.md).
    pointed = with_stack_urls(pipeline, progress)
    network = open_network(request.network, pointed, progress, ray=request.ray)
    runner = Runner(
        network.pipeline if network else pointed,
        fixtures,
        out_dir,
        observer=observer,
        argv=list(request.argv),
        calls=calls,
        callers=callers,
        region=request.region,
    )
    try:
        runner.validate()
        from voicelat.engine.calibrate import calibration_for

        runner.calibration = calibration_for(request.calibrate, runner.clock, progress)
        # Opened before the stack and the first turn: a metrics port in use fails now (exit 3).
        # The exporters work on a thread of their own; the measuring loop only queues each turn.
        out_dir.mkdir(parents=True, exist_ok=True)
        exports = open_exports(export_options(request, pipeline, out_dir), warn=progress)
    except BaseException:
        if network is not None:
            network.close()
        raise
    runner.observer = ExportObserver(observer, exports)
    try:
        if request.workers > 1 or request.ray:
            return _execute_on_workers(runner, plan, load, request, progress)
        with (
            stack_for(pipeline, progress) as stack_info,
            traces_for(pipeline, progress) as traces,
        ):
            runner.stack_info = stack_info
            runner.trace_source = traces
            try:
                run_measuring_loop(runner.run(plan, load=load))
            except KeyboardInterrupt:
                kept = runner.turns.appended  # every finished turn (it keeps the last ones)
                progress(f"interrupted: {kept} finished turn(s) kept, summary written to {out_dir}")
                raise
            outcome: RunOutcome = runner.outcome
            return outcome
    finally:
        done = getattr(runner, "outcome", None)
        if network is not None:
            network.record(done)  # stops the relay; its realised impairment in the summary
        exports.close(done.summary if done is not None else None)


def _plan(
    request: RunRequest, fixtures: list[Fixture], load: Load, pipeline: Pipeline
) -> tuple[list[Fixture], Sequence[Any], list[PlannedTurn]]:
    """The run's fixtures, calls (``--scenario``; else none) and planned turns."""
    if request.scenario is not None:
        return _plan_calls(request, request.scenario, load, pipeline)
    p = request.plan
    ids = [f.id for f in fixtures]
    return fixtures, (), plan_turns(ids, repeat=p.repeat, turns=p.turns, warmup=p.warmup)


def _plan_calls(
    request: RunRequest, scenario: Path, load: Load, pipeline: Pipeline
) -> tuple[list[Fixture], list[Any], list[PlannedTurn]]:
    """``--scenario``: the scenarios' fixtures, the calls (``--repeat`` rounds) and their
    turns as the plan. Calls run closed-loop in this process (``--concurrency N`` calls)."""
    from voicelat.engine.call import plan_calls

    if load.rate_per_s is not None:
        raise ConfigError("--rate starts single turns: calls run --concurrency N at once")
    if request.plan.turns is not None:
        raise ConfigError("--turns counts single turns: a scenario sets its own (use --repeat)")
    loaded = load_scenarios_for(scenario, request.fixtures_dir)
    from voicelat.files.scenario import check_overlays

    for item in loaded:
        check_overlays(item.scenario, pipeline)
    calls = plan_calls([item.scenario for item in loaded], request.plan.repeat or 1)
    simulated = any(c.scenario.caller is not None for c in calls)
    if simulated and (request.workers > 1 or request.ray):
        raise ConfigError(
            f"{'--ray' if request.ray else '--workers'} with a simulated caller ([caller]): its "
            "calls run in one process for now (use --concurrency N)"
        )
    if request.frozen is not None and not simulated:
        raise ConfigError("--frozen replays a simulated caller's lines: no scenario has a [caller]")
    # A simulated caller's turns are planned up to its hard limit (the plan's count is an
    # upper bound; each line's fixture is named when the caller renders it).
    plan = [
        PlannedTurn(c.first_index + i, fid, 0, False)
        for c in calls
        for i, fid in enumerate(
            c.scenario.fixture_ids() + ["(caller)"] * (c.scenario.max_turns - len(c.scenario.says))
        )
    ]
    return scenario_fixtures(loaded), calls, plan


def _callers_for(
    request: RunRequest, pipeline: Pipeline, calls: Sequence[Any], out_dir: Path, progress: Any
) -> tuple[Pipeline, Any]:
    """The run's simulated callers (None: no scenario has a ``[caller]``) and the pipeline
    they need (engine/caller.py ``callers_for_run``)."""
    if not any(getattr(c.scenario, "caller", None) is not None for c in calls):
        return pipeline, None
    from voicelat.engine.caller import callers_for_run

    made: tuple[Pipeline, Any] = callers_for_run(request, pipeline, calls, out_dir, progress)
    return made


def load_scenarios_for(scenario: Path, fixtures_dir: Path | None = None) -> list[Any]:
    """The scenarios ``--scenario`` names (their fixtures from ``--fixtures`` if they name
    no folder of their own)."""
    from voicelat.files.scenario import load_scenarios

    return load_scenarios(scenario, fixtures_dir)


def scenario_fixtures(loaded: Sequence[Any]) -> list[Fixture]:
    """Every fixture the scenarios speak, once; one id naming two files is refused."""
    fixtures: dict[str, Fixture] = {}
    for item in loaded:
        for fid, fx in item.fixtures.items():
            if fid in fixtures and fixtures[fid].path != fx.path:
                raise ConfigError(
                    f"{item.scenario.source}: fixture {fid!r} is also another scenario's "
                    f"({fixtures[fid].path}): give one of them another id"
                )
            fixtures[fid] = fx
    return list(fixtures.values())


def _execute_on_workers(
    runner: Runner,
    plan: Sequence[PlannedTurn],
    load: Load,
    request: RunRequest,
    progress: Progress,
) -> RunOutcome:
    """``--workers N``: the plan over N worker processes (voicelat.engine.workers); with
    ``--ray ADDRESS`` over Ray actors on a cluster's nodes (voicelat.engine.ray_workers: one
    per node unless ``--workers`` says how many). The outcome is kept as ``runner.outcome``
    (the exports' summary)."""
    from voicelat.engine.workers import effective_workers

    ray, workers = request.ray, request.workers
    if ray:
        from voicelat.engine.ray_workers import preflight

        progress(f"ray: cluster at {preflight(ray)} answers")  # before any server starts
    else:
        # A call never spans workers: calls are what is dealt, so they cap the count.
        measured = len(runner.calls) or sum(1 for p in plan if not p.warmup)
        workers, warning = effective_workers(load, workers, measured)
        if warning:
            progress(f"warning: {warning}")
    with stack_for(runner.pipeline, progress) as stack_info:
        pool = _pool(runner, workers, request.argv, stack_info, ray, progress)
        pool.calibration = _calibrate_parent(runner.calibration, ray)
        try:
            outcome: RunOutcome = pool.run(plan, load)
            runner.outcome = outcome
            return outcome
        except KeyboardInterrupt:
            kept = pool.turns.appended
            progress(f"interrupted: {kept} turn(s) kept, summary written to {runner.out_dir}")
            raise
        finally:
            kept_outcome = getattr(pool, "outcome", None)
            if getattr(runner, "outcome", None) is None and kept_outcome is not None:
                runner.outcome = kept_outcome


def _calibrate_parent(calibration: Any, ray: str | None) -> Any:
    """The pool's error bar: the reference timed here, in the parent, on this host (the
    workers' host). On a Ray cluster the turns run on other hosts: not calibrated."""
    if calibration is None:
        return None
    if ray:
        calibration.skip("--ray: the turns run on the cluster's hosts, not on this one")
    else:
        run_measuring_loop(calibration.before())
    return calibration


def _pool(
    runner: Runner,
    workers: int,
    argv: Sequence[str],
    stack_info: dict[str, Any],
    ray: str | None,
    progress: Progress,
) -> Any:
    """The worker pool: processes on this machine, or Ray actors across a cluster."""
    common: dict[str, Any] = {
        "observer": runner.observer,
        "argv": list(argv),
        "stack_info": stack_info,
        "region": runner.region,
    }
    if ray:
        from voicelat.engine.ray_workers import RayPool

        size = workers if workers > 1 else 0  # 0: one worker per alive node
        return RayPool(
            runner.pipeline,
            runner.fixtures,
            runner.out_dir,
            size,
            address=ray,
            progress=progress,
            calls=runner.calls,  # --scenario: whole calls per actor, as per worker process
            **common,
        )
    from voicelat.engine.workers import WorkerPool

    return WorkerPool(
        runner.pipeline, runner.fixtures, runner.out_dir, workers, calls=runner.calls, **common
    )
