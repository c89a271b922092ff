"""``[turn_taking] ignore_words``: words that do not interrupt voicelat's cascade. A VAD trigger
during the reply waits for the STT's words of the overlay (the OpenAI emulator transcribes the
bundled fixtures by their manifest text); only a word outside the list stops the reply. On the
bundled scenarios: the backchannels stop a policy without the list and not the same policy
with it; the interruptions still stop, the words' wait inside the detection."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from tests.bargein.bargein_helpers import INTERRUPT_STEPS, LONG_REPLY, MS, scenario
from tests.calls.calls_helpers import openai_profile
from tests.helpers import ROOT, emulated_openai_pipeline
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.bargein import OverlayOutcome, barge_in_section, words_interrupt, words_of
from voicelat.core.summaries.run_summary import BargeInSummary, CallsSummary, RunSummary
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.export.validate import load_schema
from voicelat.files.pipeline import TurnTaking, load_pipeline
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario
from voicelat.report.text import barge_in_lines

BACKCHANNELS = ("mm-hmm", "yeah", "right", "okay")
#: Low enough that every backchannel (0.37-0.58 s of speech) and the cough trigger the VAD.
EAGER = TurnTaking(min_speech_ms=200)


def _profile(**latency: float) -> dict[str, Any]:
    profile = openai_profile(LONG_REPLY, 30.0)
    profile["openai"]["latency"].update(latency)
    # A real recognizer hears no words in a cough: the emulator's answer for audio that is no
    # fixture of the manifest (the cough has no text) is empty, not its canned sentence.
    profile["openai"]["content"]["transcript"] = ""
    return profile


async def _run_policies(
    tmp_path: Path, path: Path, policies: dict[str, TurnTaking], **latency: float
) -> dict[str, list[OverlayOutcome]]:
    """The scenario at ``path`` once per policy, the runs side by side on one emulator (its
    ``latency`` overridden by ``latency``)."""
    loaded = load_scenario(path)
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    async with Emulators(["openai"], profile=_profile(**latency), seed=1, thread=True) as em:
        base = emulated_openai_pipeline(em)

        async def one(label: str, taking: TurnTaking) -> list[OverlayOutcome]:
            calls = plan_calls([loaded.scenario])
            out = tmp_path / label
            pipeline = replace(base, turn_taking=taking)
            runner = Runner(pipeline, list(loaded.fixtures.values()), out, calls=calls)
            outcome = await runner.run(plan)
            assert all(t.ok for t in outcome.turns), [t.failure_reason for t in outcome.turns]
            (call,) = read_calls(out)
            return list(call.overlays)

        labels = list(policies)
        results = await asyncio.gather(*(one(k, policies[k]) for k in labels))
    return dict(zip(labels, results, strict=True))


def test_words_are_normalised_and_only_an_unlisted_one_interrupts() -> None:
    assert words_of("Mm-hmm.") == ["mm-hmm"]
    assert words_of("Wait, actually!") == ["wait", "actually"]
    assert words_of("I DON\u2019T know") == ["i", "don't", "know"]
    assert not words_interrupt("Yeah. Right?", ["yeah", "right"])
    assert not words_interrupt("", ["yeah"])  # a cough: no words at all
    assert words_interrupt("Yeah, wait.", ["yeah"])


def test_the_detection_splits_into_vad_and_words_summing_exactly() -> None:
    o = OverlayOutcome(
        "interrupt", "int", "s", 1, onset_ns=1_000 * MS, detected_ns=1_500 * MS,
        cancel_ns=1_510 * MS, last_byte_ns=1_520 * MS, last_audible_ns=1_600 * MS,
        stopped=True, vad_ns=1_300 * MS,
        words="Wait.", words_verdict="interrupt",
    )  # fmt: skip
    assert o.segments["detection"] == 500 * MS
    assert o.detection_parts == {"vad": 300 * MS, "words": 200 * MS}
    assert sum(o.detection_parts.values()) == o.segments["detection"]
    back = OverlayOutcome.from_json(o.to_json())
    assert back == o and back.to_json()["detection_parts"] == o.detection_parts
    section = barge_in_section([o])
    assert section["detection_parts"]["words"]["p50"] == 200 * MS
    # Through the summary (typed, read back), its schema and the text report.
    back_summary = BargeInSummary.from_json(section)
    assert back_summary.to_json() == section and back_summary.words_ignored == 0
    schema = load_schema("summary.schema.json")
    barge = schema["$defs"]["calls"]["properties"]["barge_in"]
    errors = jsonschema.Draft202012Validator({**barge, "$defs": schema["$defs"]}).iter_errors
    assert not list(errors(section))
    lines = barge_in_lines(RunSummary(calls=CallsSummary(n=1, barge_in=back_summary)))
    assert any(
        "detection waited for words (ignore_words): P50 ms vad 300  words 200" in line
        for line in lines
    ), lines
    # Without a words wait the detection is one segment, and the section has no parts.
    plain = replace(o, vad_ns=None, words=None, words_verdict=None)
    assert plain.detection_parts == {} and "detection_parts" not in barge_in_section([plain])
    assert "words_ignored" not in BargeInSummary.from_json(barge_in_section([plain])).to_json()


def _pipeline_text(tmp_path: Path, taking: str) -> Path:
    src = (ROOT / "pipelines" / "emulated-openai.toml").read_text(encoding="utf-8")
    path = tmp_path / "p.toml"
    path.write_text(f"{src}\n[turn_taking]\n{taking}\n", encoding="utf-8")
    return path


def test_ignore_words_parse_normalised_and_bad_values_are_one_line_errors(
    tmp_path: Path,
) -> None:
    p = load_pipeline(_pipeline_text(tmp_path, 'ignore_words = ["Mm-hmm", "yeah", "uh huh"]'))
    assert p.turn_taking.ignore_words == ("mm-hmm", "yeah", "uh", "huh")
    assert load_pipeline(_pipeline_text(tmp_path, "")).turn_taking.ignore_words == ()
    for bad, says in (
        ('ignore_words = "yeah"', "must be a list of words"),
        ('ignore_words = ["yeah", 3]', "must hold only strings"),
        ('ignore_words = ["yeah", ""]', "holds an entry with no word"),
        ('ignore_words = ["..."]', "holds an entry with no word"),
        ("words_timeout_ms = 0", "must be within 100..10000"),
    ):
        with pytest.raises(ConfigError) as exc:
            load_pipeline(_pipeline_text(tmp_path, bad))
        message = str(exc.value)
        assert "turn_taking" in message and says in message and "\n" not in message, message


@pytest.mark.e2e
async def test_ignore_words_keep_backchannels_from_stopping_and_interruptions_still_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    words_policy = replace(EAGER, ignore_words=BACKCHANNELS)
    listed = TurnTaking(ignore_words=BACKCHANNELS)  # the default minimum speech (300 ms)
    slow = replace(listed, words_timeout_ms=200)
    bundled = ROOT / "scenarios"
    # The runs side by side (each is real-time audio, mostly waiting): one e2e test. The last
    # on an STT that answers only after 800 ms, past a 200 ms bound.
    back, cut, late = await asyncio.gather(
        _run_policies(
            tmp_path / "b", bundled / "backchannel.toml", {"vad": EAGER, "words": words_policy}
        ),
        _run_policies(tmp_path / "i", bundled / "interrupt.toml", {"words": listed}),
        _run_policies(
            tmp_path / "s",
            scenario(tmp_path, "late", INTERRUPT_STEPS),
            {"slow": slow},
            stt_first=800,
            stt_final=820,
        ),
    )
    vad, words = back["vad"], back["words"]
    assert [o.kind for o in words] == ["backchannel"] * 3 + ["noise"]
    assert all(o.measured for o in vad + words)
    # The VAD alone stops on every backchannel (and the cough): false barge-ins.
    assert barge_in_section(vad)["false_barge_in_rate"] == 1.0
    assert all(o.stopped and o.vad_ns is None for o in vad)
    # The same VAD with the words: it triggered on each, the words were only listed ones (the
    # cough none), and the agent talked through every one.
    section = barge_in_section(words)
    assert section["false_barge_in_rate"] == 0.0 and section["words_ignored"] == 4
    for o in words:
        assert o.vad_ns is not None and o.words_verdict == "ignored", o
        assert not o.stopped and o.detected_ns is None
        assert (o.pause_ns or 0) < o.pause_threshold_ns
    assert [o.words for o in words] == ["Mm-hmm.", "Yeah.", "Right.", ""]

    # The interruptions still stop: on the STT's first words ("Wait,", "Sorry,"), the words'
    # wait inside the detection, every segment summing to the stop.
    overlays = cut["words"]
    assert [o.fixture for o in overlays] == ["int_01_wait", "int_02_sorry"]
    for o, first in zip(overlays, ("wait", "sorry"), strict=True):
        assert o.stopped and not o.never_stopped and o.words_verdict == "interrupt", o
        assert o.words is not None and words_of(o.words)[0] == first, o.words
        seg, parts = o.segments, o.detection_parts
        assert o.stop_ns is not None and sum(seg.values()) == o.stop_ns
        assert parts["words"] > 0 and sum(parts.values()) == seg["detection"]
        # The VAD part is the policy's minimum speech (300 ms) after the onset, as without
        # the words; the words part is the STT's answer on loopback, well inside the bound.
        assert 280 * MS <= parts["vad"] <= 380 * MS, parts
        assert parts["words"] < listed.words_timeout_ms * MS, parts

    # Words that never come within the bound: the reply stops anyway at the bound, the reason
    # kept, the words part the bound itself (to a few ms of loop wake-up).
    (fell,) = late["slow"]
    assert fell.stopped and fell.words_verdict == "fallback", fell
    assert fell.words_fallback == "no words within 200 ms" and fell.words == ""
    assert 200 * MS <= fell.detection_parts["words"] <= 230 * MS, fell.detection_parts
