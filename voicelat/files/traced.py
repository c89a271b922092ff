"""A results directory of traced turns (``voicelat import``): ``turns.jsonl`` and
``summary.json`` as a run writes them, so ``view``, ``ci`` and ``compare`` read it as any run.

The summary's ``pipeline`` is ``traced-<mapping>`` (a baseline of last week's import matches
this week's), it has no fixture set (production calls are not fixtures: two imports compare,
an import and a fixture run do not), and its ``traced`` section says what t=0 and the end are
(:func:`voicelat.core.traces.traced.traced_section`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.summaries.summary import summarize
from voicelat.core.traces.traced import TracedImport, traced_section
from voicelat.files.results import write_summary, write_turns

__all__ = ["write_traced_run"]


def write_traced_run(
    out: Path,
    imported: TracedImport,
    *,
    mapping: str,
    sources: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any],
) -> RunSummary:
    """Write ``imported``'s turns and their summary into ``out`` (checked by the caller:
    :func:`voicelat.files.results.check_out_dir`); returns the summary written."""
    write_turns(out, imported.turns)
    summary = summarize(
        list(imported.turns),
        run=run,
        pipeline={"name": f"traced-{mapping}", "kind": "traced", "mapping": mapping},
        fixtures=(),
        stages={},
    )
    section = traced_section(imported, mapping, sources)
    summary = dataclasses.replace(summary, extra={**summary.extra, "traced": section})
    write_summary(out, summary)
    return summary
