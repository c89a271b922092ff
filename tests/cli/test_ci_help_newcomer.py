"""`voicelat ci --help` describes ci, not run (issue 18)."""

from __future__ import annotations

from tests.helpers import voicelat


def test_ci_help_hides_run_only_options_and_names_its_own_default_directory() -> None:
    ci = voicelat("ci", "--help")
    assert ci.returncode == 0
    assert "--tui" not in ci.stdout  # ci never opens the TUI
    assert "runs/<time>-<pipeline>-ci" in " ".join(ci.stdout.split())
    run = voicelat("run", "--help").stdout
    assert "--tui" in run and "-ci)" not in run  # run's own help is unchanged
