"""The simulated caller's clip cache: each rendered line once on disk, by (voice, text) hash.

Layout: ``DIR/<key[:2]>/<key>.wav`` (16-bit mono PCM, the shaped clip of
:func:`voicelat.audio.clip.shape_clip`) and ``<key>.json`` beside it (the text, the voice, the
clip's sha256 and its speech bounds). Both are written to a temporary name and renamed into
place (the JSON last), so a crash never leaves a half entry that looks whole. An entry whose
JSON does not parse, whose WAV is missing or whose bytes do not match the recorded sha256 is
corrupt: :meth:`ClipCache.load` says why and the caller renders the line again (and the new
entry replaces it). Blocking file I/O: call these from a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.audio.clip import Clip
from voicelat.audio.wav import read_wav, write_wav
from voicelat.core.base.errors import AudioError

__all__ = ["CachedClip", "ClipCache", "CorruptEntry"]


class CorruptEntry(Exception):
    """A cache entry that cannot be trusted; ``str()`` says why."""


@dataclass(frozen=True)
class CachedClip:
    """A clip in the cache: its WAV, the sha256 of the WAV's bytes and its speech bounds."""

    key: str
    path: Path
    sha256: str
    speech_start_ms: int
    speech_end_ms: int
    text: str


@dataclass(frozen=True)
class ClipCache:
    """The cache in ``root`` (created on the first store)."""

    root: Path

    def _paths(self, key: str) -> tuple[Path, Path]:
        folder = self.root / key[:2]
        return folder / f"{key}.wav", folder / f"{key}.json"

    def load(self, key: str) -> CachedClip | None:
        """The entry for ``key``; None when there is none; :class:`CorruptEntry` when there
        is one that cannot be used."""
        wav, meta = self._paths(key)
        if not meta.exists():
            return None
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
            sha, start, end = doc["sha256"], doc["speech_start_ms"], doc["speech_end_ms"]
            text = doc["text"]
            if not (isinstance(start, int) and isinstance(end, int) and isinstance(sha, str)):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError):
            raise CorruptEntry(f"{meta}: unreadable entry") from None
        try:
            data = wav.read_bytes()
        except OSError:
            raise CorruptEntry(f"{wav}: missing audio") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise CorruptEntry(f"{wav}: its bytes do not match the recorded sha256")
        try:
            read_wav(wav)
        except AudioError as exc:
            raise CorruptEntry(f"{wav}: {exc}") from None
        return CachedClip(key, wav, sha, start, end, str(text))

    def store(self, key: str, clip: Clip, text: str, voice: Mapping[str, Any]) -> CachedClip:
        """Write ``clip`` as ``key``'s entry (replacing any), atomically; returns it."""
        wav, meta = self._paths(key)
        wav.parent.mkdir(parents=True, exist_ok=True)
        # A name no other writer uses (another process, another thread) until the rename.
        token = f"{os.getpid()}.{secrets.token_hex(4)}"
        tmp_wav = wav.with_name(f".{wav.name}.{token}.tmp")
        tmp_meta = meta.with_name(f".{meta.name}.{token}.tmp")
        try:
            write_wav(tmp_wav, clip.pcm)
            sha = hashlib.sha256(tmp_wav.read_bytes()).hexdigest()
            doc = {
                "text": text,
                "voice": {k: str(v) for k, v in voice.items() if "key" not in k},
                "sha256": sha,
                "rate": clip.pcm.rate,
                "speech_start_ms": clip.speech_start_ms,
                "speech_end_ms": clip.speech_end_ms,
            }
            tmp_meta.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp_wav, wav)
            os.replace(tmp_meta, meta)
        finally:
            for tmp in (tmp_wav, tmp_meta):
                with contextlib.suppress(OSError):
                    tmp.unlink()
        return CachedClip(key, wav, sha, clip.speech_start_ms, clip.speech_end_ms, text)
