"""A simulated caller holding whole conversations with the emulated cascade, through the
``voicelat run`` command: real HTTP servers on loopback for the agent (the OpenAI emulator's
STT -> LLM -> TTS) and for the caller (a second OpenAI emulator: its LLM answers a
conversation's replies in turn, its TTS renders each line). Every caller turn has ground-truth
speech bounds and an e2e; a rerun with the same cache sends byte-identical audio (a corrupt
entry is rendered again, with a warning); ``--frozen`` replays the recorded lines against a
changed pipeline; an unreachable caller LLM is one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.calls.calls_helpers import CALLS, MS, openai_profile
from voicelat.cli.main import main
from voicelat.core.calls.call import CALL_ID, CALL_TURN
from voicelat.emulate import Emulators
from voicelat.files.results import load_run, read_calls

ROOT = Path(__file__).resolve().parents[2]
LINES = [
    "Hi, I would like to book a table for dinner.",
    "There will be four of us.",
    "Tomorrow evening, at eight.",
    "Great, thank you. Goodbye. [DONE]",
]
CALLER_PROFILE: dict[str, Any] = {
    "openai": {
        "latency": {"headers": 5, "ttft": 30, "token": 3, "tts_first_audio": 20, "tts_chunk": 2},
        "content": {"replies": LINES, "ms_per_char": 12.0, "leading_silence_ms": 25.0},
    }
}


def _pipeline(tmp_path: Path, port: int, name: str = "agent.toml") -> Path:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_text(text.replace("127.0.0.1:8401", f"127.0.0.1:{port}"), encoding="utf-8")
    return path


def _scenario(tmp_path: Path, caller_port: int, max_turns: int = 8, extra: str = "") -> Path:
    url = f"http://127.0.0.1:{caller_port}/v1"
    path = tmp_path / "booker.toml"
    path.write_text(
        'name = "booker"\ngreeting = "Hello, this is the restaurant. How can I help?"\n'
        "[[step]]\nexpect_greeting = true\n"
        "[caller]\n"
        'persona = "You are Sam, calling a restaurant."\n'
        'goal = "A table for five, tomorrow at eight."\n'
        f"max_turns = {max_turns}\nseed = 7\ngap_ms = 300\njudge = true\n{extra}"
        f'[caller.llm]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\n'
        'api_key_env = "VOICELAT_EMULATOR_KEY"\n'
        f'[caller.voice]\nstage = "openai-tts"\nbase_url = "{url}"\nmodel = "gpt-4o-mini-tts"\n'
        'voice = "echo"\napi_key_env = "VOICELAT_EMULATOR_KEY"\n',
        encoding="utf-8",
    )
    return path


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    text = (run_dir / "conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


async def _run(*argv: str) -> int:
    # The command makes its own event loop (as `voicelat run` does), on a thread of its own.
    return await asyncio.to_thread(main, ["run", "--calibrate", "off", *argv])


def _uploads(em: Emulators) -> list[str]:
    return [str(s.detail.get("audio_sha256")) for s in em.truth.select("openai", "transcriptions")]


def _check_conversation(run_dir: Path, caller: Emulators, out: str) -> list[dict[str, Any]]:
    """The recorded conversation of the first run: 4 caller turns, the goal reached on the
    last, every turn with the render's ground-truth bounds and an e2e."""
    run = load_run(run_dir)
    turns = sorted(run.turns, key=lambda t: t.index)
    lines = _lines(run_dir)
    assert [ln["caller_text"] for ln in lines] == [*LINES[:3], "Great, thank you. Goodbye."]
    assert [t.extra[CALL_TURN] for t in turns] == [1, 2, 3, 4]
    assert all(t.ok and t.e2e_ns is not None for t in turns), [t.failure_reason for t in turns]
    for turn, line in zip(turns, lines, strict=True):
        # Ground truth from the render: the clip's measured bounds are the turn's marks.
        assert turn.fixture.startswith("caller-") and turn.fixture[7:] == line["cache_key"][:16]
        assert turn.milestones["speech_start"] == line["speech_start_ms"] * MS
        assert turn.milestones["speech_end"] == line["speech_end_ms"] * MS
        assert line["speech_end_ms"] - line["speech_start_ms"] >= 250
        assert line["e2e_ns"] == turn.e2e_ns and line["turn_index"] == turn.index
        assert line["agent_text"] == "Sure thing." and line["heard_by"] == "text"
        # The caller got ready before the turn: its time is its own, never the turn's.
        assert line["prep_ns"] > 0 and not line["cached"]
        assert set(turn.segments) == set(turns[0].segments)  # the full waterfall, each turn
    # The caller's LLM saw the call from its side: system + greeting, then 2 more a turn.
    chats = caller.truth.select("openai", "chat")
    assert [c.detail["messages"] for c in chats[:4]] == [2, 4, 6, 8]
    (record,) = read_calls(run_dir)
    part = record.extra["caller"]
    assert part["end_reason"] == "goal" and record.turns_completed == 4
    assert record.turns_planned == 4 and record.greeting_ns is not None
    assert "goal_reached" in part["judge"]  # the judge's answer, recorded as such
    assert all(t.extra[CALL_ID] == record.call_id for t in turns)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["caller"]["end_reasons"] == {"goal": 1}
    assert summary["caller"]["prep"]["n"] == 4
    assert "caller: 1 call ended by goal 1" in out and "Great, thank you. Goodbye." in out
    # report.html's call timeline carries the words: each bar's tooltip.
    from voicelat.cli.view import run_page

    page = run_page(run)
    assert "<title>turn 1: Hi, I would like to book a table for dinner.</title>" in page
    assert "<title>turn 4: Sure thing.</title>" in page
    return lines


@pytest.mark.e2e
async def test_a_simulated_caller_converses_and_replays_frozen_against_a_changed_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    cache = tmp_path / "cache"
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as agent,
        Emulators(["openai"], profile=CALLER_PROFILE, seed=1, thread=True) as caller,
    ):
        pipeline = _pipeline(tmp_path, agent.servers["openai"].port)
        scenario = _scenario(tmp_path, caller.servers["openai"].port)
        first = tmp_path / "run1"
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o", str(first),
                          "--caller-cache", str(cache))  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.err
        lines = _check_conversation(first, caller, out.out)
        heard = _uploads(agent)
        assert len(heard) == 4

        # A corrupt cache entry: found, said, rendered again (the same bytes: the same voice).
        victim = cache / lines[1]["cache_key"][:2] / f"{lines[1]['cache_key']}.wav"
        data = bytearray(victim.read_bytes())
        data[-5] ^= 0x55
        victim.write_bytes(bytes(data))

        # --frozen against a changed pipeline: the same lines, whatever the agent answers.
        async with Emulators(
            ["openai"], profile=openai_profile("I am afraid we are fully booked."), seed=2,
            thread=True,
        ) as other:  # fmt: skip
            changed = _pipeline(tmp_path, other.servers["openai"].port, "changed.toml")
            frozen = tmp_path / "run2"
            chats_before = len(caller.truth.select("openai", "chat"))
            code = await _run("-p", str(changed), "--scenario", str(scenario), "-o", str(frozen),
                              "--caller-cache", str(cache), "--frozen", str(first))  # fmt: skip
            out = capsys.readouterr()
            assert code == 0, out.err
            # What the changed agent heard: byte for byte what the first one did.
            assert _uploads(other) == heard
        replayed = _lines(frozen)
        assert [ln["caller_text"] for ln in replayed] == [ln["caller_text"] for ln in lines]
        assert [ln["sha256"] for ln in replayed] == [ln["sha256"] for ln in lines]
        assert {ln["agent_text"] for ln in replayed} == {"I am afraid we are fully booked."}
        assert [ln["cached"] for ln in replayed] == [True, False, True, True]
        assert "rendering the line again" in out.err and "sha256" in out.err
        # No caller LLM was asked for a line (the judge asks once, after the call).
        assert len(caller.truth.select("openai", "chat")) - chats_before == 1
        (record,) = read_calls(frozen)
        assert record.extra["caller"]["end_reason"] == "frozen_end"
        assert record.extra["caller"]["frozen"] is True


@pytest.mark.e2e
async def test_two_runs_with_the_same_seed_and_cache_send_byte_identical_audio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    cache = tmp_path / "cache"
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as agent,
        Emulators(["openai"], profile=CALLER_PROFILE, seed=1, thread=True) as caller,
    ):
        pipeline = _pipeline(tmp_path, agent.servers["openai"].port)
        scenario = _scenario(tmp_path, caller.servers["openai"].port)
        runs = [tmp_path / "run1", tmp_path / "run2"]
        for run_dir in runs:
            code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o",
                              str(run_dir), "--caller-cache", str(cache))  # fmt: skip
            assert code == 0, capsys.readouterr().err
        capsys.readouterr()
        heard = _uploads(agent)
        # Each line written once: the rerun's caller LLM answered the same (temperature 0,
        # the seed), and its lines came from the cache.
        assert len(caller.truth.select("openai", "chat")) == 2 * 4 + 2  # lines + judges
    first, second = (_lines(r) for r in runs)
    assert [ln["cached"] for ln in second] == [True] * 4 and not any(ln["cached"] for ln in first)
    assert [ln["sha256"] for ln in first] == [ln["sha256"] for ln in second]
    assert heard[:4] == heard[4:]  # the agent heard the same bytes both times


async def test_the_turn_limit_holds_and_an_unreachable_caller_llm_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    never_done = {"openai": CALLER_PROFILE["openai"] | {"content": {"reply": "Hmm, and?"}}}
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as agent,
        Emulators(["openai"], profile=never_done, seed=1, thread=True) as caller,
    ):
        pipeline = _pipeline(tmp_path, agent.servers["openai"].port)
        scenario = _scenario(tmp_path, caller.servers["openai"].port, max_turns=3)
        out_dir = tmp_path / "limit"
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o", str(out_dir),
                          "--caller-cache", str(tmp_path / "c"))  # fmt: skip
        assert code == 0, capsys.readouterr().err
        (record,) = read_calls(out_dir)
        assert record.extra["caller"]["end_reason"] == "limit"
        assert [ln["call_turn"] for ln in _lines(out_dir)] == [1, 2, 3]
        # --frozen naming a folder that holds no recorded conversation: one line, exit 2.
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o",
                          str(tmp_path / "nofrozen"), "--frozen", str(tmp_path))  # fmt: skip
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and "has no conversation.jsonl" in err[-1]
        # The same scenario with its LLM on a port nobody listens on.
        dead = scenario.read_text().replace(
            f'127.0.0.1:{caller.servers["openai"].port}/v1"\nmodel', '127.0.0.1:9/v1"\nmodel', 1
        )
        scenario.write_text(dead)
        capsys.readouterr()
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o",
                          str(tmp_path / "dead"), "--caller-cache", str(tmp_path / "c"))  # fmt: skip
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 3
        assert "simulated caller's LLM" in err[-1] and "127.0.0.1:9" in err[-1]
        assert "Traceback" not in "\n".join(err)
    assert CALLS.is_dir()


async def test_hearing_both_ways_records_a_transcript_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hear = "both"``: the caller uses the reply's text and also transcribes its saved
    audio; the emulated TTS speaks a tone, so what the audio says is not the text: a finding."""
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    heard = {"openai": {"content": {"transcript": "Something else entirely."}}}
    profile = {"openai": CALLER_PROFILE["openai"] | {"content": CALLER_PROFILE["openai"]["content"] | heard["openai"]["content"]}}  # fmt: skip
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as agent,
        Emulators(["openai"], profile=profile, seed=1, thread=True) as caller,
    ):
        url = f"http://127.0.0.1:{caller.servers['openai'].port}/v1"
        stt = (
            f'hear = "both"\n[caller.stt]\nstage = "openai-stt"\nbase_url = "{url}"\n'
            'model = "gpt-4o-mini-transcribe"\napi_key_env = "VOICELAT_EMULATOR_KEY"\n'
        )
        scenario = _scenario(tmp_path, caller.servers["openai"].port, max_turns=2, extra=stt)
        pipeline = _pipeline(tmp_path, agent.servers["openai"].port)
        out_dir = tmp_path / "both"
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o", str(out_dir),
                          "--caller-cache", str(tmp_path / "c"))  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.err
    lines = _lines(out_dir)
    assert [ln["heard_by"] for ln in lines] == ["text+stt", "text+stt"]
    assert all(ln["agent_text"] == "Sure thing." for ln in lines)
    assert all("Something else entirely." in ln["mismatch"] for ln in lines)
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["caller"]["mismatches"] == 2
    assert "2 transcript mismatches" in out.out
    assert (out_dir / "audio").is_dir()  # the run saved the replies for the caller to hear


async def test_a_persona_that_yields_empty_lines_ends_its_call_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    mute = {"openai": CALLER_PROFILE["openai"] | {"content": {"reply": "(stays silent)"}}}
    async with (
        Emulators(["openai"], profile=openai_profile("Sure thing."), seed=1, thread=True) as agent,
        Emulators(["openai"], profile=mute, seed=1, thread=True) as caller,
    ):
        pipeline = _pipeline(tmp_path, agent.servers["openai"].port)
        scenario = _scenario(tmp_path, caller.servers["openai"].port)
        out_dir = tmp_path / "mute"
        code = await _run("-p", str(pipeline), "--scenario", str(scenario), "-o", str(out_dir),
                          "--caller-cache", str(tmp_path / "c"))  # fmt: skip
        out = capsys.readouterr()
    assert code == 0, out.err
    (record,) = read_calls(out_dir)
    part = record.extra["caller"]
    assert part["end_reason"] == "error" and "empty line" in part["reason"]
    assert part["lines"] == [] and record.greeting_ns is not None  # the greeting is kept
    assert "the simulated caller stopped" in out.err and "empty line" in out.err
    assert "ended by error 1" in out.out
