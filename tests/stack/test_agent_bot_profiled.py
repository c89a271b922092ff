"""Issue #13's acceptance test: the real example Pipecat bot profiled by `voicelat run` itself.

One bot for the module (Whisper tiny.en, gemma on the stack's llama.cpp server, piper joe,
Silero VAD; started through :class:`PipecatBot`, the stack first, on this module's ports), its
OTLP exporter pointed at the port where each `voicelat run` opens its own trace receiver
(``[agent] trace_port``). The shipped pipelines (pipelines/agent-{twilio,pipecat-ws,webrtc}.toml,
only the bot's port and the trace port changed) each play two short bundled fixtures to it.

Every turn must have e2e and the black-box figures; with the bot's traces its segments are the
traced split, which sums exactly to e2e with nothing negative or clamped, and Pipecat's own
TTFBs sit beside voicelat's figures, agreeing with what the split derived from the same spans.
The same runs then show in the text report (`voicelat view`, piped) and in the TUI's turn
detail, and `voicelat compare` ranks the three transports. A simulated caller (the
stack's own gemma and espeak-ng) holds a four-turn call with the bot. Two calls at once
(`--concurrency 2`, each split by its own call's trace) are `slow`.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack.test_agent_bot import _free_ports
from tests.tui.helpers import text_of
from voicelat.cli.main import main
from voicelat.core.base.contract import AGENT_TRACED_SEGMENTS
from voicelat.core.base.errors import EXIT_OK
from voicelat.core.base.turn import Turn
from voicelat.files.results import load_run
from voicelat.stack.agent import AgentConfig, PipecatBot
from voicelat.stack.config import StackConfig
from voicelat.tui.model import RunModel
from voicelat.tui.render import turn_detail

pytestmark = [pytest.mark.stack, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = ("twilio", "pipecat-ws", "webrtc")
#: The two shortest bundled fixtures (3.2 and 3.3 s of audio, speech ending at 1.7-1.8 s).
FIXTURES = ("kitchen_lights", "rain_tomorrow")
MS = 1_000_000
#: The bot's --vad-stop-secs default (examples/pipecat-bot/bot.py), stated on its spans.
VAD_STOP_MS = 200
#: Pipecat's TTFBs are floats in seconds on the spans; voicelat's split places them as integer
#: ns, so the same duration may differ by a rounding: well under this.
ROUNDING_NS = MS
#: Pipecat's LLM TTFB runs from its request to the first token; voicelat's llm_ttft from the
#: transcript (the stt span's end) to that token, so it also holds the user aggregator's wait
#: before it sends the request: the speech-timeout turn stop (the bot's --speech-timeout, 0.6 s,
#: counted from the VAD stop, which is before the transcript) and the pipeline's frame hops.
LLM_GAP_BOUND_NS = 1500 * MS


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PipecatBot, int]]:
    """The bot, exporting to the trace port the runs below open; yields it and that port."""
    stt, tts, llm, port, traces = _free_ports(10500, 10501, 8190, 9500, 9501)
    stack = StackConfig(
        stt_port=stt,
        tts_port=tts,
        llm_port=llm,
        state_dir=tmp_path_factory.mktemp("agent-profiled"),
        llm_extra_args=("--interrupt_requests", "false"),  # see test_agent_bot's manager
    )
    otlp = f"http://127.0.0.1:{traces}/v1/traces"
    with PipecatBot(AgentConfig(stack=stack, port=port, otlp_endpoint=otlp)) as manager:
        assert manager.up().healthy
        yield manager, traces


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fixtures directory holding only :data:`FIXTURES` (the bundled WAVs and annotations)."""
    src = ROOT / "fixtures"
    out = tmp_path_factory.mktemp("fixtures")
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] in FIXTURES]
    for entry in manifest["fixtures"]:
        shutil.copy(src / entry["file"], out / entry["file"])
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _pipeline(transport: str, port: int, trace_port: int, out: Path) -> Path:
    """The shipped pipeline for ``transport`` pointed at this bot and this trace port."""
    text = (ROOT / "pipelines" / f"agent-{transport}.toml").read_text()
    assert "127.0.0.1:7860" in text and '\ntraces = "pipecat"\n' in text
    text = text.replace("127.0.0.1:7860", f"127.0.0.1:{port}")
    text = text.replace(
        '\ntraces = "pipecat"\n', f'\ntraces = "pipecat"\ntrace_port = {trace_port}\n'
    )
    path = out / f"agent-{transport}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def runs(
    bot: tuple[PipecatBot, int], fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """`voicelat run` of each transport's pipeline on the two fixtures: its results directory."""
    manager, trace_port = bot
    port = manager.config.port
    base = tmp_path_factory.mktemp("runs")
    out: dict[str, Path] = {}
    for transport in TRANSPORTS:
        pipeline = _pipeline(transport, port, trace_port, base)
        run_dir = base / transport
        argv = ["run", "-p", str(pipeline), "-f", str(fixtures_dir), "-w", "0", "-o", str(run_dir)]
        assert main([*argv, "-q"]) == EXIT_OK, transport
        out[transport] = run_dir
    return out


def _turns(run_dir: Path) -> list[Turn]:
    turns = list(load_run(run_dir).turns)
    assert sorted(t.fixture for t in turns) == sorted(FIXTURES), [t.fixture for t in turns]
    return turns


def _why(turn: Turn) -> str:
    return f"{turn.fixture}: {turn.failure_reason} {turn.flags} {turn.segments} {turn.figures}"


def _assert_black_box(turn: Turn) -> None:
    """e2e, the measured black-box total and the two segments every agent turn has."""
    assert turn.ok and turn.e2e_ns is not None and turn.e2e_ns > 0, _why(turn)
    assert turn.extra["kind"] == "agent"
    m = turn.milestones
    assert turn.figures["agent_response_ns"] == m["first_audio"] - m["speech_end"] > 0
    assert turn.segments["leading_silence"] == m["first_audible"] - m["first_audio"] >= 0
    assert turn.segments["playout"] == m["output_first_audible"] - m["first_audible"] >= 0
    assert turn.e2e_ns == m["output_first_audible"] - m["speech_end"]


def _assert_traced(turn: Turn) -> None:
    """The traced split: every segment, exact sums, nothing negative, nothing moved."""
    assert "untraced" not in turn.flags, _why(turn)
    bad = [f for f in turn.flags if f.startswith(("trace_", "untraced"))]
    assert not bad, _why(turn)  # no clamp, no partial chain, no second turn in the window
    assert tuple(turn.segments) == AGENT_TRACED_SEGMENTS, _why(turn)
    assert all(v >= 0 for v in turn.segments.values()), _why(turn)
    assert sum(turn.segments.values()) == turn.e2e_ns
    agent_side = AGENT_TRACED_SEGMENTS[: AGENT_TRACED_SEGMENTS.index("transport") + 1]
    assert sum(turn.segments[s] for s in agent_side) == turn.figures["agent_response_ns"]
    # The bot's first TTS byte left before voicelat received it: transport is real time.
    assert turn.segments["transport"] > 0, _why(turn)


def _assert_reported(turn: Turn) -> None:
    """Pipecat's own TTFBs beside voicelat's figures, consistent with what each measures."""
    f, seg = turn.figures, turn.segments
    reported = {k: f[f"agent_reported_{k}_ttfb_ms"] for k in ("stt", "llm", "tts")}
    assert all(isinstance(v, float) and v > 0 for v in reported.values()), _why(turn)
    # Same span, same start: voicelat's tts_ttfb is Pipecat's TTS TTFB placed on our clock.
    assert abs(seg["tts_ttfb"] - reported["tts"] * MS) <= ROUNDING_NS, _why(turn)
    # Pipecat's STT TTFB runs from its end of speech (the VAD's stop time - stop_secs) to the
    # transcript; the bot states its stop_secs, so voicelat's agent_endpoint is the VAD's
    # decision and its stt segment is Pipecat's TTFB less the VAD's hangover.
    assert abs(seg["stt"] - (reported["stt"] - VAD_STOP_MS) * MS) <= ROUNDING_NS, _why(turn)
    assert seg["endpointing"] >= (VAD_STOP_MS - 50) * MS, _why(turn)  # the hangover is in it
    # The LLM's: voicelat's llm_ttft holds Pipecat's (request -> first token) and the wait
    # before the request (LLM_GAP_BOUND_NS says what).
    gap = seg["llm_ttft"] - reported["llm"] * MS
    assert -ROUNDING_NS <= gap <= LLM_GAP_BOUND_NS, (gap / MS, _why(turn))


@pytest.mark.e2e
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_turn_is_profiled_and_split_by_the_bots_own_traces(
    runs: dict[str, Path], transport: str
) -> None:
    turns = _turns(runs[transport])
    for turn in turns:
        _assert_black_box(turn)
        _assert_traced(turn)
        _assert_reported(turn)
    print(f"\n{transport}: " + "; ".join(
        f"{t.fixture} e2e {t.e2e_ns / MS:.0f} ms = "
        + " + ".join(f"{k} {v / MS:.0f}" for k, v in t.segments.items())
        for t in turns
    ))  # fmt: skip


def test_text_report_and_tui_show_the_split_and_the_transport_remainder(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = runs["twilio"]
    capsys.readouterr()
    assert main(["view", str(run_dir)]) == EXIT_OK  # piped: the text report
    report = capsys.readouterr().out
    rows = {line.split()[0] for line in report.splitlines() if line.strip()}
    assert {"endpointing", "stt", "llm_ttft", "tts_ttfb", "transport", "e2e"} <= rows, report
    model = RunModel.from_loaded(load_run(run_dir))
    detail = text_of(turn_detail(model.turns[0], {}, 50), width=140)
    assert "transport" in detail and "response (measured, black box)" in detail, detail
    assert "agent-reported TTFB stt" in detail, detail


def test_compare_ranks_the_three_transports(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    assert main(["compare", *(str(runs[t]) for t in TRANSPORTS), "-o", str(out)]) == EXIT_OK
    doc = json.loads((out / "comparison.json").read_text())
    ranked = {c["name"]: c for c in doc["combinations"]}
    assert sorted(c["rank"] for c in ranked.values()) == [1, 2, 3], ranked.keys()
    for combo in ranked.values():
        assert {"transport", "llm_ttft", "endpointing"} <= set(combo["segments"])


def test_a_simulated_caller_holds_a_four_turn_call_with_the_bot(
    bot: tuple[PipecatBot, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #24's Done-when on the real bot: scenarios/callers/booker-local.toml's caller
    (its lines by the bot's own stack's gemma, spoken by espeak-ng) talks to the bot over
    pipecat-ws for four turns on one connection, hearing each reply by transcribing the reply
    audio with the stack's Whisper (the bot's turns carry no text). Every caller turn has the
    render's bounds as its marks and the traced waterfall summing to e2e."""
    manager, trace_port = bot
    stack = manager.config.stack
    for name, port in (("STT", stack.stt_port), ("TTS", stack.tts_port), ("LLM", stack.llm_port)):
        monkeypatch.setenv(f"VOICELAT_{name}_PORT", str(port))  # the caller's stack defaults
    # This bot does not greet (the module's runs time first turns): the call opens with the
    # caller's first line instead of the scenario's expected greeting.
    text = (ROOT / "scenarios" / "callers" / "booker-local.toml").read_text()
    assert "[[step]]\nexpect_greeting = true\n" in text
    scenario = tmp_path / "booker.toml"
    scenario.write_text(text.replace("[[step]]\nexpect_greeting = true\n", ""))
    pipeline = _pipeline("pipecat-ws", manager.config.port, trace_port, tmp_path)
    run_dir = tmp_path / "caller"
    argv = ["run", "-p", str(pipeline), "--scenario", str(scenario), "-o", str(run_dir), "-q"]
    assert main([*argv, "--caller-cache", str(tmp_path / "cache")]) == EXIT_OK
    turns = sorted(load_run(run_dir).turns, key=lambda t: t.index)
    lines = [json.loads(ln) for ln in (run_dir / "conversation.jsonl").read_text().splitlines()]
    assert [t.extra["call_turn"] for t in turns] == [1, 2, 3, 4]
    assert len({t.extra["call_id"] for t in turns}) == 1  # one call, one connection
    for turn, line in zip(turns, lines, strict=True):
        _assert_black_box(turn)
        lead = int(turn.extra.get("lead_silence_ms", 0)) // 20 * 20
        assert turn.milestones["speech_start"] == (line["speech_start_ms"] + lead) * MS
        assert turn.milestones["speech_end"] == (line["speech_end_ms"] + lead) * MS
        assert tuple(turn.segments) == AGENT_TRACED_SEGMENTS, _why(turn)
        assert all(v >= 0 for v in turn.segments.values()), _why(turn)
        assert sum(turn.segments.values()) == turn.e2e_ns == line["e2e_ns"]
        # It heard the bot: the saved reply audio through the stack's Whisper, some words.
        assert line["heard_by"] == "stt" and (line["agent_text"] or "").strip(), line
        assert line["prep_ns"] > 0 and line["llm_ns"] > 0
    said = [ln["caller_text"] for ln in lines]
    assert all(a != b for a, b in itertools.pairwise(said)), said  # the call moves on
    print("\n" + "\n".join(
        f"{ln['call_turn']}. caller {ln['caller_text']!r} / bot {ln['agent_text']!r}: "
        f"e2e {ln['e2e_ns'] / MS:.0f} ms, prep {ln['prep_ns'] / MS:.0f} ms"
        for ln in lines
    ))  # fmt: skip


@pytest.mark.slow
def test_two_calls_at_once_each_get_their_own_trace(
    bot: tuple[PipecatBot, int], fixtures_dir: Path, tmp_path: Path
) -> None:
    """`--concurrency 2`: two calls overlap in time, so the turn's window holds both calls'
    spans; the engine asks the receiver for the stage's own call (the Twilio call SID the bot
    names its conversation by), so each turn is split by its own trace, not flagged
    trace_multiple_turns or split by the other call's."""
    manager, trace_port = bot
    pipeline = _pipeline("twilio", manager.config.port, trace_port, tmp_path)
    run_dir = tmp_path / "concurrent"
    argv = ["run", "-p", str(pipeline), "-f", str(fixtures_dir), "-w", "0", "-c", "2"]
    assert main([*argv, "-o", str(run_dir), "-q"]) == EXIT_OK
    turns = _turns(run_dir)
    for turn in turns:
        _assert_black_box(turn)
        _assert_traced(turn)
        _assert_reported(turn)
    first, second = sorted(turns, key=lambda t: t.t0_ns)
    # The two calls really overlapped: the second began before the first's reply was over.
    assert second.t0_ns < first.t0_ns + first.milestones["response_done"]
