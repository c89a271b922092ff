"""What a run with a simulated caller refuses, in one line and before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelat.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _caller(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text('[caller]\npersona = "You are Sam."\n', encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--workers", "2"], "--workers with a simulated caller"),
    ],
)  # fmt: skip
def test_refused_with_a_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    code = main([*argv, "--scenario", str(_caller(tmp_path)), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and says in err[-1], err
    assert not (tmp_path / "out").exists()


def test_frozen_without_a_caller_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--scenario", str(ROOT / "scenarios" / "short.toml"), "--frozen",
                 str(tmp_path), "-o", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    assert "no scenario has a [caller]" in capsys.readouterr().err
