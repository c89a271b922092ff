"""Budget files on disk: one ``[budget]`` table, errors that point at the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.judge.budget import Budget, Limit
from voicelat.files.budget import load_budget_file


def test_budget_file_errors_point_at_the_line(tmp_path: Path) -> None:
    f = tmp_path / "budget.toml"
    f.write_text("[budget]\nmin_turns = 3\n\n[budget.llm_ttfb]\np90_ms = 3\n")
    with pytest.raises(ConfigError, match=rf"^{f}:4: \[budget\] llm_ttfb is not a known key"):
        load_budget_file(f)
    f.write_text("[budget]\n[budget.e2e]\np50_ms = 900\np95_ms = 1\n")
    with pytest.raises(ConfigError, match=rf"^{f}:4: \[budget.e2e\] p95_ms"):
        load_budget_file(f)


def test_budget_file_holds_only_a_budget_table(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text('[pipeline]\nname = "x"\n[budget]\nmin_turns = 3\n')
    with pytest.raises(ConfigError, match="unknown top-level key\\(s\\) pipeline"):
        load_budget_file(f)
    f.write_text("min_turns = 3\n")
    with pytest.raises(ConfigError, match="min_turns"):
        load_budget_file(f)
    f.write_text("")
    with pytest.raises(ConfigError, match="no \\[budget\\] table"):
        load_budget_file(f)
    with pytest.raises(ConfigError, match="does not exist"):
        load_budget_file(tmp_path / "missing.toml")
    f.write_text("[budget\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_budget_file(f)


def test_budget_file_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text("[budget]\nmin_turns = 8\nmax_failure_rate = 0.1\n[budget.e2e]\np99_ms = 3000\n")
    b = load_budget_file(f)
    assert b == Budget((Limit("e2e", 99, 3000.0),), 0.1, 8, str(f))
