"""The user docs cite only files a clone has (issue 18: DESIGN.md, PROTOCOLS.md, "issue 8").

README.md, docs/*.md and the example's README may name other Markdown files, repository paths
(`voicelat/...`, `tests/...`, ...) and links; each must exist in the repository. Issue numbers
mean nothing to a reader of a clone: the docs say what they mean instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *ROOT.glob("examples/*/*.md")])
TOP = ("voicelat", "tests", "bench", "docs", "pipelines", "fixtures", "examples", "scripts")
#: Names of files a run or the user writes, not files of the repository.
WRITTEN = {
    "report.md",
    "comparison.md",
    "endpointing.md",
    "manifest.json",
    "summary.json",
    "turns.jsonl",
}


def _exists(doc: Path, ref: str) -> bool:
    ref = ref.split("#", 1)[0].rstrip("/.,")
    if not ref or Path(ref).name in WRITTEN or "<" in ref or "*" in ref:
        return True
    return any((base / ref).exists() for base in (doc.parent, ROOT, ROOT / "docs"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_file_is_in_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    cited = set(re.findall(r"\]\(([^)\s]+)\)", text))  # Markdown links
    cited = {c for c in cited if not re.match(r"[a-z]+:", c)}  # not URLs
    cited |= set(re.findall(r"(?<![\w/.-])([\w./-]*[A-Za-z0-9_-]\.md)\b", text))
    cited |= {p for p in re.findall(r"`([\w./-]+)`", text) if p.split("/")[0] in TOP and "/" in p}
    missing = sorted(c for c in cited if not _exists(doc, c))
    assert not missing, f"{doc.name} cites files not in the repository: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers(doc: Path) -> None:
    found = re.findall(r"\bissues? #?\d+", doc.read_text(encoding="utf-8"), re.I)
    assert not found, f"{doc.name} cites {found}: say what the issue was about instead"
