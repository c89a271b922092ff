"""A measuring run as a job: a pipeline on fixtures, the embedded stack when it is needed, the
fixture runner on a new event loop, and the run's outcome.

``voicelat run``, ``voicelat ci``, ``voicelat compare``, ``voicelat live`` and the pytest plugin
all start runs this way, so the steps live here, below the command line: nothing but the
``voicelat`` command should import :mod:`voicelat.cli`. The options come as an
``argparse.Namespace`` (or any object with the same attributes): a missing attribute means its
default, so a caller that builds its own (the pytest plugin) names only what it sets.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from voicelat.core.errors import ConfigError
from voicelat.core.plan import PlannedTurn, plan_turns
from voicelat.core.schedule import Load
from voicelat.engine.probes import run_measuring_loop
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.pipeline import Pipeline, default_pipeline_path, load_pipeline

__all__ = [
    "default_out_dir",
    "execute_run",
    "export_options",
    "info",
    "load_from_args",
    "resolve_inputs",
    "set_quiet",
    "stack_for",
    "with_stack_urls",
]


_quiet = False


def set_quiet(quiet: bool) -> None:
    """``-q``: progress lines (:func:`info`) are dropped; errors still print."""
    global _quiet
    _quiet = quiet


def info(msg: str) -> None:
    """A progress line for the person at the terminal (stderr: stdout may carry results)."""
    if not _quiet:
        print(msg, file=sys.stderr, flush=True)


def export_options(args: argparse.Namespace, pipeline: Pipeline, out_dir: Path) -> Any:
    """What the run exports besides turns.jsonl and summary.json: ``turns.csv`` always,
    OTLP with ``--otlp-endpoint`` (or the OTEL_EXPORTER_OTLP_* variables), Prometheus with
    ``--metrics-port``."""
    from voicelat.export import ExportOptions

    return ExportOptions(
        pipeline=pipeline.to_json(),
        run_dir=out_dir,
        otlp_endpoint=getattr(args, "otlp_endpoint", None),
        metrics_port=getattr(args, "metrics_port", None),
        metrics_linger_s=getattr(args, "metrics_linger", None) or 0.0,
        csv=True,
        wall_anchor_ns=(time.time_ns(), time.perf_counter_ns()),
    )


def resolve_inputs(args: argparse.Namespace) -> tuple[Pipeline, list[Fixture]]:
    """The pipeline and fixtures ``args`` name (``pipeline``, ``fixtures``; defaults: the
    embedded local stack's pipeline, the bundled fixtures); ``save_audio`` turns on saving."""
    pipeline = load_pipeline(getattr(args, "pipeline", None) or default_pipeline_path())
    scenario = getattr(args, "scenario", None)
    if scenario is not None:
        # A run of calls speaks its scenarios' fixtures (checked here, before anything starts).
        fixtures = scenario_fixtures(load_scenarios_for(args, Path(scenario)))
    else:
        fixtures = load_fixtures(getattr(args, "fixtures", None) or default_fixtures_dir())
    if getattr(args, "save_audio", False):
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


def with_stack_urls(pipeline: Pipeline) -> Pipeline:
    """Point stages that name no server at the embedded stack's servers (when it is used)."""
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
def stack_for(pipeline: Pipeline) -> Iterator[dict[str, Any]]:
    """Bring the embedded stack up when the pipeline needs it; stop only what was started here.

    Yields what the run records about each server (url, version, whether it was reused).
    """
    if pipeline.stack != "local":
        yield {}
        return
    from voicelat.stack import LocalStack, StackConfig

    stack = LocalStack(StackConfig())
    t0 = time.monotonic()
    info("embedded stack: checking / starting servers (first start assembles the models) ...")
    status = stack.up(progress=lambda p: info(f"  {p}"))
    info(f"embedded stack ready in {time.monotonic() - t0:.1f} s")
    for line in status.lines():
        info(f"  {line}")
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
            info(f"stopping the servers this run started: {', '.join(stack.started)}")
        stack.release()


@contextlib.contextmanager
def traces_for(pipeline: Pipeline) -> Iterator[Any]:
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
        info(f"agent traces ({t.mapping}): point the agent's OTLP exporter at {receiver.url}")
        yield receiver


def load_from_args(args: argparse.Namespace) -> Load:
    """The :class:`~voicelat.core.schedule.Load` the options ask for (``ConfigError`` when the
    open-loop options come without ``rate``). Missing attributes mean the defaults."""
    rate = getattr(args, "rate", None)
    arrival = getattr(args, "arrival", None)
    seed = getattr(args, "arrival_seed", None)
    if rate is None and (arrival is not None or seed is not None):
        raise ConfigError("--arrival and --arrival-seed shape an open-loop schedule: add --rate R")
    try:
        return Load(
            concurrency=getattr(args, "concurrency", None) or 1,
            rate_per_s=rate,
            arrival=arrival or "poisson",
            seed=1 if seed is None else seed,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def execute_run(
    args: argparse.Namespace,
    pipeline: Pipeline,
    fixtures: list[Fixture],
    out_dir: Path,
    observer: Any,
    argv: Sequence[str] = (),
) -> Any:
    """Run the plan on the current thread's new event loop; returns the runner's outcome.

    Stage options and fixture audio are validated before any server starts, so bad input
    fails in a second, not after the stack's start-up. On Ctrl-C the finished turns and the
    summary are kept (the runner writes them) and ``KeyboardInterrupt`` goes on up.
    """
    # Imported here: the runner pulls in numpy and the stages, which `voicelat --help` and
    # the subcommands that only read results do not need.
    from voicelat.engine.runner import Runner

    load = load_from_args(args)
    scenario = getattr(args, "scenario", None)
    calls: Sequence[Any] = ()
    if scenario is not None:
        fixtures, calls, plan = _plan_calls(args, Path(scenario), load)
    else:
        plan = plan_turns(
            [f.id for f in fixtures],
            repeat=getattr(args, "repeat", 1),
            turns=getattr(args, "turns", None),
            warmup=getattr(args, "warmup", 1),
        )
    from voicelat.engine.network import open_network
    from voicelat.export import ExportObserver, open_exports

    pipeline, callers = _callers_for(args, pipeline, calls, out_dir)
    # --network / [network]: the stages pointed at the impairment relay (docs/NETWORK.md).
    network = open_network(args, with_stack_urls(pipeline), info)
    runner = Runner(
        network.pipeline if network else with_stack_urls(pipeline),
        fixtures,
        out_dir,
        observer=observer,
        argv=list(argv),
        calls=calls,
        callers=callers,
    )
    try:
        runner.validate()
        from voicelat.engine.calibrate import calibration_for

        runner.calibration = calibration_for(args, runner.clock, info)
        # Opened before the stack and the first turn: a metrics port in use fails now (exit 3).
        # The exporters work on a thread of their own; the measuring loop only queues each turn.
        out_dir.mkdir(parents=True, exist_ok=True)
        exports = open_exports(export_options(args, pipeline, out_dir), warn=info)
    except BaseException:
        if network is not None:
            network.close()
        raise
    runner.observer = ExportObserver(observer, exports)
    workers = getattr(args, "workers", None) or 1
    ray = getattr(args, "ray", None)
    try:
        if workers > 1 or ray:
            return _execute_on_workers(runner, plan, load, workers, runner.observer, argv, ray)
        with stack_for(pipeline) as stack_info, traces_for(pipeline) as traces:
            runner.stack_info = stack_info
            runner.trace_source = traces
            try:
                run_measuring_loop(runner.run(plan, load=load))
            except KeyboardInterrupt:
                kept = runner.turns.appended  # every finished turn (it keeps the last ones)
                info(f"interrupted: {kept} finished turn(s) kept, summary written to {out_dir}")
                raise
            return runner.outcome
    finally:
        outcome = getattr(runner, "outcome", None)
        if network is not None:
            network.record(outcome)  # stops the relay; its realised impairment in the summary
        exports.close(outcome.summary if outcome is not None else None)


def _plan_calls(
    args: argparse.Namespace, scenario: Path, load: Load
) -> tuple[list[Fixture], list[Any], list[PlannedTurn]]:
    """``--scenario``: the scenarios' fixtures, the calls (``--repeat`` rounds) and their
    turns as the plan. Calls run closed-loop in this process (``--concurrency N`` calls)."""
    from voicelat.engine.call import plan_calls

    if load.rate_per_s is not None:
        raise ConfigError("--rate starts single turns: calls run --concurrency N at once")
    if getattr(args, "ray", None):
        raise ConfigError(
            "--scenario with --ray: calls are not sharded over Ray actors yet; use --workers N "
            "(whole calls per worker process) or one process"
        )
    if getattr(args, "turns", None) is not None:
        raise ConfigError("--turns counts single turns: a scenario sets its own (use --repeat)")
    loaded = load_scenarios_for(args, scenario)
    calls = plan_calls([item.scenario for item in loaded], getattr(args, "repeat", 1) or 1)
    simulated = any(c.scenario.caller is not None for c in calls)
    if simulated and (getattr(args, "workers", None) or 1) > 1:
        raise ConfigError(
            "--workers with a simulated caller ([caller]): its calls run in one process for "
            "now (use --concurrency N)"
        )
    if getattr(args, "frozen", None) is not None and not simulated:
        raise ConfigError("--frozen replays a simulated caller's lines: no scenario has a [caller]")
    # A simulated caller's turns are planned up to its hard limit (the plan's count is an
    # upper bound; each line's fixture is named when the caller renders it).
    plan = [
        PlannedTurn(c.first_index + i, fid, 0, False)
        for c in calls
        for i, fid in enumerate(
            c.scenario.fixture_ids()
            + ["(caller)"] * (c.scenario.max_turns - len(c.scenario.says))
        )
    ]
    return scenario_fixtures(loaded), calls, plan


def _callers_for(
    args: argparse.Namespace, pipeline: Pipeline, calls: Sequence[Any], out_dir: Path
) -> tuple[Pipeline, Any]:
    """The run's simulated callers (None: no scenario has a ``[caller]``) and the pipeline
    they need (engine/caller.py ``callers_for_run``)."""
    if not any(getattr(c.scenario, "caller", None) is not None for c in calls):
        return pipeline, None
    from voicelat.engine.caller import callers_for_run

    made: tuple[Pipeline, Any] = callers_for_run(args, pipeline, calls, out_dir, info)
    return made


def load_scenarios_for(args: argparse.Namespace, scenario: Path) -> list[Any]:
    """The scenarios ``--scenario`` names (their fixtures from ``--fixtures`` if they name
    no folder of their own)."""
    from voicelat.files.scenario import load_scenarios

    return load_scenarios(scenario, getattr(args, "fixtures", None))


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
    runner: Any,
    plan: Any,
    load: Load,
    workers: int,
    observer: Any,
    argv: Sequence[str],
    ray: str | None = None,
) -> Any:
    """``--workers N``: the plan over N worker processes (voicelat.engine.workers); with
    ``--ray ADDRESS`` over Ray actors on a cluster's nodes (voicelat.engine.ray_workers: one
    per node unless ``--workers`` says how many). The outcome is kept as ``runner.outcome``
    (the exports' summary)."""
    from voicelat.engine.workers import effective_workers

    if ray:
        from voicelat.engine.ray_workers import preflight

        info(f"ray: cluster at {preflight(ray)} answers")  # before any server starts
    else:
        # A call never spans workers: calls are what is dealt, so they cap the count.
        measured = len(runner.calls) or sum(1 for p in plan if not p.warmup)
        workers, warning = effective_workers(load, workers, measured)
        if warning:
            info(f"warning: {warning}")
    with stack_for(runner.pipeline) as stack_info:
        pool = _pool(runner, workers, observer, argv, stack_info, ray)
        pool.calibration = _calibrate_parent(runner.calibration, ray)
        try:
            runner.outcome = pool.run(plan, load)
            return runner.outcome
        except KeyboardInterrupt:
            kept = pool.turns.appended
            info(f"interrupted: {kept} turn(s) kept, summary written to {runner.out_dir}")
            raise
        finally:
            if getattr(runner, "outcome", None) is None:
                runner.outcome = getattr(pool, "outcome", None)


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
    runner: Any,
    workers: int,
    observer: Any,
    argv: Sequence[str],
    stack_info: dict[str, Any],
    ray: str | None,
) -> Any:
    """The worker pool: processes on this machine, or Ray actors across a cluster."""
    common: dict[str, Any] = {"observer": observer, "argv": list(argv), "stack_info": stack_info}
    if ray:
        from voicelat.engine.ray_workers import RayPool

        size = workers if workers > 1 else 0  # 0: one worker per alive node
        return RayPool(
            runner.pipeline,
            runner.fixtures,
            runner.out_dir,
            size,
            address=ray,
            progress=info,
            **common,
        )
    from voicelat.engine.workers import WorkerPool

    return WorkerPool(
        runner.pipeline, runner.fixtures, runner.out_dir, workers, calls=runner.calls, **common
    )
