"""The phone leg inside a call (``run --scenario --network phone``): each turn of the call hears
the caller through the leg as a run's turn does (engine/call.py applies ``heard_input``, which
a call's own turn body would otherwise bypass): the frames' loss drawn and concealed per
turn, and the leg's delay ahead of them, so the call's endpointing grows by the leg's 100 ms
(plus the transcoding's ~9 ms lookahead) against the same call without it."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.calls.calls_helpers import CALLS, MS, openai_profile
from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import PlannedTurn
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.network import open_network
from voicelat.engine.runner import Runner
from voicelat.files.scenario import load_scenario


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "two.toml"
    path.write_text(
        f'name = "two"\nfixtures = "{CALLS}"\n'
        '[[step]]\nsay = "short_01_weather"\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 300\n',
        encoding="utf-8",
    )
    return path


async def _call(em: Emulators, tmp: Path, network: str | None) -> list[Any]:
    loaded = load_scenario(_scenario(tmp))
    calls = plan_calls([loaded.scenario])
    plan = [
        PlannedTurn(c.first_index + i, f, 0, False)
        for c in calls
        for i, f in enumerate(c.scenario.fixture_ids())
    ]
    pipeline = emulated_openai_pipeline(em)
    net = open_network(network, pipeline) if network else None
    runner = Runner(
        net.pipeline if net else pipeline,
        list(loaded.fixtures.values()),
        tmp / (network or "clean"),
        calls=calls,
    )
    outcome = await runner.run(plan)
    return sorted(outcome.turns, key=lambda t: t.index)


@pytest.mark.e2e
async def test_a_calls_turns_hear_the_caller_through_the_phone_leg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=openai_profile("Sure."), seed=1, thread=True) as em:
        clean = await _call(em, tmp_path, None)
        phone = await _call(em, tmp_path, "phone")
    for turns in (clean, phone):
        assert len(turns) == 2 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    # Each turn of the call drew its caller-side frames' loss (and the reply's: PhoneSink).
    for t in phone:
        assert t.figures["phone_up_frames"] > 50 and t.figures["phone_down_frames"] > 5
        assert 0 <= t.figures["phone_up_lost_frames"] < 0.1 * t.figures["phone_up_frames"]
    assert "phone_up_frames" not in clean[0].figures

    # The client's VAD hears the caller's speech end 100 ms + the lookahead (~9 ms) later
    # than the fixture's, so endpointing (from the fixture's speech end) grows by that.
    def endpointing(turns: list[Any]) -> float:
        return statistics.median(t.segments["endpointing"] for t in turns) / MS

    delta = endpointing(phone) - endpointing(clean)
    assert 109 - 15 < delta < 109 + 15, delta
