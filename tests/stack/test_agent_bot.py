"""The example Pipecat bot for real: started by the manager, one real turn, spans on loopback.

The bot (Whisper tiny.en, gemma on the stack's llama.cpp server, piper joe, Silero VAD) is
started through :class:`PipecatBot` (the stack first, on test ports), exporting its spans to
voicelat's own OTLP/HTTP receiver on loopback (:class:`TraceReceiver`, which places them on
voicelat's clock). A minimal Twilio Media Streams caller (``examples/pipecat-bot/call.py``)
plays a bundled fixture in real time then silence; the bot must answer with mu-law audio
within a bound, the call's spans (conversation > turn > stt, llm, tts) must arrive with
Pipecat's own TTFBs on them, and the "pipecat" mapping must split them into the four agent
milestones in causal order, before the reply reached the caller (one host, one clock). The
other two transports, two calls at once and the CLI's detached `up` are `slow`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from voicelat.cli.main import main
from voicelat.core.base.errors import EXIT_INFRA, EXIT_OK
from voicelat.core.traces.agent_trace import (
    SPLIT_MILESTONES,
    AgentSpan,
    TraceSplit,
    split_from_spans,
)
from voicelat.engine.trace_receiver import TraceReceiver
from voicelat.stack.agent import AgentConfig, AgentStatus, PipecatBot
from voicelat.stack.config import StackConfig, StackError

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]
BOT_DIR = ROOT / "examples" / "pipecat-bot"
FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
# speech_end of weather_paris is at 2150 ms of its 3450 ms: the WAV's last 1.3 s are silence,
# so "after the WAV ended" is ~1.3 s after the real end of speech. Measured on the 2-core
# machine: 0.4-1.8 s after the WAV when idle, 7-13 s at a load average of 10 (the LLM and
# Whisper share two cores with everything else); the bound leaves room for a loaded runner.
REPLY_BOUND_S = 20.0
LISTEN_S = 24.0
SPAN_WAIT_S = 10.0


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"pipecat_bot_{name}", BOT_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _free_ports(*wanted: int) -> list[int]:
    """Each wanted port, or the next free one not already picked."""
    picked: list[int] = []
    for want in wanted:
        for port in range(want, want + 40):
            if port in picked:
                continue
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            picked.append(port)
            break
        else:
            raise RuntimeError(f"no free port near {want}")
    return picked


@pytest.fixture(scope="module")
def receiver() -> Iterator[TraceReceiver]:
    with TraceReceiver(port=0, mapping="pipecat") as r:
        yield r


@pytest.fixture(scope="module")
def manager(
    receiver: TraceReceiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PipecatBot]:
    """The bot, started through the manager (the stack first), stopped at the end."""
    stt, tts, llm, port = _free_ports(10400, 10401, 8180, 9170)
    stack = StackConfig(
        stt_port=stt,
        tts_port=tts,
        llm_port=llm,
        state_dir=tmp_path_factory.mktemp("agent"),
        # llama_cpp.server ends a streaming completion with [DONE] as soon as another request
        # arrives (interrupt_requests defaults to true): with two calls at once one reply was
        # cut to nothing and never spoken. Off, the second request waits for the first.
        llm_extra_args=("--interrupt_requests", "false"),
    )
    cfg = AgentConfig(stack=stack, port=port, otlp_endpoint=receiver.url)
    with PipecatBot(cfg) as bot_manager:
        status = bot_manager.up()
        assert status.healthy and status.startup_s is not None and not status.reused
        assert status.stack_started == ("stt", "tts", "llm")
        yield bot_manager
    assert not bot_manager.status().running  # the context manager stopped the bot


@pytest.fixture(scope="module")
def bot(manager: PipecatBot) -> AgentStatus:
    return manager.status()


def test_a_second_up_reuses_the_bot_and_other_settings_are_refused(
    manager: PipecatBot, bot: AgentStatus
) -> None:
    # Another instance on the same state directory: it sees the bot and reuses it.
    again = PipecatBot(replace(manager.config, start_stack=False))
    assert again.status().state == "ready"
    reused = again.up()
    assert reused.reused and reused.pid == bot.pid
    with pytest.raises(StackError, match="already running with other settings"):
        PipecatBot(replace(manager.config, otlp_endpoint=None)).up()


def _rss_mb(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


# call.py stamps with time.monotonic(), voicelat with perf_counter (both CLOCK_MONOTONIC on
# Linux; the difference is measured anyway).
_MONO_TO_VOICELAT_NS = time.perf_counter_ns() - time.monotonic_ns()


def _ns(t_monotonic_s: float) -> int:
    return int(t_monotonic_s * 1e9) + _MONO_TO_VOICELAT_NS


async def _call_spans(
    receiver: TraceReceiver, window: tuple[int, int], conversation: str
) -> list[AgentSpan]:
    """The spans of the call's trace, as voicelat's engine asks for them."""
    spans = await receiver.spans_for(window, wait_s=SPAN_WAIT_S, conversation=conversation)
    convs = [s for s in spans if s.name == "conversation"]
    assert convs, f"no conversation span for {conversation}: {sorted({s.name for s in spans})}"
    return [s for s in spans if s.trace_id == convs[0].trace_id]


def _assert_pipecat_turn_spans(spans: list[AgentSpan], transport: str) -> None:
    # The first span of each name: a reply of two sentences has two tts spans, and the call
    # may hang up during the second one (then it ends without a TTFB).
    by_name: dict[str, AgentSpan] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        by_name.setdefault(span.name, span)
    assert {"conversation", "turn", "stt", "llm", "tts"} <= set(by_name), sorted(by_name)
    conv, turn = by_name["conversation"], by_name["turn"]
    assert conv.attributes["transport"] == transport
    assert turn.parent_id == conv.span_id
    assert turn.attributes["turn.number"] == 1
    for name in ("stt", "llm", "tts"):
        span = by_name[name]
        assert span.parent_id == turn.span_id, name
        # Pipecat's own TTFB (seconds), there because the bot enables metrics.
        ttfb = span.attributes["metrics.ttfb"]
        assert isinstance(ttfb, float) and 0 < ttfb < 30, (name, dict(span.attributes))
    assert str(by_name["stt"].attributes["transcript"]).strip()
    assert by_name["stt"].attributes["gen_ai.provider.name"] == "whisper"
    assert by_name["llm"].attributes["gen_ai.operation.name"] == "chat"
    assert by_name["tts"].attributes["voice_id"] == "en_US-joe-medium"
    # Causal order: transcript, then the request to the LLM, then speech.
    assert by_name["stt"].end_ns <= by_name["llm"].start_ns + 5_000_000
    assert by_name["llm"].start_ns <= by_name["tts"].start_ns


def _assert_split(
    spans: list[AgentSpan], window: tuple[int, int], t_first_reply_ns: int, slack_ns: int
) -> TraceSplit:
    """The "pipecat" mapping finds all four milestones, in order, before the caller heard it."""
    split = split_from_spans(spans, window, "pipecat")
    assert split is not None
    assert set(split.milestones) == set(SPLIT_MILESTONES), split
    times = [split.milestones[m] for m in SPLIT_MILESTONES]
    assert times == sorted(times), split.milestones
    assert window[0] <= times[0]
    # The bot's first TTS byte is produced before the caller receives it (same host: the
    # only slack is the clock pairing's uncertainty).
    assert times[-1] <= t_first_reply_ns + slack_ns, (times[-1] - t_first_reply_ns) / 1e6
    for figure in ("stt", "llm", "tts"):
        assert split.reported[f"agent_reported_{figure}_ttfb_ms"] > 0, split.reported
    return split


async def test_one_twilio_turn_gets_mulaw_audio_back_and_pipecat_spans(
    bot: AgentStatus, receiver: TraceReceiver
) -> None:
    call = _load("call")
    t0 = time.monotonic()
    result = await call.twilio_call(bot.urls["twilio"], str(FIXTURE), listen_s=LISTEN_S, idle_s=1.0)
    call_s = time.monotonic() - t0
    assert result.messages.get("media", 0) > 5, result.messages
    assert result.t_first_reply is not None, f"no audible reply; saw {result.messages}"
    assert result.response_s < REPLY_BOUND_S
    assert result.reply_s > 0.2  # a spoken sentence, not a click
    window = (_ns(t0), time.perf_counter_ns())
    spans = await _call_spans(receiver, window, result.call_id)
    _assert_pipecat_turn_spans(spans, "twilio")
    split = _assert_split(
        spans, window, _ns(result.t_first_reply), receiver.placement_uncertainty_ns
    )
    first_byte = split.milestones["agent_tts_first_byte"]
    rss, peak = _rss_mb(bot.pid or 0)
    print(
        f"\nbot startup {bot.startup_s:.2f} s; twilio reply {result.response_s * 1000:.0f} ms "
        f"after the WAV (speech end + 1.3 s); bot's first TTS byte -> caller "
        f"{(_ns(result.t_first_reply) - first_byte) / 1e6:.1f} ms; reported "
        f"{ {k: round(v) for k, v in split.reported.items()} }; call {call_s:.1f} s; "
        f"bot RSS {rss:.0f} MB (peak {peak:.0f} MB)"
    )


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["pipecat-ws", "webrtc"])
async def test_one_turn_over_pipecat_ws_and_webrtc(
    bot: AgentStatus, receiver: TraceReceiver, transport: str
) -> None:
    call = _load("call")
    url = bot.urls[transport]
    if transport == "pipecat-ws":  # the bot takes the conversation id from the query
        url += "?conversation_id=vl-test-pipecat-ws"
    t0 = time.monotonic()
    result = await call.CALLS[transport](url, str(FIXTURE), listen_s=LISTEN_S, idle_s=1.0)
    assert result.t_first_reply is not None, f"no audible reply; saw {result.messages}"
    assert result.response_s < REPLY_BOUND_S
    conversation = result.call_id or "vl-test-pipecat-ws"  # webrtc: the answer's pc_id
    window = (_ns(t0), time.perf_counter_ns())
    spans = await _call_spans(receiver, window, conversation)
    _assert_pipecat_turn_spans(spans, transport)
    split = _assert_split(
        spans, window, _ns(result.t_first_reply), receiver.placement_uncertainty_ns
    )
    first_byte = split.milestones["agent_tts_first_byte"]
    print(
        f"\n{transport} reply {result.response_s * 1000:.0f} ms after the WAV; bot's first TTS "
        f"byte -> caller {(_ns(result.t_first_reply) - first_byte) / 1e6:.1f} ms"
    )


@pytest.mark.slow
async def test_two_concurrent_twilio_calls_are_both_answered(
    bot: AgentStatus, receiver: TraceReceiver
) -> None:
    """One pipeline per connection, the models shared: what `--concurrency 2` does; each
    call's spans are told apart by its conversation id (the Twilio call SID)."""
    call = _load("call")
    t0 = time.monotonic()
    results = await asyncio.gather(
        *(
            call.twilio_call(bot.urls["twilio"], str(FIXTURE), listen_s=LISTEN_S, idle_s=1.0)
            for _ in range(2)
        )
    )
    window = (_ns(t0), time.perf_counter_ns())
    traces = set()
    for result in results:
        assert result.t_first_reply is not None, f"no audible reply; saw {result.messages}"
        assert result.response_s < 2 * REPLY_BOUND_S
        spans = await _call_spans(receiver, window, result.call_id)
        _assert_pipecat_turn_spans(spans, "twilio")
        traces.add(spans[0].trace_id)
    assert len(traces) == 2


@pytest.mark.slow
def test_cli_agent_up_detached_then_status_and_down(
    manager: PipecatBot, capsys: pytest.CaptureFixture[str]
) -> None:
    """`voicelat agent up` leaves the bot running for `status` and `down` (no stack start)."""
    cfg = manager.config
    (port,) = _free_ports(9180)
    args = ["--state-dir", str(cfg.stack.state_root / "cli"), "--port", str(port),
            "--llm-port", str(cfg.stack.llm_port), "--no-traces"]  # fmt: skip
    assert main(["agent", "up", "--no-stack", *args]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"twilio      ws://127.0.0.1:{port}/ws" in out
    pid = int(out.split("pid ", 1)[1].split()[0])
    assert main(["agent", "status", *args]) == EXIT_OK
    assert main(["agent", "down", *args]) == EXIT_OK
    assert f"pid {pid}  stopped" in capsys.readouterr().out
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert main(["agent", "status", *args]) == EXIT_INFRA
