"""Writing a fixture manifest: the entries ``voicelat fixtures annotate`` found, as JSON.

The manifest has the format :func:`voicelat.files.fixtures.load_fixtures` reads (the bundled
``fixtures/manifest.json``): ``version``, then one entry per WAV with its transcript, its speech
bounds in ms from the first sample, its duration and the sha256 of the audio the bounds were
found on (a changed file is then refused instead of silently shifting every e2e). Entries also
say how they were annotated and what looked wrong (``warnings``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base import jsontext
from voicelat.core.base.errors import ConfigError
from voicelat.files.fixtures import MANIFEST

__all__ = ["WHISPER_GUESS", "ManifestEntry", "existing_guesses", "existing_texts", "write_manifest"]

MANIFEST_VERSION = 1

#: ``text_by`` of a transcript Whisper wrote: a guess, not a reference, until someone checks it
#: (and deletes the key). Accuracy scored against a guess measures agreement with Whisper.
WHISPER_GUESS = "whisper (a guess: check the text, then delete this key)"


@dataclass(frozen=True)
class ManifestEntry:
    """One fixture of a manifest: ``file`` relative to the manifest's directory."""

    id: str
    file: str
    text: str | None
    speech_start_ms: int | None
    speech_end_ms: int | None
    duration_ms: int
    sha256: str
    annotated_by: str = "voicelat fixtures annotate"
    warnings: tuple[str, ...] = field(default=())
    #: Who wrote ``text`` when it is not a checked reference (:data:`WHISPER_GUESS`).
    text_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "file": self.file,
            "text": self.text,
            "speech_start_ms": self.speech_start_ms,
            "speech_end_ms": self.speech_end_ms,
            "duration_ms": self.duration_ms,
            "sha256": self.sha256,
            "annotated_by": self.annotated_by,
        }
        if self.text_by is not None and self.text is not None:
            out["text_by"] = self.text_by
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def write_manifest(directory: Path, entries: list[ManifestEntry], *, rate: int | None) -> Path:
    """Write ``directory/manifest.json`` atomically (a reader never sees half a file)."""
    doc: dict[str, Any] = {"version": MANIFEST_VERSION}
    if rate is not None:
        doc["sample_rate"] = rate
    doc["fixtures"] = [e.to_json() for e in entries]
    path = directory / MANIFEST
    tmp = directory / f".{MANIFEST}.tmp"
    try:
        tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
    return path


def existing_texts(directory: Path) -> dict[str, str]:
    """Transcripts of an existing manifest by file name (kept when it is re-annotated);
    empty when there is none or it cannot be read."""
    try:
        data = jsontext.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entries = data.get("fixtures") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            file, text = entry.get("file"), entry.get("text")
            if isinstance(file, str) and isinstance(text, str) and text:
                out[file] = text
    return out


def existing_guesses(directory: Path) -> set[str]:
    """File names whose transcript in the existing manifest is still marked as a guess
    (``text_by`` present): re-annotating keeps the mark."""
    try:
        data = jsontext.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    entries = data.get("fixtures") if isinstance(data, dict) else None
    return {
        str(e["file"])
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict) and isinstance(e.get("file"), str) and e.get("text_by")
    }
