"""What the barge-in tests share: scenarios written into a test's folder and a long reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.calls.calls_helpers import CALLS

MS = 1_000_000
#: A reply long enough to cut into: the emulators' TTS speaks 10 ms per character (~3.6 s).
LONG_REPLY = (
    "The forecast for today is mostly sunny with a light breeze from the west, "
    "highs around twenty two degrees, and a small chance of rain late in the evening, "
    "so you may want to bring a light jacket if you are out after dark."
)


def scenario(tmp_path: Path, name: str, steps: str) -> Path:
    """A scenario file named ``name`` with ``steps`` (TOML ``[[step]]`` tables)."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nfixtures = "{CALLS}"\n{steps}', encoding="utf-8")
    return path


INTERRUPT_STEPS = (
    '[[step]]\nsay = "short_01_weather"\n'
    '[[step]]\ninterrupt = "int_01_wait"\nafter_ms = 500\n'
    '[[step]]\nsay = "short_03_thanks"\ngap_ms = 300\n'
)
BACKCHANNEL_STEPS = (
    '[[step]]\nsay = "short_01_weather"\n'
    '[[step]]\nbackchannel = "bc_mmhmm"\nafter_ms = 500\n'
    '[[step]]\nsay = "short_03_thanks"\ngap_ms = 300\n'
)


async def run_call(pipeline: Any, loaded: Any, out: Path) -> Any:
    """One call of the loaded scenario through ``pipeline`` (a Runner of its own): the outcome."""
    from voicelat.core.base.plan import PlannedTurn
    from voicelat.engine.call import plan_calls
    from voicelat.engine.runner import Runner

    runner = Runner(
        pipeline, list(loaded.fixtures.values()), out, calls=plan_calls([loaded.scenario])
    )
    plan = [PlannedTurn(i, f, 0, False) for i, f in enumerate(loaded.scenario.fixture_ids())]
    return await runner.run(plan)
