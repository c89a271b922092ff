"""Reply scoring on real audio: DNSMOS separates a clean reply from the same reply with noise,
matches speechmos's own figures, and replies that cannot be scored say why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import ROOT
from voicelat.audio.wav import PCM, read_wav, write_wav
from voicelat.core.base.turn import Turn
from voicelat.files.results import turn_to_json, write_summary
from voicelat.files.scores import reply_audio_path
from voicelat.score.run import Scorers, score_run

pytest.importorskip("speechmos")
pytest.importorskip("jiwer")


def _speech() -> np.ndarray[Any, Any]:
    pcm = read_wav(ROOT / "fixtures" / "book_table.wav")
    assert pcm.rate == 16000
    return np.frombuffer(pcm.samples, dtype="<i2").astype(np.float32) / 32768.0


def _noisy(x: np.ndarray[Any, Any], snr_db: float) -> np.ndarray[Any, Any]:
    rms = float(np.sqrt(np.mean(x**2)))
    noise = np.random.default_rng(0).normal(0, rms / 10 ** (snr_db / 20), len(x))
    return np.clip(x + noise.astype(np.float32), -1, 1).astype(np.float32)


@pytest.mark.e2e
def test_dnsmos_separates_a_clean_reply_from_the_same_reply_with_noise() -> None:
    from voicelat.score.mos import DnsmosScorer

    scorer = DnsmosScorer()
    x = _speech()
    clean, noisy = scorer.score(x), scorer.score(_noisy(x, 5.0))
    assert clean.ovrl - noisy.ovrl > 0.7, (clean, noisy)
    assert clean.bak - noisy.bak > 1.0, (clean, noisy)  # the background is what got worse
    assert 1.0 <= noisy.ovrl < clean.ovrl <= 5.0


@pytest.mark.slow
def test_dnsmos_is_speechmos_own_p835_figures() -> None:
    pytest.importorskip("librosa")  # speechmos.dnsmos imports it (undeclared)
    from speechmos import dnsmos  # type: ignore[import-untyped]

    from voicelat.score.mos import DnsmosScorer

    x = _speech()
    ours, theirs = DnsmosScorer().score(x), dnsmos.run(x, sr=16000)
    assert ours.ovrl == pytest.approx(theirs["ovrl_mos"], abs=1e-6)
    assert ours.sig == pytest.approx(theirs["sig_mos"], abs=1e-6)
    assert ours.bak == pytest.approx(theirs["bak_mos"], abs=1e-6)


def test_reply_wer_normalises_and_finds_a_cut_off_reply() -> None:
    from voicelat.score.reply import reply_wer

    same = reply_wer("Around twenty degrees. Anything else?", "around 20 degrees, anything else")
    assert same is not None and same.wer == 0.0 and not same.truncated
    cut = reply_wer("It is sunny and mild today", "it is sunny and")
    assert cut is not None and cut.truncated and cut.deleted_tail == 2
    assert cut.wer == pytest.approx(2 / 6)
    swapped = reply_wer("It is sunny and mild today", "it is sunny and wild today")
    assert swapped is not None and not swapped.truncated and swapped.wer == pytest.approx(1 / 6)
    nothing = reply_wer("Hello there", "")
    assert nothing is not None and nothing.truncated and nothing.wer == 1.0
    assert reply_wer("...", "hello") is None


class _Echo:
    """A transcriber that must never be asked (every turn here is unscorable)."""

    name = "never"

    def transcribe(self, audio: Any) -> str:
        raise AssertionError("an unscorable reply was transcribed")


def test_replies_that_cannot_be_scored_say_why(tmp_path: Path) -> None:
    turns = [
        Turn(index=i, fixture="f", t0_ns=0, milestones={}, segments={}, e2e_ns=1, reply="Hi there.")
        for i in range(3)
    ]
    (tmp_path / "turns.jsonl").write_text(
        "".join(json.dumps(turn_to_json(t)) + "\n" for t in turns)
    )
    write_summary(tmp_path, {"schema_version": 1, "pipeline": {"name": "p"}})
    for index, seconds, amp in ((1, 1.0, 0), (2, 0.1, 8000)):
        path = reply_audio_path(tmp_path, index, "f")
        path.parent.mkdir(exist_ok=True)
        n = int(16000 * seconds)
        tone = (amp * np.sin(np.arange(n) * 2 * np.pi * 440 / 16000)).astype("<i2")
        write_wav(path, PCM(tone.tobytes(), 16000))
    out = score_run(tmp_path, "all", scorers=Scorers("all", make_transcriber=_Echo))
    reasons = [r["skipped"] for r in out.rows]
    assert reasons[0].startswith("no reply audio saved (run with --save-audio")
    assert reasons[1] == "reply audio is silence"
    assert reasons[2].startswith("reply audio too short to score (0.")
    assert out.quality is not None and out.quality["wer"]["n"] == 0
    assert out.cost is None and out.notes[0].startswith("no prices: add a [cost] table")


def test_a_scorer_that_is_not_installed_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from voicelat.core.base.errors import ConfigError
    from voicelat.score.mos import DnsmosScorer
    from voicelat.score.reply import reply_wer

    monkeypatch.setitem(sys.modules, "jiwer", None)  # importing it now raises ImportError
    with pytest.raises(
        ConfigError, match=r"reply WER needs jiwer: pip install 'voicelat\[score\]'"
    ):
        reply_wer("a b", "a b")
    monkeypatch.setitem(sys.modules, "speechmos", None)
    with pytest.raises(ConfigError, match=r"DNSMOS needs speechmos and onnxruntime: pip install"):
        DnsmosScorer()


def _lossy(x: np.ndarray[Any, Any], pct: float, frame: int = 320) -> np.ndarray[Any, Any]:
    """``pct`` % of the 20 ms packets lost and not concealed (zeroed), at a fixed seed."""
    y = x.copy()
    lost = np.random.default_rng(0).random(len(y) // frame) < pct / 100
    for i in np.flatnonzero(lost):
        y[i * frame : (i + 1) * frame] = 0
    return y


def test_plcmos_drops_with_the_packets_lost_and_is_repeatable() -> None:
    from voicelat.score.mos import PlcmosScorer

    scorer = PlcmosScorer()
    x = _speech()
    clean, some, many = scorer.score(x), scorer.score(_lossy(x, 5)), scorer.score(_lossy(x, 20))
    # Measured on the fixture: ~3.8 clean, ~3.0 at 5 % loss, ~2.2 at 20 % (speechmos's own
    # PLCMOS.get_mos with its random raters lands within a few hundredths of each).
    assert clean - some > 0.4 and some - many > 0.3, (clean, some, many)
    assert 1.0 <= many < some < clean <= 5.0
    assert scorer.score(x) == clean  # fixed raters: the same clip, the same score


class _Said:
    """A transcriber that hears the reply exactly (the PLCMOS trigger is under test here)."""

    name = "said"

    def transcribe(self, audio: Any) -> str:
        return "Book a table."


def _one_turn_run(tmp_path: Path, network: dict[str, Any] | None) -> None:
    turn = Turn(
        index=0, fixture="f", t0_ns=0, milestones={}, segments={}, e2e_ns=1, reply="Book a table."
    )
    (tmp_path / "turns.jsonl").write_text(json.dumps(turn_to_json(turn)) + "\n")
    summary: dict[str, Any] = {"schema_version": 1, "pipeline": {"name": "p"}}
    if network is not None:
        summary["network"] = network
    write_summary(tmp_path, summary)
    path = reply_audio_path(tmp_path, 0, "f")
    path.parent.mkdir(exist_ok=True)
    write_wav(path, read_wav(ROOT / "fixtures" / "book_table.wav"))


@pytest.mark.parametrize(
    ("network", "asked", "scored"),
    [
        (None, None, False),  # no network: no packets lost
        ({"requested": {"up": {"loss_pct": 0.0}, "down": {"loss_pct": 0.0}}}, None, False),
        ({"requested": {"down": {"loss_pct": 2.0}}}, None, True),
        ({"requested": {"down": {"loss_model": "gilbert", "ge_p_pct": 1.5}}}, None, True),
        ({"requested": {}, "realised": {"up": {"lost": 3}}}, None, True),
        ({"requested": {"down": {"loss_pct": 2.0}}}, False, False),
        (None, True, True),
    ],
)
def test_plcmos_is_scored_when_the_run_lost_packets_or_when_asked(
    tmp_path: Path, network: dict[str, Any] | None, asked: bool | None, scored: bool
) -> None:
    _one_turn_run(tmp_path, network)
    out = score_run(tmp_path, "all", scorers=Scorers("all", make_transcriber=_Said), plcmos=asked)
    (row,) = out.rows
    assert row["wer"]["wer"] == 0.0 and row["dnsmos"] is not None
    assert ("plcmos" in row) is scored, row
    assert out.quality is not None
    assert out.quality["plcmos"]["n"] == int(scored)
    if scored:
        assert 3.0 < row["plcmos"] <= 5.0  # the clean fixture
        assert any(n.startswith("PLCMOS scored") for n in out.notes)
