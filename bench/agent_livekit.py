"""The example LiveKit agent profiled through the `livekit` kind, ranked beside a Pipecat bot and
voicelat's own cascade on the same emulated providers.

    python bench/agent_livekit.py                       # 8 fixtures, 1 warm-up each (~4 min)
    python bench/agent_livekit.py --profile exact --out runs/lk

Starts ``voicelat serve openai`` (``--profile``, default ``realistic``), the example agent
(examples/livekit-agent/agent.py: a livekit-agents 1.8.9 AgentSession with no LiveKit server,
Silero VAD, LiveKit's OpenAI STT/LLM/TTS plugins on that emulator, its spans to the run's trace
receiver) and the Pipecat transport test bot (tests/agents/pipecat_transport_agent.py over
``pipecat-ws``: Pipecat's own transport, Silero VAD and serializer, a canned tone reply; no
models, no traces), then ``voicelat run`` of pipelines/agent-livekit.toml, of the bot, and of
pipelines/emulated-openai.toml (the cascade on the same emulator), and ``voicelat compare`` of
the three. Prints the load average before and after, each run's traced-split check (segments
summing to e2e, the flags) and the comparison's markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_line  # noqa: E402
from tests.stages.agent_helpers import pipecat_agent  # noqa: E402

FIXTURES = "kitchen_lights,rain_tomorrow,call_mom,cancel_alarm,weather_paris,timer_ten_minutes,book_table,italian_restaurant"
KEY_ENV = "VOICELAT_EMULATOR_KEY"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _voicelat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        KEY_ENV: "emulator-key",
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT)),
    }
    return subprocess.run(
        [sys.executable, "-m", "voicelat", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )


def _fixtures(out: Path, ids: list[str]) -> Path:
    import shutil

    src = ROOT / "fixtures"
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] in ids]
    out.mkdir(parents=True, exist_ok=True)
    for entry in manifest["fixtures"]:
        shutil.copy(src / entry["file"], out / entry["file"])
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def _check(run: Path) -> str:
    turns = [json.loads(line) for line in (run / "turns.jsonl").read_text().splitlines()]
    measured = [t for t in turns if not t.get("warmup")]
    ok = [t for t in measured if not t.get("failed")]
    exact = sum(sum(t["segments_ns"].values()) == t["e2e_ns"] for t in ok)
    flags = sorted({f for t in ok for f in t.get("flags", [])})
    return (
        f"{run.name}: {len(ok)}/{len(measured)} ok, {exact} summing exactly to e2e, flags {flags}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="realistic")
    p.add_argument("--fixtures", default=FIXTURES, help="comma-separated bundled fixture ids")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="keep the runs here")
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="agent-livekit-"))
    fixtures = _fixtures(out / "fixtures", args.fixtures.split(","))
    print(f"load before: {os.getloadavg()}; {machine_line()}", flush=True)
    env = {
        **os.environ,
        KEY_ENV: "emulator-key",
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT)),
    }
    emu = subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", "openai", "--port", "0", "--profile", args.profile],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    assert emu.stdout is not None
    base_url = emu.stdout.readline().split()[1]
    lk_port, trace_port, bot_port = _free_port(), _free_port(), _free_port()
    agent = subprocess.Popen(
        [sys.executable, str(ROOT / "examples/livekit-agent/agent.py"), "--port", str(lk_port),
         "--openai-url", base_url, "--otlp-endpoint", f"http://127.0.0.1:{trace_port}/v1/traces"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert agent.stdout is not None
    print(agent.stdout.readline().strip(), flush=True)
    try:
        text = (ROOT / "pipelines/agent-livekit.toml").read_text()
        text = text.replace("127.0.0.1:7880", f"127.0.0.1:{lk_port}").replace(
            '\ntraces = "livekit"\n', f'\ntraces = "livekit"\ntrace_port = {trace_port}\n'
        )
        (out / "livekit.toml").write_text(text)
        (out / "pipecat-bot.toml").write_text(
            '[pipeline]\nname = "pipecat-bot"\n\n[agent]\nstage = "pipecat-ws"\n'
            f'url = "ws://127.0.0.1:{bot_port}"\nreply_idle_ms = 600\n'
        )
        cascade = (ROOT / "pipelines/emulated-openai.toml").read_text()
        (out / "cascade.toml").write_text(cascade.replace("http://127.0.0.1:8401/v1", base_url))
        common = ["-f", str(fixtures), "-w", str(args.warmup), "--no-tui"]
        runs = []
        for name in ("livekit", "pipecat-bot", "cascade"):
            run = out / name
            if name == "pipecat-bot":
                with pipecat_agent("ws", bot_port):
                    r = _voicelat("run", "-p", str(out / f"{name}.toml"), *common, "-o", str(run))
            else:
                r = _voicelat("run", "-p", str(out / f"{name}.toml"), *common, "-o", str(run))
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            print(_check(run), flush=True)
            runs.append(str(run))
        r = _voicelat("compare", *runs, "-o", str(out / "cmp"))
        print(r.stdout[-300:] if r.returncode else "", r.stderr[-1500:] if r.returncode else "")
        print((out / "cmp" / "comparison.md").read_text())
    finally:
        for proc in (agent, emu):
            proc.terminate()
            proc.wait(10)
    print(f"load after: {os.getloadavg()}; runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
