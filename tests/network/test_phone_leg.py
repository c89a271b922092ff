"""engine/phone_leg.py: a run under ``--network phone`` on the emulated cascade hears the caller
and plays the reply through the carrier leg: the saved reply is 8 kHz band-limited, its lost
frames are counted per turn and in the summary's realised impairment, and e2e grows by the
leg's delay each way (100 ms + 100 ms, plus the caller's transcoding lookahead)."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import emulated_openai_pipeline
from voicelat.audio.wav import read_wav
from voicelat.core.base.network import NetworkProfile, builtin_profile
from voicelat.core.base.plan import plan_turns
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.emulate import Emulators
from voicelat.engine.network import open_network
from voicelat.engine.phone_leg import PhoneLeg, heard_input
from voicelat.engine.runner import Runner
from voicelat.engine.turn_input import TurnInput
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures

PROFILE = {
    "openai": {
        "latency": {"headers": 5, "ttft": 30, "token": 5, "stt_first": 20, "stt_final": 30,
                    "tts_first_audio": 20, "tts_chunk": 5},
        "content": {"leading_silence_ms": 20.0, "ms_per_char": 10.0,
                    "reply": "Sure, the kitchen lights are on now. Anything else for tonight?"},
    }
}  # fmt: skip
FIXTURES = ("kitchen_lights", "call_mom")


def _fixtures() -> list[Any]:
    return [f for f in load_fixtures(default_fixtures_dir()) if f.id in FIXTURES]


def _energy_above_db(path: Path, hz: float) -> float:
    pcm = read_wav(path)
    y = pcm.to_array().astype(np.float64)
    spec = np.abs(np.fft.rfft(y)) ** 2
    f = np.fft.rfftfreq(len(y), 1 / pcm.rate)
    return float(10 * np.log10(max(spec[f > hz].sum(), 1e-30) / spec.sum()))


async def _run(em: Emulators, out: Path, network: str | None) -> tuple[Any, dict[str, Any]]:
    pipeline = emulated_openai_pipeline(em)
    pipeline = dataclasses.replace(
        pipeline, output=dataclasses.replace(pipeline.output, save_audio=True)
    )
    net = open_network(network, pipeline) if network else None
    runner = Runner(net.pipeline if net else pipeline, _fixtures(), out)
    outcome = await runner.run(plan_turns(list(FIXTURES), turns=4, warmup=1))
    if net is not None:
        assert net.relay is None  # a phone leg is on the audio, not on the connections
        net.record(outcome)
    return outcome, json.loads((out / "summary.json").read_text())


@pytest.mark.e2e
async def test_a_phone_run_plays_band_limited_audio_counts_its_loss_and_adds_its_delay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    async with Emulators(["openai"], profile=PROFILE, seed=2) as em:
        clean, _ = await _run(em, tmp_path / "clean", None)
        phone, summary = await _run(em, tmp_path / "phone", "phone")
    for outcome in (clean, phone):
        assert all(t.ok for t in outcome.turns), [t.failure_reason for t in outcome.turns]

    # The reply at the ear: nothing above the carrier's 4 kHz (the emulator's TTS is narrow
    # itself: test_phone_line.py shows a 6 kHz tone removed), and not the clean reply's
    # samples (mu-law quantised, lost frames concealed).
    clean_wavs = sorted((tmp_path / "clean" / "audio").glob("*.wav"))
    phone_wavs = sorted((tmp_path / "phone" / "audio").glob("*.wav"))
    assert len(phone_wavs) == len(clean_wavs) == 5
    assert max(_energy_above_db(p, 4100) for p in phone_wavs) < -50
    for c, p in zip(clean_wavs, phone_wavs, strict=True):
        a, b = read_wav(c).to_array(), read_wav(p).to_array()
        n = min(len(a), len(b))
        assert n and np.any(a[:n] != b[:n])

    # The loss, per turn and realised over the run (seeded: these very frames every run).
    for t in phone.turns:
        assert t.figures["phone_down_frames"] > 20 and t.figures["phone_up_frames"] > 50
    lost = sum(t.figures["phone_up_lost_frames"] + t.figures["phone_down_lost_frames"]
               for t in phone.turns)  # fmt: skip
    frames = sum(t.figures["phone_up_frames"] + t.figures["phone_down_frames"]
                 for t in phone.turns)  # fmt: skip
    assert 0 < lost < 0.05 * frames
    section = summary["network"]
    assert section["applied_by"] == "phone_leg" and section["misses"] == []
    assert section["realised"]["down"]["delay_p50_ms"] == 100.0
    measured = [t for t in phone.turns if not t.warmup]
    assert section["realised"]["up"]["packets"] >= sum(
        t.figures["phone_up_frames"] for t in measured
    )
    assert "phone_down_lost_frames" in summary["figures"]

    # e2e: + 100 ms on the caller's leg (+ ~9 ms transcoding lookahead) + 100 ms on the reply's.
    def e2e(outcome: Any) -> float:
        return statistics.median(t.e2e_ns for t in outcome.turns if not t.warmup) / 1e6

    delta = e2e(phone) - e2e(clean)
    assert 209 - 25 < delta < 209 + 25, delta


def test_the_callers_frames_are_delayed_and_concealed_reproducibly() -> None:
    fx = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == "kitchen_lights")
    inp = TurnInput.from_fixture(fx, 16000)
    lossy = dataclasses.replace(builtin_profile("phone"), name="lossy")
    lossy = dataclasses.replace(lossy, up=dataclasses.replace(lossy.up, loss_pct=20.0))
    leg = PhoneLeg(lossy)

    def heard(index: int) -> tuple[TurnInput, TurnRecorder]:
        rec = TurnRecorder(index=index, fixture=fx.id, t0_ns=0, repeat=0, warmup=False)
        return heard_input(inp, leg, rec), rec

    a, rec = heard(3)
    b, _ = heard(3)
    c, _ = heard(4)
    assert a.frames == b.frames and a.frames != c.frames  # seeded per turn
    # 100 ms + the 16 kHz transcoder's 9 ms of silence ahead: 109 ms = 1744 samples.
    lead = b"".join(a.frames)[: 2 * 1744]
    assert lead == bytes(len(lead))
    assert len(b"".join(a.frames)) >= 2 * (1744 + inp.pcm.n_samples)
    assert a.speech_end_ms == inp.speech_end_ms and a.pcm == inp.pcm  # the caller's clock
    n, gone = rec._figures["phone_up_frames"], rec._figures["phone_up_lost_frames"]
    assert n == len(inp.frames) and 0.1 * n < gone < 0.3 * n


def test_only_a_pcmu_profile_is_a_phone_leg() -> None:
    from voicelat.engine.phone_leg import phone_leg

    class _P:
        network: NetworkProfile | None = builtin_profile("4g")

    assert phone_leg(_P()) is None
    _P.network = builtin_profile("phone")
    assert phone_leg(_P()) is not None
