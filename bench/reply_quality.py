"""Does the reply scoring see what a listener would? A planted defect and added noise.

    python bench/reply_quality.py            # 8 turns per case, ~4 min on 2 busy cores

Three runs of the emulated OpenAI cascade (piper speech, the bundled fixtures), each scored
after the run as ``voicelat score --score all`` does:

* clean: the TTS says the reply as given;
* drop-last-word: the TTS leaves out the last word of every request (``drop_last_words = 1``);
* noise: the clean run's reply audio with white noise at 5 dB SNR added (DNSMOS only: the
  same words, a worse sound).

Prints the reply WER (mean, max), the truncated count, DNSMOS OVRL/SIG/BAK and the scorers'
time per turn, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import emulated_openai_pipeline  # noqa: E402
from voicelat.audio.wav import PCM, read_wav, write_wav  # noqa: E402
from voicelat.core.base.plan import plan_turns  # noqa: E402
from voicelat.emulate import Emulators  # noqa: E402
from voicelat.engine.runner import Runner  # noqa: E402
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures  # noqa: E402
from voicelat.score.run import Scorers, score_run  # noqa: E402

REPLY = "It is sunny and mild today in Paris, around twenty degrees"


async def _run(out: Path, n: int, **content: Any) -> None:
    fixtures = load_fixtures(default_fixtures_dir())[:n]
    profile = {"openai": {"content": {"reply": REPLY, "audio": "piper", **content}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        p = emulated_openai_pipeline(em)
        p = replace(p, output=replace(p.output, save_audio=True))
        await Runner(p, fixtures, out).run(plan_turns([f.id for f in fixtures], warmup=0))


def _add_noise(run_dir: Path, snr_db: float) -> None:
    rng = np.random.default_rng(0)
    for wav in sorted((run_dir / "audio").glob("*.wav")):
        pcm = read_wav(wav)
        x = np.frombuffer(pcm.samples, dtype="<i2").astype(np.float64)
        loud = x[np.abs(x) > 300]
        rms = float(np.sqrt(np.mean(loud**2))) if loud.size else 1000.0
        noisy = x + rng.normal(0, rms / 10 ** (snr_db / 20), len(x))
        write_wav(wav, PCM(np.clip(noisy, -32768, 32767).astype("<i2").tobytes(), pcm.rate))


def _line(name: str, q: dict[str, Any]) -> str:
    w, m = q["wer"], q["dnsmos"]
    return (
        f"{name:<15} WER mean {w['mean']:.1%} max {w['max']:.1%} (n={w['n']}), "
        f"truncated {q['truncated']}; DNSMOS OVRL {m['ovrl']:.2f} SIG {m['sig']:.2f} "
        f"BAK {m['bak']:.2f}; {q['score_ms_per_turn']:.0f} ms a turn to score"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "bench")
    scorers = Scorers("all")
    with tempfile.TemporaryDirectory() as tmp:
        clean, cut = Path(tmp, "clean"), Path(tmp, "cut")
        asyncio.run(_run(clean, args.turns))
        asyncio.run(_run(cut, args.turns, drop_last_words=1))
        q_clean = score_run(clean, "all", scorers=scorers).quality
        q_cut = score_run(cut, "all", scorers=scorers).quality
        _add_noise(clean, 5.0)
        q_noise = score_run(clean, "all", scorers=scorers).quality
    assert q_clean and q_cut and q_noise
    print(_line("clean", q_clean))
    print(_line("drop-last-word", q_cut))
    print(_line("noise 5 dB SNR", q_noise))
    print(f"load average (1 min) {os.getloadavg()[0]:.2f}; {args.turns} turns a case")


if __name__ == "__main__":
    main()
