"""Whole calls on the emulated cascade (real HTTP servers on loopback, real fixture audio):
one call per scenario run, the greeting timed from the call's connection to the ear, every
turn carrying its call and index, and the LLM seeing the conversation so far."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.calls.calls_helpers import CALLS, MS, openai_profile
from tests.helpers import emulated_openai_pipeline
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.calls.call import CALL_ID, CALL_TURN
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.emulate import Emulators
from voicelat.engine.call import plan_calls
from voicelat.engine.runner import Runner
from voicelat.files.results import read_calls
from voicelat.files.scenario import load_scenario
from voicelat.report.text import call_lines

LEADING_SILENCE_MS = 30
PROFILE = openai_profile("Sure thing.", float(LEADING_SILENCE_MS))


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "greet2.toml"
    path.write_text(
        f'name = "greet2"\nfixtures = "{CALLS}"\ngreeting = "Hello, how can I help?"\n'
        "[[step]]\nexpect_greeting = true\n"
        '[[step]]\nsay = "short_01_weather"\ngap_ms = 300\n'
        '[[step]]\nsay = "short_02_tomorrow"\ngap_ms = 400\n',
        encoding="utf-8",
    )
    return path


async def test_two_calls_with_a_greeting_keep_their_context_and_are_timed_at_the_ear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "any-non-empty-key")
    loaded = load_scenario(_scenario(tmp_path))
    calls = plan_calls([loaded.scenario], repeat=2)
    plan = [
        PlannedTurn(c.first_index + i, f, 0, False)
        for c in calls
        for i, f in enumerate(c.scenario.fixture_ids())
    ]
    async with Emulators(["openai"], profile=PROFILE, seed=1, thread=True) as em:
        runner = Runner(
            emulated_openai_pipeline(em),
            list(loaded.fixtures.values()),
            tmp_path / "run",
            calls=calls,
        )
        outcome = await runner.run(plan)
        chats = em.truth.select("openai", "chat")
        speeches = em.truth.select("openai", "speech")
    turns = sorted(outcome.turns, key=lambda t: t.index)
    assert [(t.extra[CALL_ID], t.extra[CALL_TURN]) for t in turns] == [
        ("call-0001-greet2", 1), ("call-0001-greet2", 2),
        ("call-0002-greet2", 1), ("call-0002-greet2", 2),
    ]  # fmt: skip
    assert all(t.ok for t in turns), [t.failure_reason for t in turns]
    # The LLM sees the conversation: greeting + user (2 messages), then + reply + user (4);
    # the second call starts afresh.
    assert [c.detail["messages"] for c in chats] == [2, 4, 2, 4]
    # The greeting: call connected -> its first audible sample at the sink, which is the TTS
    # emulator's first audio byte plus the leading silence it put before the tone.
    records = read_calls(tmp_path / "run")
    assert [r.call_id for r in records] == ["call-0001-greet2", "call-0002-greet2"]
    greetings = [s for s in speeches if s.marks.get("first_audio_written")][::3]
    for record, speech in zip(records, greetings, strict=True):
        assert record.greeting_ns is not None and record.turns_completed == 2
        truth = speech.marks["first_audio_written"] + LEADING_SILENCE_MS * MS
        assert record.greeting_first_audible_ns is not None
        assert abs(record.greeting_first_audible_ns - truth) < 3 * MS
        assert record.dead_air_max_ns is not None and record.dead_air_max_ns >= record.greeting_ns
    # The human gap: the second turn starts its gap after the first reply has played.
    second = turns[1]
    first_reply_end = turns[0].t0_ns + turns[0].milestones["output_first_audible"]
    assert second.t0_ns - first_reply_end >= 400 * MS
    summary = RunSummary.coerce(outcome.summary)
    assert summary.calls is not None and summary.calls.n == 2
    assert summary.calls.greeting.n == 2 and summary.calls.greeting_missing == 0
    assert {k: d.n for k, d in summary.calls.e2e_by_index.items()} == {"1": 2, "2": 2}
    text = "\n".join(call_lines(summary))
    assert "calls: 2 run, 2 completed" in text and "greeting P50" in text
    # The call timeline in report.html: the caller's turns, the greeting and each reply at
    # the ear, each wait equal to its turn's e2e.
    import xml.etree.ElementTree as ET

    from voicelat.cli.view import run_page
    from voicelat.files.results import load_run

    page = run_page(load_run(tmp_path / "run"))
    svgs = [s for s in page.split("<svg ")[1:] if 'class="call-timeline"' in s]
    assert len(svgs) == 2
    svg = ET.fromstring("<svg " + svgs[0].split("</svg>")[0] + "</svg>")
    ns = "{http://www.w3.org/2000/svg}"
    users = [r for r in svg.iter(f"{ns}rect") if r.get("class") == "user"]
    agents = [r for r in svg.iter(f"{ns}rect") if r.get("class") == "agent"]
    waits = {int(w.get("data-turn", 0)): int(w.get("data-ns", 0)) for w in svg.iter(f"{ns}line")
             if w.get("class") == "wait"}  # fmt: skip
    assert [u.get("data-turn") for u in users] == ["1", "2"]
    assert [a.get("data-turn") for a in agents] == ["0", "1", "2"]
    assert waits == {1: turns[0].e2e_ns, 2: turns[1].e2e_ns}
    assert int(agents[0].get("data-start-ns", 0)) == records[0].greeting_ns
    # A run of calls is results schema 2: its summary and turns validate against the schemas.
    import json

    from voicelat.export.validate import SUMMARY_SCHEMA, TURN_SCHEMA, schema_errors

    run_dir = tmp_path / "run"
    doc = json.loads((run_dir / "summary.json").read_text())
    assert doc["schema_version"] == 2 and schema_errors(doc, SUMMARY_SCHEMA) == []
    for line in (run_dir / "turns.jsonl").read_text().splitlines():
        assert schema_errors(json.loads(line), TURN_SCHEMA) == []
