"""Does a simulated caller's thinking change the agent's figures? Its preparation time per turn,
and the agent's e2e with a slow caller and with the same lines replayed from the cache.

    python bench/caller_prep.py                    # 1 and 4 calls at once (~2 min)
    python bench/caller_prep.py --calls 1 --llm-ms 2000

Two OpenAI emulators, each in its own process (`voicelat serve openai`): the agent (the emulated
cascade, fixed delays: STT 40 ms, LLM first token 40 ms, TTS first audio 30 ms) and the caller
(its LLM's first token after ``--llm-ms``, its TTS's first audio after 300 ms). For each
concurrency N, ``voicelat run --scenario`` runs N calls of a 4-line caller twice:

* **live**: the caller's LLM writes each line and its TTS renders it (an empty cache): the
  caller takes ``--llm-ms`` + the render before each turn;
* **frozen**: ``--frozen`` the live run, the same lines from the now warm cache.

The agent's e2e of the caller's turns must not move with the caller's preparation (the
turn's t0 is its clip's first sample, which plays only once the caller is ready), beyond the
machine's run-to-run noise; and the error of each turn's output_first_audible against the
agent emulator's truth (its ``first_audio_written`` of the turn's speech exchange + the onset
of its audio; same CLOCK_MONOTONIC) must be the same live and frozen. The last line is
``truth_error_p99_ms=<worst P99 |error| over the runs>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _common import serving  # noqa: E402

from voicelat.cli.main import main  # noqa: E402

LINES = [
    "Hi, I would like to book a table for dinner.",
    "There will be four of us.",
    "Tomorrow evening, at eight.",
    "Great, thank you. Goodbye. [DONE]",
]
MS = 1_000_000


def _agent_profile() -> dict[str, Any]:
    return {
        "openai": {
            "latency": {"headers": 5, "ttft": 40, "token": 5, "stt_first": 20, "stt_final": 40,
                        "tts_first_audio": 30, "tts_chunk": 5},
            "content": {"leading_silence_ms": 30.0, "reply": "Sure thing.", "ms_per_char": 10.0},
        }
    }  # fmt: skip


def _caller_profile(llm_ms: float) -> dict[str, Any]:
    return {
        "openai": {
            "latency": {"headers": 5, "ttft": llm_ms, "token": 3, "tts_first_audio": 300,
                        "tts_chunk": 2},
            "content": {"replies": LINES, "ms_per_char": 12.0, "leading_silence_ms": 25.0},
        }
    }  # fmt: skip


def _files(tmp: Path, agent_port: int, caller_port: int) -> tuple[Path, Path]:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text(encoding="utf-8")
    pipeline = tmp / "agent.toml"
    pipeline.write_text(text.replace("127.0.0.1:8401", f"127.0.0.1:{agent_port}"), "utf-8")
    url = f"http://127.0.0.1:{caller_port}/v1"
    key = 'api_key_env = "VOICELAT_EMULATOR_KEY"\n'
    scenario = tmp / "booker.toml"
    scenario.write_text(
        'name = "booker"\n[[step]]\nexpect_greeting = true\n[caller]\n'
        'persona = "You are Sam, booking a table."\nmax_turns = 6\ngap_ms = 400\n'
        f'[caller.llm]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\n{key}'
        f'[caller.voice]\nstage = "openai-tts"\nbase_url = "{url}"\nvoice = "echo"\n{key}',
        encoding="utf-8",
    )
    return pipeline, scenario


TTS_RATE = 24000  # the openai-tts stage asks for 24 kHz PCM


def _onset_ns() -> int:
    """The agent's reply audio: its first audible sample after its first byte."""
    from voicelat.audio import PCM, first_audible_sample
    from voicelat.emulate.content import tone_speech

    pcm = tone_speech("Sure thing.", TTS_RATE, ms_per_char=10.0, leading_silence_ms=30.0)
    onset = first_audible_sample(PCM(pcm, TTS_RATE))
    assert onset is not None
    return onset * 1_000_000_000 // TTS_RATE


def _truth_errors(run_dir: Path, truth: list[dict[str, Any]]) -> list[int]:
    """Each caller turn's output_first_audible minus the truth of its TTS exchange (the first
    speech request the emulator received after the turn sent its own) + the audio's onset."""
    from voicelat.files.results import load_run

    speeches = sorted(
        (e for e in truth if e.get("endpoint") == "speech"),
        key=lambda e: e["marks"]["request_received"],
    )
    onset, out, used = _onset_ns(), [], set()
    for t in load_run(run_dir).turns:
        m = {k: t.t0_ns + v for k, v in t.milestones.items()}
        if not t.ok or "tts_request" not in m:
            continue
        ex = next(
            (e for e in speeches
             if e["marks"]["request_received"] >= m["tts_request"] and id(e) not in used),
            None,
        )  # fmt: skip
        if ex is None or "first_audio_written" not in ex["marks"]:
            continue
        used.add(id(ex))
        out.append(m["output_first_audible"] - (ex["marks"]["first_audio_written"] + onset))
    return out


def _summary(run_dir: Path) -> dict[str, Any]:
    lines = [
        json.loads(ln)
        for ln in (run_dir / "conversation.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    e2e = [ln["e2e_ns"] for ln in lines if isinstance(ln.get("e2e_ns"), int)]
    prep = [ln["prep_ns"] for ln in lines]
    return {
        "lines": len(lines),
        "prep_p50_ms": statistics.median(prep) / MS,
        "prep_max_ms": max(prep) / MS,
        "e2e_p50_ms": statistics.median(e2e) / MS,
        "e2e_max_ms": max(e2e) / MS,
        "e2e_n": len(e2e),
    }


def _toml(profile: dict[str, Any]) -> str:
    """The profile as TOML (numbers, strings and lists of strings are all it holds)."""
    out = []
    for name, tables in profile.items():
        for table, values in tables.items():
            out.append(f"[{name}.{table}]")
            out.extend(f"{k} = {json.dumps(v)}" for k, v in values.items())
    return "\n".join(out) + "\n"


def _serve(tmp: Path, label: str, profile: dict[str, Any]) -> Any:
    path = tmp / f"{label}.toml"
    path.write_text(_toml(profile), encoding="utf-8")
    cmd = [sys.executable, "-m", "voicelat", "serve", "openai", "--profile", str(path)]
    return serving([*cmd, "--port", "0", "--truth", str(tmp / f"{label}-truth.jsonl")], 1)


def _read_truth(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _port(lines: Any) -> int:
    return int(lines[0][1][1].rsplit(":", 1)[1].split("/")[0])


async def _bench(calls: list[int], llm_ms: float) -> int:
    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "bench-key")
    worst = 0.0
    print("| calls at once | run | caller lines | caller prep P50 / max ms "
          "| agent e2e P50 / max ms | e2e error vs truth P50 / P99 / max ms |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    with (
        tempfile.TemporaryDirectory() as top,
        _serve(Path(top), "agent", _agent_profile()) as agent,
        _serve(Path(top), "caller", _caller_profile(llm_ms)) as caller,
    ):
        for n in calls:
            with tempfile.TemporaryDirectory() as d:
                tmp = Path(d)
                pipeline, scenario = _files(tmp, _port(agent), _port(caller))
                common = ["run", "-q", "--calibrate", "off", "-p", str(pipeline), "--scenario",
                          str(scenario), "--repeat", str(n), "-c", str(n), "--caller-cache",
                          str(tmp / "cache")]  # fmt: skip
                rows = {}
                for name, extra in (("live", []), ("frozen", ["--frozen", str(tmp / "live")])):
                    code = await asyncio.to_thread(main, [*common, "-o", str(tmp / name), *extra])
                    if code:
                        print(f"a run failed (exit {code})", file=sys.stderr)
                        return code
                    await asyncio.sleep(0.5)  # the emulator writes its truth as it goes
                    truth = _read_truth(Path(top) / "agent-truth.jsonl")
                    rows[name] = _summary(tmp / name) | {"err": _truth_errors(tmp / name, truth)}
            for name, s in rows.items():
                err = sorted(abs(e) for e in s["err"])
                p99 = err[min(len(err) - 1, int(0.99 * len(err)))] / MS if err else float("nan")
                worst = max(worst, p99)
                e50 = statistics.median(s["err"]) / MS if err else float("nan")
                print(
                    f"| {n} | {name} | {s['lines']} | {s['prep_p50_ms']:.1f} / "
                    f"{s['prep_max_ms']:.1f} | {s['e2e_p50_ms']:.1f} / {s['e2e_max_ms']:.1f} | "
                    f"{e50:.2f} / {p99:.2f} / {max(err, default=0) / MS:.2f} (n={len(err)}) |"
                )
    print(f"truth_error_p99_ms={worst:.2f}")
    return 0


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", default="1,4", help="concurrent calls, comma-separated")
    ap.add_argument("--llm-ms", type=float, default=1200.0, help="the caller LLM's first token")
    args = ap.parse_args()
    return asyncio.run(_bench([int(x) for x in args.calls.split(",")], args.llm_ms))


if __name__ == "__main__":
    raise SystemExit(main_())
