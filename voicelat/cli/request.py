"""The one place a run's flags become a :class:`~voicelat.engine.request.RunRequest`.

``voicelat run`` and ``voicelat ci`` parse the options ``cli/run.py``'s ``add_run_arguments``
declares; :func:`request_from_args` reads each of them once, here, so nothing below the command
line reads a flag by name. A new run option is one field on ``RunRequest`` and one line below.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from voicelat.engine.request import (
    ExportRequest,
    LoadRequest,
    PlanRequest,
    RunRequest,
    region_from,
)

__all__ = ["request_from_args"]


def request_from_args(args: argparse.Namespace, argv: Sequence[str] = ()) -> RunRequest:
    """The run ``args`` (parsed by ``add_run_arguments``) asks for; ``argv`` is the command
    line the run records. A subcommand that declares only some of the options (a test's
    parser, say) gets the defaults for the others."""
    a = vars(args)
    return RunRequest(
        pipeline_path=a.get("pipeline"),
        fixtures_dir=a.get("fixtures"),
        out_dir=a.get("out"),
        plan=PlanRequest(
            repeat=a.get("repeat", 1),
            turns=a.get("turns"),
            warmup=a.get("warmup", 1),
        ),
        load=LoadRequest(
            concurrency=a.get("concurrency"),
            rate=a.get("rate"),
            arrival=a.get("arrival"),
            arrival_seed=a.get("arrival_seed"),
        ),
        workers=a.get("workers") or 1,
        ray=a.get("ray"),
        exports=ExportRequest(
            otlp_endpoint=a.get("otlp_endpoint"),
            metrics_port=a.get("metrics_port"),
            metrics_linger_s=a.get("metrics_linger") or 0.0,
        ),
        save_audio=bool(a.get("save_audio", False)),
        scenario=a.get("scenario"),
        network=a.get("network"),
        calibrate=a.get("calibrate"),
        frozen=a.get("frozen"),
        caller_cache=a.get("caller_cache"),
        region=region_from(a.get("region")),
        argv=tuple(argv),
    )
