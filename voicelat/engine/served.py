"""Stages pointed at the emulators ``voicelat serve`` really listens on.

An emulated pipeline names an emulator's default address (``127.0.0.1:8401``); when another
process held that port, the running ``voicelat serve`` took a free one and says where it is
instead (:mod:`voicelat.emulate.served`), and the run follows it, saying so. A pipeline naming
any other address is left as it is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from voicelat.emulate.served import served_moves
from voicelat.engine.progress import Progress, no_progress
from voicelat.files.pipeline import Pipeline

__all__ = ["with_served_emulators"]

_TABLES = ("stt", "llm", "tts", "s2s", "agent")
_URL_KEYS = ("url", "base_url")


def with_served_emulators(pipeline: Pipeline, progress: Progress = no_progress) -> Pipeline:
    """``pipeline`` with each stage address a running ``voicelat serve`` stands in for
    replaced by the address it serves on (the pipeline itself when none does)."""
    moves = served_moves()
    if not moves:
        return pipeline
    changes: dict[str, Any] = {}
    for kind in _TABLES:
        table = getattr(pipeline, kind, None)
        if not table:
            continue
        for key in _URL_KEYS:
            url = table.get(key)
            if not isinstance(url, str):
                continue
            parts = urlsplit(url)
            moved = moves.get(parts.netloc)
            if moved is None:
                continue
            new = changes.get(kind) or table.copy()  # a StageTable keeps its file and lines
            new[key] = urlunsplit(parts._replace(netloc=moved))
            changes[kind] = new
            progress(f"[{kind}] {key}: {parts.netloc} -> {moved} (where voicelat serve listens)")
    return replace(pipeline, **changes) if changes else pipeline
