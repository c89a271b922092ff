"""`voicelat fixtures annotate|check`: your own recordings get a manifest and a check."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, voicelat, wer
from voicelat.audio.wav import PCM, read_wav, write_wav
from voicelat.files.fixtures import load_fixtures

BUNDLED = ROOT / "fixtures"


def _manifest(directory: Path) -> dict[str, Any]:
    data = json.loads((directory / "manifest.json").read_text())
    assert isinstance(data, dict)
    return data


def _bundled() -> dict[str, dict[str, Any]]:
    return {e["file"]: e for e in _manifest(BUNDLED)["fixtures"]}


def _wavs(tmp_path: Path, names: list[str] | None = None) -> Path:
    out = tmp_path / "mine"
    out.mkdir()
    for wav in sorted(BUNDLED.glob("*.wav")):
        if names is None or wav.stem in names:
            shutil.copy(wav, out / wav.name)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_annotate_writes_a_manifest_run_reads_with_the_detected_bounds(tmp_path: Path) -> None:
    mine = _wavs(tmp_path)
    result = voicelat("fixtures", "annotate", str(mine), "--no-transcribe")
    assert result.returncode == 0, result.stderr
    assert f"wrote {mine / 'manifest.json'}: 14 fixture(s), 0 with warnings" in result.stdout
    truth = _bundled()
    fixtures = load_fixtures(mine)  # what `voicelat run --fixtures DIR` reads
    assert len(fixtures) == 14
    for f in fixtures:
        given = truth[f.path.name]
        assert f.annotated
        assert f.sha256 == given["sha256"]
        # Detected on the final audio vs annotated on the clean signal when it was made.
        assert f.speech_start_ms is not None and f.speech_end_ms is not None
        assert abs(f.speech_start_ms - given["speech_start_ms"]) <= 25, f.id
        assert abs(f.speech_end_ms - given["speech_end_ms"]) <= 45, f.id
    entry = _manifest(mine)["fixtures"][0]
    assert entry["duration_ms"] == truth[entry["file"]]["duration_ms"]
    assert "onset detection" in entry["annotated_by"]


def test_a_clip_without_trailing_silence_is_warned_about(tmp_path: Path) -> None:
    mine = _wavs(tmp_path, ["weather_paris"])
    pcm = read_wav(mine / "weather_paris.wav")
    end = _bundled()["weather_paris.wav"]["speech_end_ms"] + 100  # cut 100 ms after the speech
    write_wav(mine / "cut.wav", PCM(pcm.samples[: end * pcm.rate // 1000 * 2], pcm.rate))
    result = voicelat("fixtures", "annotate", str(mine), "--no-transcribe")
    assert result.returncode == 0, result.stderr
    assert "1 with warnings" in result.stdout
    by_file = {e["file"]: e for e in _manifest(mine)["fixtures"]}
    (warning,) = by_file["cut.wav"]["warnings"]
    assert warning.startswith("only ") and "pad the clip with silence" in warning
    assert "warnings" not in by_file["weather_paris.wav"]
    check = voicelat("fixtures", "check", str(mine))
    assert check.returncode == 0, check.stdout  # a warning is no error
    assert any("cut.wav" in ln and "only 1" in ln for ln in check.stdout.splitlines())
    # ... and two "no transcript" warnings (annotated with --no-transcribe).
    assert "0 error(s), 3 warning(s)" in check.stdout


def test_annotate_keeps_an_existing_manifest_unless_forced_and_keeps_its_texts(
    tmp_path: Path,
) -> None:
    mine = _wavs(tmp_path, ["call_mom"])
    manifest = {"fixtures": [{"file": "call_mom.wav", "text": "Call mom."}]}
    (mine / "manifest.json").write_text(json.dumps(manifest))
    refused = voicelat("fixtures", "annotate", str(mine), "--no-transcribe")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--force" in refused.stderr
    forced = voicelat("fixtures", "annotate", str(mine), "--no-transcribe", "--force")
    assert forced.returncode == 0, forced.stderr
    (entry,) = _manifest(mine)["fixtures"]
    assert entry["text"] == "Call mom."
    assert entry["speech_end_ms"] is not None


def test_check_passes_the_bundled_fixtures() -> None:
    result = voicelat("fixtures", "check", str(BUNDLED))
    assert result.returncode == 0, result.stdout
    assert "14 fixture(s), 0 error(s), 0 warning(s)" in result.stdout


def test_check_reports_errors_and_exits_1(tmp_path: Path) -> None:
    mine = _wavs(tmp_path, ["call_mom", "play_jazz"])
    (mine / "notes.wav").write_bytes(b"RIFF-but-not-really")
    shutil.copy(BUNDLED / "book_table.wav", mine / "unlisted.wav")
    entries = [
        {
            "file": "call_mom.wav",
            "text": "Call mom.",
            "speech_start_ms": 380,
            "speech_end_ms": 9000,
        },
        {
            "file": "play_jazz.wav",
            "text": "Play jazz.",
            "speech_start_ms": 590,
            "speech_end_ms": 1200,
        },
        {"file": "notes.wav", "text": "x"},
    ]
    (mine / "manifest.json").write_text(json.dumps({"fixtures": entries}))
    result = voicelat("fixtures", "check", str(mine))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any("error" in ln and "call_mom.wav" in ln and "past the end" in ln for ln in lines)
    assert any("error" in ln and "notes.wav" in ln for ln in lines)
    # 1200 is far from where play_jazz's speech really ends (about 2440 ms).
    assert any("warning" in ln and "speech_end_ms 1200" in ln for ln in lines)
    assert any("warning" in ln and "unlisted.wav" in ln and "never played" in ln for ln in lines)
    assert "FAILED" in lines[-1] and "2 error(s)" in lines[-1]
    assert "Traceback" not in result.stderr


def test_check_of_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = voicelat("fixtures", "check", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.startswith("voicelat: error: ") and result.stderr.count("\n") == 1


def test_transcribe_without_the_stack_is_one_line_exit_3(tmp_path: Path) -> None:
    mine = _wavs(tmp_path, ["call_mom"])
    env = {"VOICELAT_STT_PORT": str(_free_port())}  # nothing listens there
    result = voicelat("fixtures", "annotate", str(mine), "--transcribe", env=env)
    assert result.returncode == 3
    assert "voicelat stack up" in result.stderr and result.stderr.count("\n") == 1
    assert not (mine / "manifest.json").exists()
    # Without --transcribe it goes on without transcripts and says so.
    result = voicelat("fixtures", "annotate", str(mine), env=env)
    assert result.returncode == 0, result.stderr
    assert "transcripts: none" in result.stderr
    assert _manifest(mine)["fixtures"][0]["text"] is None


@pytest.mark.e2e
@pytest.mark.stack
def test_annotate_transcribes_with_the_stacks_whisper(
    tmp_path: Path, local_stack: dict[str, Any]
) -> None:
    names = ["weather_paris", "timer_ten_minutes", "call_mom"]
    mine = _wavs(tmp_path, names)
    result = voicelat("fixtures", "annotate", str(mine), env=local_stack["env"])
    assert result.returncode == 0, result.stderr
    truth = _bundled()
    for entry in _manifest(mine)["fixtures"]:
        assert entry["text"], entry
        assert wer(truth[entry["file"]]["text"], entry["text"]) <= 0.2, entry["text"]
        # Issue #29: Whisper's text is a guess, marked as one, not an unmarked reference.
        assert entry["text_by"].startswith("whisper (a guess"), entry
    assert "transcript(s) are Whisper's guesses" in result.stdout


def test_annotate_reads_flac_and_ogg_and_skips_a_bad_file(tmp_path: Path) -> None:
    # Issue #29: .flac/.ogg were skipped silently and one unreadable file aborted the lot.
    import numpy as np
    import soundfile

    mine = _wavs(tmp_path, ["call_mom"])
    for name, fmt in (("weather_paris", "FLAC"), ("book_table", "OGG")):
        pcm = read_wav(BUNDLED / f"{name}.wav")
        soundfile.write(str(mine / f"{name}.{fmt.lower()}"), pcm.to_array(), pcm.rate, format=fmt)
    (mine / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    result = voicelat("fixtures", "annotate", str(mine), "--no-transcribe")
    assert result.returncode == 0, result.stderr
    assert "converted weather_paris.flac -> weather_paris.wav" in result.stdout
    assert "converted book_table.ogg -> book_table.wav" in result.stdout
    assert "skipped broken.wav: " in result.stdout
    assert "3 fixture(s)" in result.stdout and "1 unreadable file(s) skipped" in result.stdout
    fixtures = {f.id: f for f in load_fixtures(mine)}  # what a run reads
    assert sorted(fixtures) == ["book_table", "call_mom", "weather_paris"]
    truth = _bundled()
    # FLAC is lossless: the same samples, the same bounds as the bundled WAV's.
    flac = fixtures["weather_paris"]
    assert flac.speech_start_ms is not None and flac.speech_end_ms is not None
    assert abs(flac.speech_start_ms - truth["weather_paris.wav"]["speech_start_ms"]) <= 25
    assert np.array_equal(
        read_wav(mine / "weather_paris.wav").to_array(),
        read_wav(BUNDLED / "weather_paris.wav").to_array(),
    )
    ogg = fixtures["book_table"]  # lossy, but the speech is still where it was
    assert ogg.speech_end_ms is not None
    assert abs(ogg.speech_end_ms - truth["book_table.wav"]["speech_end_ms"]) <= 60
