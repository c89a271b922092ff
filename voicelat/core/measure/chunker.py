"""Splits streamed LLM text into speakable pieces for TTS (sentence or clause boundaries).

Sans-I/O. Its wait is the ``aggregation`` segment: from the first content token to the first
piece handed to TTS.
"""

from __future__ import annotations

import re
from typing import Literal

ChunkMode = Literal["sentence", "clause", "token"]

# A boundary followed by whitespace, or at the very end of what has streamed so far: waiting
# for the next token to confirm a sentence end would add one token time to every turn.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*(?=\s|$)")
_CLAUSE_END = re.compile(r"([.!?…]+[\"')\]]*|[,;:—])(?=\s|$)")
# Abbreviations that end in a dot without ending a sentence.
_ABBREV = ("mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "e.g.", "i.e.", "etc.", "no.")


class Chunker:
    """Buffers deltas; :meth:`feed` returns pieces that end on a boundary, :meth:`flush` the rest.

    ``min_chars``: a boundary closer than this to the start of the buffer is not used (avoids
    sending "Hi," alone when a clause mode is chosen).
    """

    def __init__(self, mode: ChunkMode = "sentence", min_chars: int = 1) -> None:
        if mode not in ("sentence", "clause", "token"):
            raise ValueError(f"chunker mode must be sentence, clause or token, not {mode!r}")
        self.mode = mode
        self.min_chars = max(1, min_chars)
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        if not text:
            return []
        if self.mode == "token":
            return [text]
        self._buf += text
        pattern = _SENTENCE_END if self.mode == "sentence" else _CLAUSE_END
        out: list[str] = []
        while True:
            cut = self._find_cut(pattern)
            if cut is None:
                break
            piece, self._buf = self._buf[:cut], self._buf[cut:]
            if piece.strip():
                out.append(piece)
        return out

    def flush(self) -> list[str]:
        rest, self._buf = self._buf, ""
        return [rest] if rest.strip() else []

    def _find_cut(self, pattern: re.Pattern[str]) -> int | None:
        for m in pattern.finditer(self._buf):
            end = m.end()
            if len(self._buf[:end].strip()) < self.min_chars:
                continue
            words = self._buf[:end].split()
            if words and words[-1].lower() in _ABBREV:
                # "no." abbreviates a number only before one ("No. 5"); "No. I can't." ends.
                after = self._buf[end:].lstrip()
                if words[-1].lower() != "no." or not after or after[0].isdigit():
                    continue
            if end == len(self._buf) and m.start() > 0 and self._buf[m.start() - 1].isdigit():
                # "3." may continue as "3.5": wait for the next token.
                continue
            return end
        return None
