"""Which region a worker's turns carry (engine/workers.py, engine/ray_workers.py): the run's
``--region``, or a Ray node's own ``VOICELAT_REGION`` (checked; a bad one is said and the run's
used; one equal to the parent's own variable is inherited, not the node's). Pure: the pool's
tagging and the node label's reading, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.core.base.turn import Turn
from voicelat.engine.ray_workers import RayPool, worker_env
from voicelat.engine.workers import WorkerReport
from voicelat.files.pipeline import load_pipeline

PIPELINE = ROOT / "pipelines" / "emulated-openai.toml"


def _turn(index: int) -> Turn:
    return Turn(index, "fx", 0, {}, {}, 1, extra={"session": 0})


def _pool(region: str | None, said: list[str]) -> RayPool:
    pool = RayPool(load_pipeline(PIPELINE), [], Path("/nonexistent"), 2, region=region)
    pool.progress = said.append
    pool.reports = [WorkerReport(0, 1, node="aaaa0000"), WorkerReport(1, 1, node="bbbb1111")]
    return pool


def test_a_node_label_wins_over_the_run_s_and_a_bad_one_is_said_and_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VOICELAT_REGION", raising=False)
    said: list[str] = []
    pool = _pool("eu-west", said)
    pool.reports[0].region = pool._node_region(pool.reports[0], "us-east")
    pool.reports[1].region = pool._node_region(pool.reports[1], "us east")
    assert [r.region for r in pool.reports] == ["us-east", None]
    assert len(said) == 1 and "VOICELAT_REGION ignored" in said[0] and "us east" in said[0]
    tagged = [pool._tag(_turn(k), k) for k in (0, 1)]
    assert [t.extra["region"] for t in tagged] == ["us-east", "eu-west"]
    assert pool.reports[0].to_json()["region"] == "us-east"
    # No region anywhere: the turns carry none.
    bare = _pool(None, [])
    assert "region" not in bare._tag(_turn(0), 0).extra


def test_the_parent_s_own_label_is_inherited_not_the_node_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_REGION", "laptop")
    pool = _pool("eu-west", [])
    assert pool._node_region(pool.reports[0], "laptop") is None  # a cluster started here
    assert pool._node_region(pool.reports[0], "us-east") == "us-east"
    # ... and the parent's variable is not sent to the actors (a node keeps its own).
    assert "VOICELAT_REGION" not in worker_env(load_pipeline(PIPELINE))
