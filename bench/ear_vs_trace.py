"""How far trace-only e2e sits from the ear: the example Pipecat bot played by voicelat over
each transport, each turn measured at the ear (voicelat's e2e: the fixture's annotated end of
speech -> the first audible reply sample at the caller) and by the bot's own trace alone
(Pipecat's ``turn.user_bot_latency_seconds``: its end of speech -> its BotStartedSpeakingFrame,
what ``voicelat import`` makes e2e of; docs/PRODUCTION.md).

    PYTHONPATH=$PWD python bench/ear_vs_trace.py --turns 8

Starts the embedded stack and the bot on free loopback ports (its spans to the run's trace
receiver), runs ``voicelat run`` once per transport, and prints a Markdown table of P50s (ms).
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from voicelat.files.results import load_run  # noqa: E402
from voicelat.stack.agent import AgentConfig, PipecatBot  # noqa: E402
from voicelat.stack.config import StackConfig  # noqa: E402

TRANSPORTS = ("twilio", "pipecat-ws", "webrtc")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pipeline(tmp: Path, transport: str, bot_port: int, trace_port: int) -> Path:
    text = (ROOT / "pipelines" / f"agent-{transport}.toml").read_text()
    text = text.replace("127.0.0.1:7860", f"127.0.0.1:{bot_port}")
    text = re.sub(
        r'^traces = "pipecat"$', f'traces = "pipecat"\ntrace_port = {trace_port}', text, flags=re.M
    )
    path = tmp / f"agent-{transport}.toml"
    path.write_text(text)
    return path


def _p50(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--turns", type=int, default=8)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        stt, tts, llm, bot_port, trace_port = (_free_port() for _ in range(5))
        stack = StackConfig(stt_port=stt, tts_port=tts, llm_port=llm, state_dir=tmp / "state")
        otlp = f"http://127.0.0.1:{trace_port}/v1/traces"
        with PipecatBot(AgentConfig(stack=stack, port=bot_port, otlp_endpoint=otlp)) as bot:
            bot.up()
            for transport in TRANSPORTS:
                out = tmp / transport
                cmd = [sys.executable, "-m", "voicelat", "run", "--no-tui", "-q"]
                cmd += ["-p", str(_pipeline(tmp, transport, bot_port, trace_port))]
                cmd += ["--turns", str(args.turns), "--out", str(out)]
                subprocess.run(cmd, cwd=ROOT, check=False, timeout=1800)
                rows.append((transport, _row(out)))
    print("| transport | turns | ear e2e P50 | trace-only e2e P50 | ear - trace P50 (min..max) |")
    print("|---|---|---|---|---|")
    for transport, (n, ear, trace, gap) in rows:
        span = f"{min(gap):.0f}..{max(gap):.0f}" if gap else "-"
        print(f"| {transport} | {n} | {_p50(ear)} | {_p50(trace)} | {_p50(gap)} ({span}) |")


def _row(out: Path) -> tuple[int, list[float], list[float], list[float]]:
    """Headline turns with both figures: ear e2e, trace-only e2e, their difference (ms)."""
    ear: list[float] = []
    trace: list[float] = []
    for turn in load_run(out).turns:
        latency = turn.figures.get("agent_reported_user_bot_latency_ms")
        if turn.headline and turn.e2e_ns is not None and isinstance(latency, int | float):
            ear.append(turn.e2e_ns / 1e6)
            trace.append(float(latency))
    gap = [e - t for e, t in zip(ear, trace, strict=True)]
    return len(ear), ear, trace, gap


if __name__ == "__main__":
    main()
