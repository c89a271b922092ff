"""What the call tests share: the call fixtures, and the OpenAI emulator's exact profile that
recognises them (its STT answers their manifest transcripts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CALLS = ROOT / "fixtures" / "calls"
MS = 1_000_000


def openai_profile(reply: str = "Sure.", leading_silence_ms: float = 30.0) -> dict[str, Any]:
    """Fixed, small delays; the TTS answers a tone after ``leading_silence_ms`` of silence."""
    return {
        "openai": {
            "latency": {"headers": 5, "ttft": 40, "token": 5, "stt_first": 20, "stt_final": 40,
                        "tts_first_audio": 30, "tts_chunk": 5},
            "content": {"leading_silence_ms": leading_silence_ms, "reply": reply,
                        "ms_per_char": 10.0, "fixtures": str(CALLS)},
        }
    }  # fmt: skip
