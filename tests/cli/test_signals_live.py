"""The signal policy for ``voicelat live``: a SIGTERM (``timeout``, ``docker stop``) or a
SIGINT sent mid-session keeps every finished turn and the summary, closes the devices and
exits 143 / 130 without a traceback. Real PortAudio on the file-backed sound card of
tests/live/rig.py (a clip is spoken into the microphone), the pipeline against
``voicelat serve openai`` on loopback."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.emulated_run import KEY_ENV, pipeline, serving
from tests.helpers import ROOT

try:  # the live module imports PortAudio: without the system library these cannot run
    import sounddevice  # noqa: F401
except (ImportError, OSError) as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"PortAudio is not usable here ({exc})", allow_module_level=True)

from tests.live.rig import AlsaRig
from tests.live.test_live_devices import MIC_RATE, Live, _fixture


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with serving() as (url, _):
        yield url


def _live_stopped_by(sig: int, code: int, tmp_path: Path, emulator: str) -> None:
    out = tmp_path / "live"
    with AlsaRig(tmp_path / "rig", mic_rate=MIC_RATE) as rig:
        env = {**rig.env, KEY_ENV: "emulator-key", "PYTHONPATH": str(ROOT)}
        args = ["--pipeline", str(pipeline(tmp_path, emulator)), "--warmup", "0"]
        live = Live([*args, "--out", str(out)], env)
        try:
            live.wait_for("listening", timeout=60)
            time.sleep(0.5)  # the microphone's first buffers are silence
            rig.say(_fixture("weather_paris")[1])
            live.wait_for_out("live-0001", timeout=60)  # the first turn finished
            live.signal(sig)
            rc = live.finish(timeout=30)
        finally:
            live.kill()
    assert rc == code, live.stderr
    assert "Traceback" not in live.stderr, live.stderr
    assert "1 finished turn(s) kept" in live.stderr, live.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    (line,) = (out / "turns.jsonl").read_text().splitlines()
    turn = json.loads(line)
    assert turn["fixture"] == "live-0001" and not turn["failed"], turn.get("failure")
    assert summary["counts"]["turns"] == 1


@pytest.mark.e2e
def test_live_stopped_by_sigterm_keeps_the_finished_turn_and_summary(
    tmp_path: Path, emulator: str
) -> None:
    _live_stopped_by(signal.SIGTERM, 143, tmp_path, emulator)


@pytest.mark.slow
def test_live_stopped_by_sigint_keeps_the_finished_turn_and_summary(
    tmp_path: Path, emulator: str
) -> None:
    _live_stopped_by(signal.SIGINT, 130, tmp_path, emulator)
