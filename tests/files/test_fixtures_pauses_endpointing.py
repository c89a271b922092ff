"""The optional ``pauses`` field of a fixture manifest, and the bundled pause fixtures."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.fixtures import load_fixtures

PAUSES = Path(__file__).resolve().parents[2] / "fixtures" / "pauses"


def _write(tmp_path: Path, pauses: object) -> Path:
    with wave.open(str(tmp_path / "a.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(bytes(3200))
    entry = {"file": "a.wav", "speech_start_ms": 10, "speech_end_ms": 90, "pauses": pauses}
    (tmp_path / "manifest.json").write_text(json.dumps({"fixtures": [entry]}))
    return tmp_path


def test_bundled_pause_set_has_pauses_and_controls() -> None:
    fixtures = load_fixtures(PAUSES)
    assert len(fixtures) == 12
    with_pauses = [f for f in fixtures if f.pauses]
    controls = [f for f in fixtures if f.pauses == ()]
    assert len(with_pauses) == 9 and len(controls) == 3
    lengths = [b - a for f in with_pauses for a, b in f.pauses or ()]
    assert min(lengths) >= 250 and max(lengths) <= 1200
    assert len({f.voice for f in fixtures}) >= 3
    for f in with_pauses:
        assert f.speech_start_ms is not None and f.speech_end_ms is not None
        assert all(f.speech_start_ms < a < b < f.speech_end_ms for a, b in f.pauses or ())
        assert f.to_json()["pauses"][0]["start_ms"] == (f.pauses or ())[0][0]


def test_first_set_has_no_pause_field() -> None:
    fixtures = load_fixtures(PAUSES.parent)
    assert all(f.pauses is None for f in fixtures)
    assert "pauses" not in fixtures[0].to_json()


def test_pauses_read(tmp_path: Path) -> None:
    (fx,) = load_fixtures(_write(tmp_path, [{"start_ms": 20, "end_ms": 40}]))
    assert fx.pauses == ((20, 40),)


@pytest.mark.parametrize(
    ("pauses", "message"),
    [
        ("20-40", "must be a list"),
        ([{"start_ms": 40, "end_ms": 20}], "start_ms < end_ms"),
        ([{"start_ms": True, "end_ms": 20}], "start_ms < end_ms"),
        ([{"start_ms": 5, "end_ms": 20}], "inside the speech"),
        ([{"start_ms": 20, "end_ms": 95}], "inside the speech"),
        ([{"start_ms": 30, "end_ms": 40}, {"start_ms": 35, "end_ms": 50}], "after the previous"),
    ],
)
def test_bad_pauses_are_one_line(tmp_path: Path, pauses: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_fixtures(_write(tmp_path, pauses))
    assert "\n" not in str(err.value)
