"""A run's scores on disk: ``scores.jsonl``, one line per turn (its cost, reply WER, DNSMOS).

Scores are computed after the run (``voicelat score RUN``, voicelat/score/), never on the
measuring loop, so they live beside ``turns.jsonl`` rather than in it; a rescore rewrites the
file whole (atomically), and the run's ``summary.json`` gets the matching ``cost`` and
``quality`` sections.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import InfraError

SCORES_FILE = "scores.jsonl"
#: Where ``output.save_audio`` puts each turn's reply (engine/turn.py ``default_sink``).
AUDIO_DIR = "audio"


def reply_audio_path(run_dir: Path, index: int, fixture: str) -> Path:
    """The saved reply audio of turn ``index`` (as the simulated sink records it)."""
    return run_dir / AUDIO_DIR / f"turn-{index:04d}-{fixture}.wav"


def write_scores(run_dir: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``scores.jsonl`` atomically, one JSON object per turn."""
    path = run_dir / SCORES_FILE
    tmp = path.with_suffix(".jsonl.tmp")
    try:
        tmp.write_text("".join(json.dumps(dict(r)) + "\n" for r in rows), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InfraError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def read_scores(run_dir: Path) -> dict[int, dict[str, Any]]:
    """The scores of a run by turn index (empty when it was never scored; bad lines skipped)."""
    path = run_dir / SCORES_FILE
    if not path.is_file():
        return {}
    out: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("index"), int):
            out[row["index"]] = row
    return out


__all__ = ["AUDIO_DIR", "SCORES_FILE", "read_scores", "reply_audio_path", "write_scores"]
