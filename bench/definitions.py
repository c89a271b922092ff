"""One run read in every public latency definition: the numbers of docs/DEFINITIONS.md.

    python bench/definitions.py OUT                # emulated Deepgram (provider endpointing)
    python bench/definitions.py OUT --repeat 1     # each fixture once (about 2 minutes)

The shipped `pipelines/emulated-deepgram-aura.toml` (Deepgram nova-3 with the provider's own
end of turn -> gpt-4o-mini -> Aura-2) runs against in-process emulators (profile `exact`, seed
1) on ephemeral ports, every bundled fixture `--repeat` times after one warm-up turn, played in
real time; then `voicelat view OUT --definitions` prints the run in every definition. The run
directory stays in OUT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from voicelat.core.base.plan import plan_turns  # noqa: E402
from voicelat.emulate import Emulators  # noqa: E402
from voicelat.engine.runner import Runner  # noqa: E402
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures  # noqa: E402
from voicelat.files.pipeline import parse_pipeline  # noqa: E402

PIPELINE = ROOT / "pipelines" / "emulated-deepgram-aura.toml"


async def measure(out: Path, repeat: int) -> None:
    fixtures = load_fixtures(default_fixtures_dir())
    async with Emulators(["deepgram", "openai"], profile="exact", seed=1) as em:
        data = tomllib.loads(PIPELINE.read_text())
        for table in ("stt", "llm", "tts"):
            for server in em.servers.values():
                default = f"127.0.0.1:{server.emulator.default_port}"
                data[table]["base_url"] = data[table]["base_url"].replace(
                    default, f"127.0.0.1:{server.port}"
                )
        runner = Runner(parse_pipeline(data, path=PIPELINE), fixtures, out)
        ids = [f.id for f in fixtures]
        await runner.run(plan_turns(ids, turns=repeat * len(ids), warmup=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a new run directory")
    parser.add_argument("--repeat", type=int, default=2, help="turns per fixture (default 2)")
    args = parser.parse_args()
    os.environ.setdefault("VOICELAT_EMULATOR_KEY", "emulator-key")
    asyncio.run(measure(args.out, args.repeat))
    view = [sys.executable, "-m", "voicelat", "view", str(args.out), "--definitions"]
    return subprocess.run(view, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode


if __name__ == "__main__":
    raise SystemExit(main())
