"""load_fixtures: the bundled manifest, a bare directory of WAVs, and manifest mistakes."""

from __future__ import annotations

import hashlib
import json
import wave
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.fixtures import default_fixtures_dir, fixture_set_hash, load_fixtures

BUNDLED = Path(__file__).resolve().parents[2] / "fixtures"


def make_wav(path: Path, ms: int = 100) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(b"\x00\x00" * (16 * ms))
    return path


def test_bundled_fixtures_load_in_manifest_order() -> None:
    assert default_fixtures_dir().resolve() == BUNDLED.resolve()
    manifest = json.loads((BUNDLED / "manifest.json").read_text())
    fixtures = load_fixtures(BUNDLED)
    assert [f.id for f in fixtures] == [e["id"] for e in manifest["fixtures"]]
    assert len(fixtures) >= 10
    for f, entry in zip(fixtures, manifest["fixtures"], strict=True):
        assert f.path == BUNDLED / entry["file"] and f.path.exists()
        assert f.text == entry["text"]
        assert f.annotated
        assert f.speech_start_ms == entry["speech_start_ms"]
        assert f.speech_end_ms == entry["speech_end_ms"]
        assert 0 <= f.speech_start_ms < f.speech_end_ms  # type: ignore[operator]
        assert f.sha256 == hashlib.sha256(f.path.read_bytes()).hexdigest()
        assert f.sha256 == entry["sha256"]  # the manifest describes these very files
        assert f.to_json()["file"] == entry["file"]


def test_directory_of_wavs_without_manifest(tmp_path: Path) -> None:
    make_wav(tmp_path / "b.wav")
    make_wav(tmp_path / "a.WAV")
    (tmp_path / "notes.txt").write_text("not audio")
    fixtures = load_fixtures(tmp_path)
    assert [f.id for f in fixtures] == ["a", "b"]
    assert all(not f.annotated and f.speech_end_ms is None and f.text is None for f in fixtures)


def test_single_wav_file(tmp_path: Path) -> None:
    path = make_wav(tmp_path / "one.wav")
    (f,) = load_fixtures(path)
    assert f.id == "one" and f.path == path and not f.annotated


def test_empty_directory_and_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no \.wav files"):
        load_fixtures(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_fixtures(tmp_path / "nope")


def write_manifest(tmp_path: Path, entries: list[dict[str, object]]) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"fixtures": entries}))


def test_manifest_naming_a_missing_file(tmp_path: Path) -> None:
    make_wav(tmp_path / "here.wav")
    write_manifest(tmp_path, [{"file": "here.wav"}, {"file": "gone.wav", "id": "g"}])
    with pytest.raises(ConfigError, match=r"fixtures\[1\] names gone\.wav, which does not exist"):
        load_fixtures(tmp_path)


def test_manifest_without_annotations_and_with_ids(tmp_path: Path) -> None:
    make_wav(tmp_path / "x.wav")
    make_wav(tmp_path / "y.wav")
    write_manifest(
        tmp_path,
        [
            {"file": "y.wav", "id": "why", "speech_start_ms": 10, "speech_end_ms": 90, "text": "y"},
            {"file": "x.wav", "speech_start_ms": 10},
        ],
    )
    why, x = load_fixtures(tmp_path)
    assert (why.id, why.annotated, why.text) == ("why", True, "y")
    assert (x.id, x.annotated, x.speech_start_ms, x.speech_end_ms) == ("x", False, 10, None)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "non-empty"),
        ([{"id": "a"}], r'fixtures\[0\] needs a "file"'),
        ([{"file": "a.wav"}, {"file": "a.wav"}], "appears twice"),
        ([{"file": "a.wav", "speech_end_ms": -5}], "non-negative integer"),
        ([{"file": "a.wav", "speech_end_ms": 1.5}], "non-negative integer"),
        ([{"file": "a.wav", "speech_start_ms": 50, "speech_end_ms": 50}], "after speech_start_ms"),
    ],
)
def test_bad_manifests(tmp_path: Path, entries: list[dict[str, object]], message: str) -> None:
    make_wav(tmp_path / "a.wav")
    write_manifest(tmp_path, entries)
    with pytest.raises(ConfigError, match=message):
        load_fixtures(tmp_path)


def test_manifest_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ConfigError, match="not readable JSON"):
        load_fixtures(tmp_path)


def test_fixture_set_hash_depends_on_content_not_order(tmp_path: Path) -> None:
    make_wav(tmp_path / "a.wav", 100)
    make_wav(tmp_path / "b.wav", 200)
    fixtures = load_fixtures(tmp_path)
    h = fixture_set_hash(fixtures)
    assert fixture_set_hash(list(reversed(fixtures))) == h
    make_wav(tmp_path / "b.wav", 300)
    assert fixture_set_hash(load_fixtures(tmp_path)) != h
