"""The endpointer adapters and the offline replay on real audio (the bundled pause fixtures)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from voicelat.audio.endpointers import FRAME_MS, EnergyVad, SileroVad, WebRtcVad, make_vad
from voicelat.audio.endpointers_replay import Grid, audio_seconds, estimate_seconds, replay
from voicelat.audio.frames import frames as split_frames
from voicelat.audio.resample import load_for_stage
from voicelat.audio.vad import Endpoint, Endpointer
from voicelat.core.base.errors import ConfigError
from voicelat.core.measure.endpointing import frames_for, hangover_endpoints
from voicelat.files.fixtures import load_fixtures

PAUSES = Path(__file__).resolve().parents[2] / "fixtures" / "pauses"


def _frame(level: int) -> bytes:
    return int(level).to_bytes(2, "little", signed=True) * 320


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("hangover_ms", "min_speech_ms"), [(100, 40), (300, 100), (60, 20)])
def test_hangover_rule_is_the_pipeline_endpointer(
    seed: int, hangover_ms: int, min_speech_ms: int
) -> None:
    # Random voiced/silent runs: the core rule must emit exactly the Endpointer's endpoints.
    rng = random.Random(seed)
    voiced: list[bool] = []
    while len(voiced) < 400:
        voiced += [rng.random() < 0.5] * rng.randint(1, 25)
    ep = Endpointer(threshold_dbfs=-40, hangover_ms=hangover_ms, min_speech_ms=min_speech_ms)
    expected = [
        k
        for k, v in enumerate(voiced)
        for e in ep.feed(_frame(8000 if v else 10), k)
        if isinstance(e, Endpoint)
    ]
    got = hangover_endpoints(
        voiced,
        hangover_frames=frames_for(hangover_ms, FRAME_MS),
        min_speech_frames=frames_for(min_speech_ms, FRAME_MS),
    )
    assert got == expected


def _frames() -> list[bytes]:
    fx = load_fixtures(PAUSES)[0]
    return split_frames(load_for_stage(fx.path, 16000), FRAME_MS)


def test_each_classifier_hears_speech_and_silence() -> None:
    frames = _frames()  # hesitate_flight: speech 400-3439 ms, pause 1829-2528 ms
    for vad in (EnergyVad(), SileroVad(), WebRtcVad()):
        (voiced,) = vad.voiced(frames, [{"energy": -40, "silero": 0.5, "webrtc": 2}[vad.name]])
        assert len(voiced) == len(frames)
        lead = voiced[150 // FRAME_MS : 350 // FRAME_MS]  # WebRTC adapts over its first frames
        speech = voiced[400 // FRAME_MS : 1829 // FRAME_MS]  # with piper's own comma pauses
        pause = voiced[2000 // FRAME_MS : 2400 // FRAME_MS]
        assert not any(lead), vad.name
        assert sum(speech) > 0.5 * len(speech), vad.name
        assert sum(pause) < 0.2 * len(pause), vad.name


def test_silero_probabilities_follow_the_audio_and_reset() -> None:
    frames = _frames()
    vad = SileroVad()
    first = vad.probabilities(frames)
    assert vad.probabilities(frames) == first  # state reset per fixture
    assert max(first[400 // FRAME_MS : 1829 // FRAME_MS]) > 0.9
    assert first[0] == 0.0  # no complete 32 ms window yet


def test_bad_endpointer_or_mode_is_one_line() -> None:
    with pytest.raises(ConfigError, match="choose from energy, silero, webrtc"):
        make_vad("cobra")
    with pytest.raises(ConfigError, match="modes 0, 1, 2 or 3"):
        WebRtcVad().voiced(_frames()[:3], [2.5])


def test_replay_grid_on_pause_fixtures() -> None:
    fixtures = load_fixtures(PAUSES)
    grid = Grid(hangovers_ms=(200, 1000), thresholds={"energy": (-40.0,)})
    out = replay(fixtures, grid, progress=None)
    assert (out.fixtures, out.with_pauses, out.pauses) == (12, 9, 14)
    assert out.wall_s < out.audio_s  # faster than real time
    by = {(s.config.endpointer, s.config.hangover_ms): s for s in out.scores}
    short, long_ = by[("energy", 200)], by[("energy", 1000)]
    # The energy VAD's offset is the end of its last voiced frame: latency = hangover + <20 ms.
    assert short.p50_ns is not None and 200e6 <= short.p50_ns < 220e6
    assert long_.p50_ns is not None and 1000e6 <= long_.p50_ns < 1020e6
    # A 200 ms hangover cuts every fixture with a pause; 1000 ms only those with longer pauses.
    assert short.cut_fixtures >= 9 and short.cutoffs_in_pause >= 14
    assert long_.cut_fixtures == 2 and long_.missed == 0  # number_code 1048 ms, hesitate_song 1199
    assert estimate_seconds(grid, audio_seconds(fixtures)) > 0
    assert math.isclose(audio_seconds(fixtures), out.audio_s, rel_tol=0.01)
