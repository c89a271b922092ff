"""The simulated caller's pure parts and its files: the [caller] table, the prompt, cleaning a
line, the end condition, the cache key, the clip's shape and bounds, and the clip cache."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from voicelat.audio.clip import CLIP_RATE, shape_clip
from voicelat.audio.onset import first_audible_sample
from voicelat.audio.wav import PCM
from voicelat.core.base.errors import ConfigError
from voicelat.core.calls.caller import (
    CallerSpec,
    Exchange,
    cache_key,
    caller_section,
    chat_messages,
    clean_line,
    completion_prompt,
    end_reason,
    judge_verdict,
    said_goodbye,
)
from voicelat.engine.caller_cache import ClipCache, CorruptEntry
from voicelat.files.scenario import load_scenario

SPEC = CallerSpec(persona="You are Sam.", goal="A table for four.", max_turns=3)


def _write(tmp_path: Path, body: str, name: str = "sim.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


# -- parsing -------------------------------------------------------------------------------------
def test_a_caller_table_makes_a_scenario_with_no_say_step(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[[step]]\nexpect_greeting = true\n[caller]\npersona = "You are Sam."\n'
        'goal = "Book."\nmax_turns = 4\nseed = 9\nhear = "stt"\n'
        '[caller.llm]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
        '[caller.voice]\nstage = "espeak-tts"\nvoice = "en-us+f2"\n',
    )
    scenario = load_scenario(path).scenario
    assert scenario.says == () and scenario.greets
    assert scenario.caller is not None
    c = scenario.caller
    assert (c.persona, c.goal, c.max_turns, c.seed, c.hear) == (
        "You are Sam.",
        "Book.",
        4,
        9,
        "stt",
    )
    assert c.llm["model"] == "m" and c.voice["voice"] == "en-us+f2"
    assert scenario.max_turns == 4  # turn indexes set aside: the hard limit


def test_a_caller_file_named_by_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "callers").mkdir()
    _write(tmp_path, '[caller]\npersona = "P"\nmax_turns = 2\n', "callers/p.toml")
    path = _write(tmp_path, 'caller = "callers/p.toml"\n')
    caller = load_scenario(path).scenario.caller
    assert caller is not None and caller.persona == "P" and caller.max_turns == 2
    assert caller.source.endswith("p.toml")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('[caller]\ngoal = "x"\n', "needs persona"),
        ('[caller]\npersona = "P"\nmax_turns = 0\n', "max_turns must be a whole number from 1"),
        ('[caller]\npersona = "P"\nmax_turns = 1000\n', "from 1 to 100"),
        ('[caller]\npersona = "P"\nhear = "ears"\n', "hear must be"),
        ('[caller]\npersona = "P"\nvoices = 1\n', "unknown key 'voices'"),
        ('[caller]\npersona = "P"\n[caller.llm]\nstage = "other"\n', "`openai`"),
        ('caller = "missing.toml"\n', "does not exist"),
        ("caller = 3\n", "caller is a [caller] table"),
        ('[caller]\npersona = "P"\ngoal_token = " "\n', "goal_token must not be empty"),
    ],
)
def test_a_bad_caller_is_one_line(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_scenario(_write(tmp_path, body))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_scenario_without_caller_still_needs_a_say_step(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no `say` step"):
        load_scenario(_write(tmp_path, "[[step]]\nexpect_greeting = true\n"))


# -- the prompt ----------------------------------------------------------------------------------
def test_the_prompt_sees_the_call_from_the_callers_side() -> None:
    exchanges = [Exchange("I'd like a table.", "For how many?"), Exchange("Four.", None)]
    messages = chat_messages(SPEC, "Hello, how can I help?", exchanges)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert (
        "You are Sam." in messages[0]["content"] and "A table for four." in messages[0]["content"]
    )
    assert "[DONE]" in messages[0]["content"]
    assert (
        messages[2]["content"] == "I'd like a table." and messages[3]["content"] == "For how many?"
    )
    assert messages[-1]["content"].startswith("(silence")  # a turn that got no answer
    # The caller speaks first when the agent did not greet.
    assert chat_messages(SPEC, None, [])[-1]["content"].startswith("(The call connects")
    prompt = completion_prompt(SPEC, "Hi.", exchanges[:1])
    assert prompt.endswith("Agent: Hi.\nCaller: I'd like a table.\nAgent: For how many?\nCaller:")


@pytest.mark.parametrize(
    ("raw", "line", "goal"),
    [
        ("Caller: Hi, a table please.\nAgent: sure", "Hi, a table please.", False),
        ('  "Four of us." [DONE]', "Four of us.", True),
        ("*smiles* Thanks, goodbye! [done]", "Thanks, goodbye!", True),
        ("[DONE]", "", True),
        ("\n\n  (pauses)  \n", "", False),
        ("word " * 100, ("word " * 60).strip(), False),
    ],
)
def test_clean_line(raw: str, line: str, goal: bool) -> None:
    got, reached = clean_line(raw, "[DONE]")
    assert (got, reached) == (line, goal)
    assert len(got) <= 300


def test_end_conditions() -> None:
    assert end_reason(SPEC, 0, None, False) is None
    assert end_reason(SPEC, 1, "Table booked. Goodbye!", False) == "goodbye"
    assert end_reason(SPEC, 1, "Bye-bye now", False) == "goodbye"
    assert end_reason(SPEC, 1, "Maybe by eight?", False) is None  # "by" is no goodbye
    assert end_reason(SPEC, 1, "anything", True) == "goal"
    assert end_reason(SPEC, 3, "For how many?", False) == "limit"  # the hard limit
    no_bye = CallerSpec(persona="P", max_turns=3, end_on_goodbye=False)
    assert end_reason(no_bye, 1, "Goodbye", False) is None
    assert not said_goodbye(None) and said_goodbye("good-bye")
    assert judge_verdict("YES. The table was booked.") is True
    assert judge_verdict("no, it was not") is False and judge_verdict("Maybe") is None


def test_the_cache_key_is_the_voice_and_the_text() -> None:
    voice = {"stage": "openai-tts", "voice": "echo", "base_url": "http://a/v1", "timeout_s": 5}
    key = cache_key(voice, "Hello.")
    # Where the voice is served, its key's name and timeouts do not change the audio.
    assert cache_key(voice | {"base_url": "http://b/v1", "timeout_s": 9}, "Hello.") == key
    assert cache_key(voice | {"voice": "alloy"}, "Hello.") != key
    assert cache_key(voice, "Hello!") != key
    assert len(key) == 64


def test_the_summary_section_counts_end_reasons_and_preparation() -> None:
    parts = [
        {"call_id": "c1", "end_reason": "goal", "lines": [{"prep_ns": 5, "cached": True}]},
        {"call_id": "c2", "end_reason": "limit", "lines": [{"prep_ns": 7}, {"prep_ns": 9}],
         "judge": {"goal_reached": False}},
    ]  # fmt: skip
    section = caller_section(parts)
    assert section is not None
    assert section["end_reasons"] == {"goal": 1, "limit": 1}
    assert section["lines"] == 3 and section["cached"] == 1 and section["prep"]["n"] == 3
    assert section["judge"] == {"yes": 0, "no": 1, "unclear": 0}
    assert caller_section([]) is None


# -- the clip -------------------------------------------------------------------------------------
def _tone(rate: int, lead_ms: int, ms: int, tail_ms: int) -> PCM:
    t = np.arange(rate * ms // 1000) / rate
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    x = np.concatenate([np.zeros(rate * lead_ms // 1000), tone, np.zeros(rate * tail_ms // 1000)])
    return PCM((x * 32767).astype("<i2").tobytes(), rate)


def test_a_render_is_trimmed_padded_and_measured() -> None:
    clip = shape_clip(_tone(22050, 137, 800, 59), lead_ms=400, trail_ms=1000)
    assert clip is not None and clip.pcm.rate == CLIP_RATE
    # The TTS's own silence is gone: the speech starts at the lead and lasts as long as it did.
    assert abs(clip.speech_start_ms - 400) <= 2
    assert abs((clip.speech_end_ms - clip.speech_start_ms) - 800) <= 3
    duration_ms = clip.pcm.n_samples * 1000 // CLIP_RATE
    assert duration_ms - clip.speech_end_ms >= 999
    # The bounds are the onset rule's on the clip itself (what the engine would find).
    first = first_audible_sample(clip.pcm)
    assert first is not None and first * 1000 // CLIP_RATE == clip.speech_start_ms
    # Deterministic: the same render gives the same bytes.
    again = shape_clip(_tone(22050, 137, 800, 59), lead_ms=400, trail_ms=1000)
    assert again is not None and again.pcm.samples == clip.pcm.samples


def test_an_all_silent_render_is_no_clip() -> None:
    assert shape_clip(PCM(bytes(44100), 22050)) is None


def test_the_cache_stores_atomically_and_refuses_a_corrupt_entry(tmp_path: Path) -> None:
    cache = ClipCache(tmp_path / "cache")
    clip = shape_clip(_tone(16000, 0, 500, 0))
    assert clip is not None
    key = cache_key({"stage": "x"}, "Hi.")
    assert cache.load(key) is None
    stored = cache.store(key, clip, "Hi.", {"stage": "x"})
    assert [p.name for p in stored.path.parent.iterdir() if p.name.startswith(".")] == []
    loaded = cache.load(key)
    assert loaded == stored
    assert hashlib.sha256(loaded.path.read_bytes()).hexdigest() == loaded.sha256
    # A flipped byte in the audio: the entry is corrupt, named, never used.
    data = bytearray(stored.path.read_bytes())
    data[-3] ^= 0xFF
    stored.path.write_bytes(bytes(data))
    with pytest.raises(CorruptEntry, match="do not match the recorded sha256"):
        cache.load(key)
    stored.path.with_suffix(".json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CorruptEntry, match="unreadable entry"):
        cache.load(key)
    # Stored again, it is whole again.
    cache.store(key, clip, "Hi.", {"stage": "x"})
    assert cache.load(key) is not None
