"""Scenario files (files/scenario.py): the bundled ones load, and every mistake is one line
naming the file, the step and what to write (exit 2 from the command line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.scenario import load_scenario, load_scenarios

ROOT = Path(__file__).resolve().parents[2]
CALLS = ROOT / "fixtures" / "calls"


def test_the_bundled_scenarios_load_with_their_fixtures() -> None:
    loaded = {item.scenario.name: item for item in load_scenarios(ROOT / "scenarios")}
    assert set(loaded) == {"backchannel", "booking", "greeting", "interrupt", "short"}
    # Two interruptions in a call; three backchannels and a noise burst in a call.
    assert [s.kind for s in loaded["interrupt"].scenario.overlays] == ["interrupt"] * 2
    kinds = [s.kind for s in loaded["backchannel"].scenario.overlays]
    assert kinds == ["backchannel"] * 3 + ["noise"]
    booking = loaded["booking"].scenario
    assert len(booking.says) == 6 and not booking.greets
    assert loaded["greeting"].scenario.greets
    assert all(f.path.is_file() and f.annotated for f in loaded["booking"].fixtures.values())
    # the caller's voice is not the reply voice (piper joe)
    assert all(not f.voice.startswith("piper") for f in loaded["booking"].fixtures.values())


def _write(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'fixtures = "{CALLS}"\n{body}', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('[[step]]\nsay = "nope"\n', "step 1: no fixture 'nope'"),
        ('[[step]]\nsya = "book_01_dinner"\n', "step 1: unknown key 'sya'"),
        ("[[step]]\ngap_ms = 5\n", "step 1: no step kind"),
        ('[[step]]\nsay = "book_01_dinner"\ngap_ms = -5\n', "gap_ms = -5 is out of range"),
        ('[[step]]\nsay = "book_01_dinner"\ngap_ms = 1e12\n', "out of range"),
        ('[[step]]\nsay = "book_01_dinner"\nsilence = 5\n', "two step kinds"),
        ("[[step]]\nsilence = 0\n", "silence = 0 says nothing"),
        ("[[step]]\nexpect_greeting = true\n", "has no `say` step"),
        ("", "the scenario is empty"),
        ('[[step]]\nsay = "book_01_dinner"\nat_ms = 10\ngap_ms = 5\n', "at_ms is a fixed start"),
        ('wat = 1\n[[step]]\nsay = "book_01_dinner"\n', "unknown key 'wat'"),
        ('on_failure = "panic"\n[[step]]\nsay = "book_01_dinner"\n', "on_failure must be"),
    ],
)
def test_a_bad_scenario_is_one_line_naming_the_step(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_scenario(_write(tmp_path, body))
    assert says in str(err.value)
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_includes_insert_steps_and_a_cycle_is_named(tmp_path: Path) -> None:
    _write(tmp_path, '[[step]]\nsay = "book_06_bye"\n', name="bye.toml")
    main = _write(tmp_path, '[[step]]\nsay = "book_01_dinner"\n[[step]]\ninclude = "bye.toml"\n')
    assert load_scenario(main).scenario.fixture_ids() == ["book_01_dinner", "book_06_bye"]
    (tmp_path / "a.toml").write_text('[[step]]\ninclude = "b.toml"\n', encoding="utf-8")
    (tmp_path / "b.toml").write_text('[[step]]\ninclude = "a.toml"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"includes form a cycle \(a.toml -> b.toml -> a.toml\)"):
        load_scenario(tmp_path / "a.toml")


def test_run_with_a_bad_scenario_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, '[[step]]\nsay = "missing_fixture"\n')
    out = subprocess.run(
        [sys.executable, "-m", "voicelat", "run", "--no-tui", "--scenario", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "no fixture 'missing_fixture'" in errors[0]
    assert "Traceback" not in out.stderr
