"""Running the test Pipecat bot (tests/agents/pipecat_transport_agent.py) and agent turns
through it.

:func:`pipecat_agent` starts the bot in a subprocess (its own event loop, as a deployed bot
has) and waits for its ``READY``; its JSON event lines are collected for the assertions.
:func:`run_agent_turns` plays a real fixture to a stage through the runner and the agent turn
engine (an ``[agent]`` pipeline: pacer in real time, sink, AgentRecorder: the path a run takes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import InfraError
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.engine.runner import Runner
from voicelat.engine.stageset import AgentStageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import parse_pipeline

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000


@dataclass
class Agent:
    """A running test bot: its process and the events it printed so far."""

    proc: subprocess.Popen[str]
    port: int
    events: list[dict[str, Any]] = field(default_factory=list)

    def named(self, name: str) -> list[int]:
        return [e["t_ns"] for e in list(self.events) if e.get("event") == name]


@contextlib.contextmanager
def pipecat_agent(transport: str, port: int, *args: str, ready_s: float = 30.0) -> Iterator[Agent]:
    """The test bot on 127.0.0.1:``port`` until the block ends (killed then, by its pid)."""
    module = "tests.agents.pipecat_transport_agent"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-m", module, transport, "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=env,
    )
    agent = Agent(proc, port)
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                ready.set()
            elif line.startswith("{"):
                agent.events.append(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + ready_s
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the test bot ({transport}) did not start")
        yield agent
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def one_fixture_dir(tmp_path: Path, fixture_id: str = "kitchen_lights") -> Path:
    """A fixtures directory holding one bundled (real speech) fixture."""
    src = ROOT / "fixtures"
    manifest = json.loads((src / "manifest.json").read_text())
    entry = next(f for f in manifest["fixtures"] if f["id"] == fixture_id)
    d = tmp_path / "fx"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / entry["file"], d / entry["file"])
    (d / "manifest.json").write_text(json.dumps({**manifest, "fixtures": [entry]}))
    return d


def run_agent_turns(
    tmp_path: Path, make_stage: Any, table: dict[str, Any], *, turns: int = 2, timeout_s: float = 20
) -> list[Turn]:
    """``turns`` turns of the one fixture through the stage ``make_stage(table)`` builds, from
    an ``[agent]`` pipeline (a run whose every turn failed raises InfraError after writing
    them: the turns are what the tests look at)."""
    fixtures = load_fixtures(one_fixture_dir(tmp_path))
    pipeline = parse_pipeline({"agent": table, "turn": {"timeout_s": timeout_s}})
    runner = Runner(pipeline, fixtures, tmp_path / "out")
    # Until the integrator registers the entry points, the class is handed over directly.
    stage = make_stage(pipeline.agent or {})
    runner.build_stages = lambda: AgentStageSet.agent_of(stage)  # type: ignore[method-assign]
    with contextlib.suppress(InfraError):
        asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=turns, warmup=0)))
    return list(runner.turns)
