"""What a measuring run is asked to do, as one frozen value: the :class:`RunRequest`.

``voicelat run``, ``voicelat ci``, the pytest plugin and the tests all hand
:func:`voicelat.engine.job.execute_run` one of these. The command line builds it from its flags
in one place (``voicelat/cli/request.py``); nothing below the command line reads a flag.

Adding an option is one field here (with its default: what the run does when nobody asks) and
one line in ``cli/request.py``'s ``request_from_args``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.region import REGION_ENV, check_region
from voicelat.core.measure.schedule import Arrival, Load
from voicelat.files.fixtures import Fixture
from voicelat.files.pipeline import Pipeline

__all__ = ["ExportRequest", "LoadRequest", "PlanRequest", "RunRequest", "region_from"]


def region_from(flag: str | None) -> str | None:
    """``--region`` (checked by its argparse type), else ``VOICELAT_REGION`` (checked here:
    ``ConfigError``, exit 2, naming the variable), else None."""
    if flag is not None:
        return flag
    value = os.environ.get(REGION_ENV)
    if not value:
        return None
    try:
        return check_region(value)
    except ValueError as exc:
        raise ConfigError(f"{REGION_ENV}: {exc}") from None


@dataclass(frozen=True)
class PlanRequest:
    """Which turns: ``repeat`` rounds over the fixtures (or ``turns`` measured turns), after
    ``warmup`` warm-up turns (``voicelat.core.base.plan.plan_turns``)."""

    repeat: int = 1
    turns: int | None = None
    warmup: int = 1


@dataclass(frozen=True)
class LoadRequest:
    """How the turns are offered, as asked: a closed loop of ``concurrency`` sessions, or an
    open loop at ``rate`` turns/s. Checked by :meth:`load` when the run starts (not when the
    request is built), so a bad combination fails after the inputs were read, as it always did."""

    concurrency: int | None = None
    rate: float | None = None
    arrival: Arrival | None = None
    arrival_seed: int | None = None

    def load(self) -> Load:
        """The :class:`~voicelat.core.measure.schedule.Load` asked for; ``ConfigError`` (exit 2) when
        the open-loop options come without a rate, or the values contradict each other."""
        if self.rate is None and (self.arrival is not None or self.arrival_seed is not None):
            raise ConfigError(
                "--arrival and --arrival-seed shape an open-loop schedule: add --rate R"
            )
        try:
            return Load(
                concurrency=self.concurrency or 1,
                rate_per_s=self.rate,
                arrival=self.arrival or "poisson",
                seed=1 if self.arrival_seed is None else self.arrival_seed,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class ExportRequest:
    """Exports besides turns.jsonl, summary.json and turns.csv (docs/EXPORT.md): OTLP to
    ``otlp_endpoint`` (else the OTEL_EXPORTER_OTLP_* variables), Prometheus on
    ``metrics_port``, kept up ``metrics_linger_s`` after the run for a last scrape."""

    otlp_endpoint: str | None = None
    metrics_port: int | None = None
    metrics_linger_s: float = 0.0


@dataclass(frozen=True)
class RunRequest:
    """One measuring run, everything it was asked for. Every field has the default a run
    gets when nobody asks otherwise; ``RunRequest()`` is the embedded stack on the bundled
    fixtures.

    ``pipeline`` / ``fixtures`` are the loaded inputs when the caller has them (the command
    line reads them first, to name the results directory and refuse bad input early; a test
    may build them); otherwise ``pipeline_path`` / ``fixtures_dir`` say where to read them
    (None: the embedded local stack's pipeline, the bundled fixtures).
    """

    pipeline_path: Path | None = None
    fixtures_dir: Path | None = None
    out_dir: Path | None = None
    plan: PlanRequest = field(default_factory=PlanRequest)
    load: LoadRequest = field(default_factory=LoadRequest)
    #: ``--workers N``: the sessions sharded over N worker processes.
    workers: int = 1
    #: ``--ray ADDRESS``: the workers as Ray actors on that cluster.
    ray: str | None = None
    exports: ExportRequest = field(default_factory=ExportRequest)
    #: ``--save-audio``: each reply's audio written into the results directory.
    save_audio: bool = False
    #: ``--scenario FILE|DIR``: whole calls instead of single turns (docs/CALLS.md).
    scenario: Path | None = None
    #: ``--network PROFILE|FILE``: overrides the pipeline's ``[network]`` (docs/NETWORK.md).
    network: str | None = None
    #: ``--calibrate off|quick|full``; None: ``VOICELAT_CALIBRATE``, else quick.
    calibrate: str | None = None
    #: ``--frozen RUN_DIR``: a simulated caller replays the lines it said there (docs/CALLER.md).
    frozen: Path | None = None
    #: ``--caller-cache DIR``: where a simulated caller keeps its rendered lines.
    caller_cache: Path | None = None
    #: ``--region LABEL`` (else ``VOICELAT_REGION``): where the profiler runs, on every turn
    #: and in the summary's ``run`` (docs/NETWORK.md, "Regions"); None: not recorded.
    region: str | None = None
    #: The command line the run records in its summary.
    argv: tuple[str, ...] = ()
    pipeline: Pipeline | None = None
    fixtures: tuple[Fixture, ...] | None = None

    def with_inputs(
        self, pipeline: Pipeline, fixtures: tuple[Fixture, ...] | list[Fixture], out_dir: Path
    ) -> RunRequest:
        """This request with its inputs loaded and its results directory decided."""
        return replace(self, pipeline=pipeline, fixtures=tuple(fixtures), out_dir=out_dir)
