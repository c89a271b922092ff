"""In-process engines still name their version and pid after they stop (issue 18).

A run's summary (and compare's metadata) describes the stages after they are closed; it used
to record ``engine_version: null`` and ``worker_pid: null`` for pocketsphinx and espeak-ng.
"""

from __future__ import annotations

import pytest

from voicelat.stages.espeak import EspeakTTS
from voicelat.stages.pocketsphinx import PocketSphinxSTT


@pytest.mark.parametrize(
    ("cls", "table"),
    [(PocketSphinxSTT, {"stage": "pocketsphinx-stt"}), (EspeakTTS, {"stage": "espeak-tts"})],
)
async def test_describe_after_exit_keeps_the_engine_version_and_pid(
    cls: type, table: dict[str, str]
) -> None:
    stage = cls(table)
    async with stage:
        live = stage.describe()
    after = stage.describe()
    assert live["engine_version"] and isinstance(live["worker_pid"], int)
    assert after["engine_version"] == live["engine_version"]
    assert after["worker_pid"] == live["worker_pid"]
