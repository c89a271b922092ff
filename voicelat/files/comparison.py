"""A comparison directory (``voicelat compare`` wrote it): ``comparison.json`` written and read
back, typed (core/judge/comparison_doc.py: the one place it is JSON), and the turns of each
combination's run directory, for ``voicelat view``, the reports and the TUI."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base import jsontext
from voicelat.core.base.errors import InfraError, VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.comparison_doc import ComparisonDoc
from voicelat.files.results import load_run

__all__ = [
    "COMPARISON_JSON",
    "LoadedComparison",
    "is_comparison",
    "load_comparison",
    "read_comparison",
    "write_comparison",
]

COMPARISON_JSON = "comparison.json"


@dataclass(frozen=True)
class LoadedComparison:
    """A comparison directory read back: ``comparison.json`` and each combination's turns."""

    path: Path
    comparison: ComparisonDoc
    #: Combination name -> its turns, for each run directory that could be read.
    runs: dict[str, Sequence[Turn]] = field(default_factory=dict)
    #: Combinations whose run directory could not be read, with why.
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def doc(self) -> dict[str, Any]:
        """The document's JSON shape, as the reports and the TUI render it."""
        return self.comparison.to_json()


def write_comparison(out_dir: Path, doc: ComparisonDoc) -> Path:
    """Write ``OUT/comparison.json`` atomically (a crash never leaves half a document)."""
    path = out_dir / COMPARISON_JSON
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc.to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise InfraError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def read_comparison(path: Path) -> ComparisonDoc:
    """``comparison.json`` (or the directory holding it), typed; one line when it is not
    readable JSON or not a voicelat comparison."""
    doc_path = path if path.name == COMPARISON_JSON else path / COMPARISON_JSON
    try:
        data = jsontext.loads(doc_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VoicelatError(f"{doc_path} is not readable JSON ({exc})") from None
    try:
        return ComparisonDoc.from_json(data)
    except ValueError as exc:
        raise VoicelatError(f"{doc_path} is {exc}") from None


def is_comparison(path: Path) -> bool:
    """Whether ``path`` is a comparison directory (or its ``comparison.json``)."""
    return path.name == COMPARISON_JSON or (path / COMPARISON_JSON).is_file()


def load_comparison(path: Path) -> LoadedComparison:
    """Read ``comparison.json`` and the turns of every combination's run directory.

    A live comparison records each run directory by name inside the comparison directory; a
    comparison of saved runs records the paths it was given: both are looked for.
    """
    base = path.parent if path.name == COMPARISON_JSON else path
    doc = read_comparison(base)
    runs: dict[str, Sequence[Turn]] = {}
    missing: dict[str, str] = {}
    for c in doc.combinations:
        name, where = c.name, c.run_dir
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
