"""Shared by the benches: the machine line, a short synthetic fixture, emulators in their own
process (`voicelat serve --truth`), the emulated pipeline, percentiles.

The emulator runs in a separate process so that it shares neither the measuring event loop nor
its GIL. Both processes stamp ``time.perf_counter_ns()``, which is CLOCK_MONOTONIC on Linux: one
clock for every process on the machine, so the emulator's ground truth compares directly with
voicelat's stamps.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
import tomllib
import wave
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from voicelat.core.base.stats import percentile  # noqa: E402
from voicelat.files.pipeline import Endpointing, Pipeline, parse_pipeline  # noqa: E402

MS = 1_000_000
KEY_ENV = "VOICELAT_EMULATOR_KEY"


def machine() -> dict[str, Any]:
    """What the numbers were measured on (quoted next to every figure in BENCHMARKS.md)."""
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def machine_line() -> str:
    m = machine()
    return f"machine: {m['nproc']} x {m['cpu']}, Python {m['python']}, {m['platform']}"


# -- a short synthetic fixture -------------------------------------------------------------------
def write_fixture(
    d: Path,
    *,
    lead_s: float = 0.3,
    speech_s: float = 2.0,
    tail_s: float = 1.0,
    text: str = "What's the weather like today?",
) -> Path:
    """A 16 kHz tone 'utterance' (2 s, like the bundled fixtures' speech) with annotated
    speech_start/speech_end and a manifest. The emulated STT answers its canned transcript."""
    d.mkdir(parents=True, exist_ok=True)
    rate = 16000
    t = np.arange(int(speech_s * rate)) / rate
    tone = 0.3 * np.sin(2 * math.pi * 300 * t)
    audio = np.concatenate([np.zeros(int(lead_s * rate)), tone, np.zeros(int(tail_s * rate))])
    with wave.open(str(d / "tone.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((audio * 32767).astype("<i2").tobytes())
    entry = {
        "id": "tone",
        "file": "tone.wav",
        "text": text,
        "speech_start_ms": round(lead_s * 1000),
        "speech_end_ms": round((lead_s + speech_s) * 1000),
    }
    (d / "manifest.json").write_text(json.dumps({"version": 1, "fixtures": [entry]}))
    return d


# -- the emulator profile and its process ------------------------------------------------------
@dataclass
class Profile:
    """Exact, fixed delays (ms): every draw is the same value, so injected is known exactly."""

    headers: float = 10.0
    ttft: float = 120.0
    token: float = 20.0
    stt_first: float = 60.0
    stt_final: float = 150.0
    tts_first_audio: float = 100.0
    tts_chunk: float = 20.0
    leading_silence_ms: float = 60.0
    reply: str = "Sure, it is sunny and mild in Paris today."
    ms_per_char: float = 40.0  # 1.7 s of reply audio, played in real time by the sink
    nodelay: bool = True
    coalesce_headers: bool = False
    timer: str = "sleep"
    extra: dict[str, Any] = field(default_factory=dict)

    def toml(self) -> str:
        keys = ("headers", "ttft", "token", "stt_first", "stt_final", "tts_first_audio")
        lat = "\n".join(f"{k} = {getattr(self, k)}" for k in (*keys, "tts_chunk"))
        return (
            "seed = 1\n[openai]\n"
            f"[openai.latency]\n{lat}\n"
            "[openai.content]\n"
            f'reply = "{self.reply}"\ntranscripts = "canned"\n'
            f"leading_silence_ms = {self.leading_silence_ms}\nms_per_char = {self.ms_per_char}\n"
            "[openai.wire]\n"
            f"nodelay = {str(self.nodelay).lower()}\n"
            f"coalesce_headers = {str(self.coalesce_headers).lower()}\n"
            f'timer = "{self.timer}"\n'
        )


@dataclass
class Served:
    """A running `voicelat serve` process."""

    proc: subprocess.Popen[str]
    base_url: str
    truth_path: Path

    def truth(self) -> list[dict[str, Any]]:
        if not self.truth_path.exists():
            return []
        return [json.loads(x) for x in self.truth_path.read_text().splitlines() if x.strip()]


@contextlib.contextmanager
def serve(profile: Profile, workdir: Path, name: str = "openai") -> Iterator[Served]:
    """`voicelat serve NAME --profile P --port 0 --truth FILE` in its own process."""
    workdir.mkdir(parents=True, exist_ok=True)
    prof = workdir / "profile.toml"
    prof.write_text(profile.toml())
    tomllib.loads(prof.read_text())  # a typo here is the bench's bug: fail before starting
    truth = workdir / "truth.jsonl"
    truth.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "voicelat", "serve", name, "--profile", str(prof)]
    cmd += ["--port", "0", "--truth", str(truth)]
    with serving(cmd, 1) as lines:
        yield Served(lines[0][0], lines[0][1][1], truth)


@contextlib.contextmanager
def serving(
    cmd: list[str], n: int, env: dict[str, str] | None = None
) -> Iterator[list[tuple[subprocess.Popen[str], list[str]]]]:
    """``voicelat serve ...`` in its own process; yields its first ``n`` lines ``NAME URL``
    (each with the process), and stops it with SIGTERM (a kill after 20 s)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    try:
        assert proc.stdout is not None
        lines = []
        for _ in range(n):
            parts = proc.stdout.readline().split()
            if len(parts) != 2:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"voicelat serve did not start: {err[-2000:]}")
            lines.append((proc, parts))
        yield lines
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pipeline(base_url: str, *, hangover_ms: int = 500, save_audio: bool = False) -> Pipeline:
    """openai-stt -> openai chat -> openai-tts against one emulator (as emulated-openai.toml)."""
    os.environ.setdefault(KEY_ENV, "bench")
    data: dict[str, Any] = {
        "pipeline": {"name": "bench-emulated"},
        "endpointing": {"mode": "vad", "hangover_ms": hangover_ms},
        "stt": {
            "stage": "openai-stt",
            "base_url": base_url,
            "model": "gpt-4o-mini-transcribe",
            "language": "en",
            "api_key_env": KEY_ENV,
        },
        "llm": {
            "stage": "openai",
            "base_url": base_url,
            "endpoint": "chat",
            "model": "gpt-4o-mini",
            "max_tokens": 60,
            "temperature": 0.0,
            "api_key_env": KEY_ENV,
        },
        "tts": {
            "stage": "openai-tts",
            "base_url": base_url,
            "model": "gpt-4o-mini-tts",
            "voice": "alloy",
            "api_key_env": KEY_ENV,
        },
        "chunker": {"mode": "sentence"},
        "output": {"save_audio": save_audio},
        "turn": {"timeout_s": 60},
    }
    p = parse_pipeline(data)
    assert isinstance(p.endpointing, Endpointing)
    return p


class SessionModels:
    """A ``Runner.session_stages`` factory that gives session N its own model names
    (``<model>-sN``): the emulator records the model of every request, so each exchange in the
    ground truth can be tied to its session (and, sessions being sequential, to its turn).
    A class, not a closure, so that it pickles into ``--workers`` processes."""

    def __init__(self, p: Pipeline) -> None:
        self.p = p

    def __call__(self, session: int) -> tuple[Any, Any, Any]:
        from voicelat.stages.base import load_stage_class

        out = []
        for kind in ("stt", "llm", "tts"):
            table = dict(getattr(self.p, kind))
            table["model"] = f"{table['model']}-s{session}"
            out.append(load_stage_class(table["stage"], kind)(table))
        return out[0], out[1], out[2]


def session_models(p: Pipeline) -> Any:
    """:class:`SessionModels` for ``p``."""
    return SessionModels(p)


def runqueue_wait_ms(pid: int) -> float:
    """Time the process's threads spent runnable but waiting for a CPU (Linux schedstat), ms:
    on a shared 2-core machine this is where the tails of the timing errors come from."""
    total = 0
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    return total / MS


# -- statistics --------------------------------------------------------------------------------
def dist_ms(values_ns: Sequence[float]) -> dict[str, float | int | None]:
    if not values_ns:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    v = [x / MS for x in values_ns]
    return {
        "n": len(v),
        "p50": round(percentile(v, 50), 3),
        "p99": round(percentile(v, 99), 3),
        "max": round(max(v), 3),
    }


def fmt(d: Mapping[str, Any]) -> str:
    if not d.get("n"):
        return "-"
    return f"{d['p50']:.2f} / {d['p99']:.2f} / {d['max']:.2f}"


def now_stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


# -- the embedded local stack on ports of the benches' own --------------------------------------
BENCH_STACK_PORTS = {
    "VOICELAT_STT_PORT": "10331",
    "VOICELAT_TTS_PORT": "10231",
    "VOICELAT_LLM_PORT": "8131",
}


@contextlib.contextmanager
def local_stack(state_dir: Path) -> Iterator[dict[str, str]]:
    """The three real servers (whisper, llama, piper) on the benches' ports, started and warmed by
    voicelat's own stack manager (reusing healthy ones); stops only what it started."""
    from voicelat.stack import LocalStack, StackConfig

    env = {**BENCH_STACK_PORTS, "VOICELAT_STATE_DIR": str(state_dir)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    stack = LocalStack(StackConfig())
    try:
        stack.up(progress=lambda p: print(f"  stack: {p}", file=sys.stderr, flush=True))
        yield env
    finally:
        stack.release()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
