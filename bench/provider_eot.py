"""The streaming STT providers' own end-of-turn on the endpointing trade-off, from real runs.

    python bench/provider_eot.py                                   # the grid below (~6 min)
    python bench/provider_eot.py --deepgram 300 --assemblyai 400   # one setting each
    python bench/provider_eot.py --fixtures DIR --out DIR --port 19300

Starts the Deepgram, AssemblyAI and OpenAI emulators in a process of their own
(`voicelat serve deepgram assemblyai openai --port P`), then for each setting runs
`voicelat run` over the pause fixtures with a pipeline whose turns end on the provider's
end-of-turn (`[endpointing] mode = "provider"`): Deepgram `endpointing` = 100, 300, 500 ms
(its `speech_final`; `utterance_end_ms` stays 1000) and AssemblyAI `min_turn_silence` =
160, 400, 800 ms (formerly `min_end_of_turn_silence_when_confident`; its `end_of_turn`). The
LLM is the OpenAI emulator with a one-word reply and the TTS Deepgram Aura, so that a turn
lasts little longer than its audio. Last, `voicelat endpointing --runs ...` scores every run
next to the offline endpointers (energy, Silero, WebRTC) and prints the table; the load
average before and after is printed, since the machine may be shared.

The emulators' listener is a 20 ms energy VAD that calls speech over after 200 ms of silence,
then waits the provider's silence setting: a setting under 200 ms behaves as 200 ms there.
Their `stt_final` delay (120 ms by default) is the provider's processing the wire points
include.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import KEY_ENV, ROOT, machine_line, serving

PROFILE = """seed = 1
[openai.content]
reply = "Okay."
[deepgram.content]
ms_per_char = 20.0
"""


def _voicelat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), KEY_ENV: os.environ.get(KEY_ENV, "bench")}
    cmd = [sys.executable, "-m", "voicelat", *args]
    return subprocess.run(cmd, env=env, text=True, capture_output=True, check=False, cwd=ROOT)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


@contextlib.contextmanager
def serve(workdir: Path, port: int) -> Iterator[dict[str, str]]:
    """The three emulators on ports ``port``.. in their own process; yields NAME -> root URL."""
    profile = workdir / "profile.toml"
    profile.write_text(PROFILE)
    cmd = [sys.executable, "-m", "voicelat", "serve", "deepgram", "assemblyai", "openai"]
    cmd += ["--port", str(port), "--profile", str(profile), "--seed", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with serving(cmd, 3, env) as lines:
        yield {parts[0]: parts[1] for _, parts in lines}


def pipeline_text(provider: str, value: int, urls: dict[str, str]) -> str:
    """A provider-endpointed pipeline: ``provider`` STT with its silence setting ``value``."""
    ws = {name: url.replace("http://", "ws://").removesuffix("/v1") for name, url in urls.items()}
    if provider == "deepgram":
        stt = (
            f'stage = "deepgram-stt"\nbase_url = "{ws["deepgram"]}"\nmodel = "nova-3"\n'
            f"endpointing = {value}\nutterance_end_ms = 1000\n"
        )
    else:
        stt = (
            f'stage = "assemblyai-stt"\nbase_url = "{ws["assemblyai"]}"\n'
            f"min_turn_silence = {value}\n"
        )
    return (
        f'[pipeline]\nname = "eot-{provider}-{value}"\n\n[endpointing]\nmode = "provider"\n\n'
        f'[stt]\n{stt}api_key_env = "{KEY_ENV}"\n\n'
        f'[llm]\nstage = "openai"\nbase_url = "{urls["openai"]}"\nendpoint = "chat"\n'
        f'model = "gpt-4o-mini"\nmax_tokens = 20\napi_key_env = "{KEY_ENV}"\n\n'
        f'[tts]\nstage = "deepgram-tts"\nbase_url = "{ws["deepgram"]}"\n'
        f'model = "aura-2-thalia-en"\nrate = 24000\napi_key_env = "{KEY_ENV}"\n\n'
        "[turn]\ntimeout_s = 30\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deepgram", default="100,300,500", help="Deepgram endpointing ms values")
    ap.add_argument("--assemblyai", default="160,400,800", help="AssemblyAI min_turn_silence ms")
    ap.add_argument("--fixtures", type=Path, default=ROOT / "fixtures" / "pauses")
    ap.add_argument("--out", type=Path, help="work directory (default runs/<time>-provider-eot)")
    ap.add_argument("--port", type=int, default=19300, help="first emulator port (3 in a row)")
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()
    out = (args.out or ROOT / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-provider-eot").resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(machine_line(), file=sys.stderr)
    print(f"load average at the start: {_load()}", file=sys.stderr)
    grid = [("deepgram", v) for v in _ints(args.deepgram)]
    grid += [("assemblyai", v) for v in _ints(args.assemblyai)]
    runs: list[str] = []
    t0 = time.monotonic()
    with serve(out, args.port) as urls:
        for provider, value in grid:
            name = f"{provider}-{value}"
            pipe = out / f"{name}.toml"
            pipe.write_text(pipeline_text(provider, value, urls))
            run_dir = out / "runs" / name
            started = time.monotonic()
            done = _voicelat(
                "run", "-p", str(pipe), "-f", str(args.fixtures), "--warmup", str(args.warmup),
                "--out", str(run_dir), "--quiet",
            )  # fmt: skip
            took = time.monotonic() - started
            print(f"{name}: voicelat run exit {done.returncode} in {took:.0f} s", file=sys.stderr)
            if not (run_dir / "summary.json").exists():
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            runs.append(str(run_dir))
    print(f"load average after the runs: {_load()}", file=sys.stderr)
    cmd = ["endpointing", "--fixtures", str(args.fixtures), "--runs", *runs]
    cmd += ["--out", str(out / "endpointing"), "--no-tui"]
    scored = _voicelat(*cmd)
    sys.stderr.write(scored.stderr)
    print(scored.stdout, end="")
    print(
        f"\n{len(runs)} runs in {time.monotonic() - t0:.0f} s; load average at the end: "
        f"{_load()}; work directory {out}",
        file=sys.stderr,
    )
    return scored.returncode


if __name__ == "__main__":
    raise SystemExit(main())
