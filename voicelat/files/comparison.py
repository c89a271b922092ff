"""A comparison directory read back (``voicelat compare`` wrote it): ``comparison.json`` and
the turns of each combination's run directory, for ``voicelat view``, the reports and the TUI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base import jsontext
from voicelat.core.base.errors import VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.files.results import load_run

__all__ = ["COMPARISON_JSON", "LoadedComparison", "is_comparison", "load_comparison"]

COMPARISON_JSON = "comparison.json"


@dataclass(frozen=True)
class LoadedComparison:
    """A comparison directory read back: ``comparison.json`` and each combination's turns."""

    path: Path
    doc: dict[str, Any]
    #: Combination name -> its turns, for each run directory that could be read.
    runs: dict[str, Sequence[Turn]] = field(default_factory=dict)
    #: Combinations whose run directory could not be read, with why.
    missing: dict[str, str] = field(default_factory=dict)


def is_comparison(path: Path) -> bool:
    """Whether ``path`` is a comparison directory (or its ``comparison.json``)."""
    return path.name == COMPARISON_JSON or (path / COMPARISON_JSON).is_file()


def load_comparison(path: Path) -> LoadedComparison:
    """Read ``comparison.json`` and the turns of every combination's run directory.

    A live comparison records each run directory by name inside the comparison directory; a
    comparison of saved runs records the paths it was given: both are looked for.
    """
    base = path.parent if path.name == COMPARISON_JSON else path
    doc_path = base / COMPARISON_JSON
    try:
        doc = jsontext.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VoicelatError(f"{doc_path} is not readable JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != "voicelat-comparison":
        raise VoicelatError(
            f"{doc_path} is not a voicelat comparison (no kind: voicelat-comparison)"
        )
    combos = doc.get("combinations")
    if not isinstance(combos, list) or not all(isinstance(c, dict) and "name" in c for c in combos):
        raise VoicelatError(f"{doc_path} is damaged: its combinations are not a list of tables")
    runs: dict[str, Sequence[Turn]] = {}
    missing: dict[str, str] = {}
    for c in combos:
        name, where = str(c["name"]), str(c.get("run_dir") or "")
        candidates = [base / where, Path(where)] if where else []
        found = next((d for d in candidates if (d / "turns.jsonl").is_file()), None)
        if found is None:
            missing[name] = f"no turns.jsonl at {where or '(no run_dir recorded)'}"
            continue
        try:
            runs[name] = load_run(found).turns
        except VoicelatError as exc:
            missing[name] = str(exc)
    return LoadedComparison(base, doc, runs, missing)
