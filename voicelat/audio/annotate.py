"""Annotating and checking a directory of recordings (``voicelat fixtures annotate|check``).

Speech bounds come from the same onset rule the turn engine applies to an unannotated clip
(:mod:`voicelat.audio.onset`: the first 10 ms window above -40 dBFS, then its first sample
above that level; the end is the same rule run backwards), so a manifest written here holds the
bounds a run without it would have used, now pinned to the audio by its sha256. On the bundled
fixtures (annotated on the clean signal when they were made) the detected start is within 20 ms
and the end within 41 ms of the annotation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from voicelat.audio.onset import first_audible_sample
from voicelat.audio.wav import PCM, read_wav, write_wav
from voicelat.core.base.errors import AudioError, VoicelatError
from voicelat.files.annotate import ManifestEntry
from voicelat.files.fixtures import MANIFEST, Fixture, load_fixtures

__all__ = [
    "DETECTOR",
    "MIN_TRAILING_MS",
    "OTHER_FORMATS",
    "Annotated",
    "Clip",
    "Finding",
    "annotate_dir",
    "check_dir",
    "clip_warnings",
    "convert_to_wav",
    "measure",
    "wav_files",
]

DETECTOR = "voicelat fixtures annotate: onset detection (10 ms RMS windows above -40 dBFS)"

#: Silence a clip needs after its speech: the bundled pipelines' VAD ends a turn after 500 ms
#: of it (``hangover_ms``), plus a margin for the frame it is detected in. With less, the turn
#: ends at the end of the file instead (flag ``endpoint:end_of_audio``) and endpointing is not
#: what a live caller would get.
MIN_TRAILING_MS = 700

#: Speech closer than this to the first sample suggests a clip cut at its start.
MIN_LEADING_MS = 100


@dataclass(frozen=True)
class Clip:
    """What a WAV holds: its length and where its speech lies (None: nothing audible)."""

    file: str
    rate: int
    duration_ms: int
    speech_start_ms: int | None
    speech_end_ms: int | None
    sha256: str

    @property
    def trailing_ms(self) -> int | None:
        """Silence after the speech."""
        return None if self.speech_end_ms is None else self.duration_ms - self.speech_end_ms


@dataclass(frozen=True)
class Finding:
    """One thing ``fixtures check`` reports about a file (or the manifest)."""

    level: Literal["error", "warning"]
    file: str
    message: str


#: Recordings ``annotate`` reads besides WAV (through soundfile's libsndfile) and converts to
#: a WAV beside them: a run plays WAV.
OTHER_FORMATS = (".flac", ".ogg")


def wav_files(directory: Path) -> list[Path]:
    """The directory's WAV files, sorted by name."""
    return sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav" and p.is_file())


def _other_files(directory: Path) -> list[Path]:
    return sorted(
        p for p in directory.iterdir() if p.suffix.lower() in OTHER_FORMATS and p.is_file()
    )


def convert_to_wav(path: Path) -> Path:
    """Write ``path`` (FLAC or Ogg Vorbis/Opus) as a 16-bit mono WAV beside it, the format a
    run plays; AudioError for a file soundfile cannot decode or when soundfile is missing."""
    try:
        import soundfile
    except ImportError:
        raise AudioError(
            f"reading {path.name} needs the soundfile package (pip install soundfile), or "
            "convert it to WAV first"
        ) from None
    try:
        data, rate = soundfile.read(str(path), dtype="int16", always_2d=True)
    except (RuntimeError, OSError, ValueError) as exc:  # soundfile.LibsndfileError is one
        raise AudioError(f"cannot decode {path.name}: {exc}") from None
    if len(data) == 0:
        raise AudioError(f"{path.name} has no audio (0 frames)")
    mono = data.mean(axis=1).round().astype("int16")  # averaging cannot clip
    out = path.with_suffix(".wav")
    write_wav(out, PCM.from_array(mono, int(rate)))
    return out


@dataclass(frozen=True)
class Annotated:
    """What :func:`annotate_dir` made of a directory."""

    entries: list[ManifestEntry]
    #: The sample rate every entry shares; None when they differ.
    rate: int | None
    #: ``(file, why)`` for each recording that could not be read (skipped, not fatal).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: ``(source, wav)`` for each FLAC/Ogg recording converted to a WAV beside it.
    converted: list[tuple[str, str]] = field(default_factory=list)


def measure(path: Path) -> Clip:
    """Read ``path`` and find its speech bounds (AudioError for a file that is no usable WAV)."""
    data = path.read_bytes()
    pcm = read_wav(path)
    first = first_audible_sample(pcm)
    start = end = None
    if first is not None:
        start = first * 1000 // pcm.rate
        backwards = PCM(pcm.to_array()[::-1].tobytes(), pcm.rate)
        last = first_audible_sample(backwards)
        assert last is not None  # something is audible forwards, so backwards too
        end = -(-(pcm.n_samples - last) * 1000 // pcm.rate)  # ceil: the sample's end
    duration = pcm.n_samples * 1000 // pcm.rate
    return Clip(path.name, pcm.rate, duration, start, end, hashlib.sha256(data).hexdigest())


def clip_warnings(clip: Clip, min_trailing_ms: int = MIN_TRAILING_MS) -> list[str]:
    """What would make this clip a poor fixture, one actionable line each."""
    if clip.speech_start_ms is None:
        return ["no audible speech (nothing above -40 dBFS): is the file silent?"]
    out: list[str] = []
    if clip.speech_start_ms < MIN_LEADING_MS:
        out.append(
            f"speech starts {clip.speech_start_ms} ms into the file: the clip may be cut at its "
            "start; keep some silence before the speech"
        )
    trailing = clip.trailing_ms
    if trailing is not None and trailing < min_trailing_ms:
        out.append(
            f"only {trailing} ms of silence after the speech (a turn needs {min_trailing_ms} ms): "
            "the VAD cannot end the turn before the file ends; pad the clip with silence"
        )
    return out


def annotate_dir(
    directory: Path, texts: Mapping[str, str], min_trailing_ms: int = MIN_TRAILING_MS
) -> Annotated:
    """A manifest entry per recording of ``directory`` (transcripts from ``texts`` by file
    name). FLAC and Ogg files without a WAV of the same name are converted to one first; a
    file that cannot be read is skipped with its reason, the others are still annotated."""
    skipped: list[tuple[str, str]] = []
    converted: list[tuple[str, str]] = []
    wavs = {p.name for p in wav_files(directory)}
    for other in _other_files(directory):
        if other.with_suffix(".wav").name in wavs:
            continue  # the WAV beside it is what a run plays (an earlier conversion)
        try:
            converted.append((other.name, convert_to_wav(other).name))
        except (VoicelatError, OSError) as exc:
            skipped.append((other.name, str(exc)))
    entries: list[ManifestEntry] = []
    rates: set[int] = set()
    for path in wav_files(directory):
        try:
            clip = measure(path)
        except (VoicelatError, OSError) as exc:
            skipped.append((path.name, str(exc)))
            continue
        rates.add(clip.rate)
        entries.append(
            ManifestEntry(
                id=path.stem,
                file=path.name,
                text=texts.get(path.name),
                speech_start_ms=clip.speech_start_ms,
                speech_end_ms=clip.speech_end_ms,
                duration_ms=clip.duration_ms,
                sha256=clip.sha256,
                annotated_by=DETECTOR,
                warnings=tuple(clip_warnings(clip, min_trailing_ms)),
            )
        )
    rate = next(iter(rates)) if len(rates) == 1 else None
    return Annotated(entries, rate, skipped, converted)


def check_dir(
    directory: Path, min_trailing_ms: int = MIN_TRAILING_MS, tolerance_ms: int = 100
) -> tuple[int, list[Finding]]:
    """Check a fixtures directory as ``voicelat run`` will use it: the number of fixtures and
    what is wrong (errors) or doubtful (warnings)."""
    try:
        fixtures = load_fixtures(directory)
    except VoicelatError as exc:
        return 0, [Finding("error", MANIFEST, str(exc))]
    findings: list[Finding] = []
    has_manifest = (directory / MANIFEST).exists()
    if not has_manifest:
        findings.append(
            Finding(
                "warning",
                MANIFEST,
                "none: speech bounds are detected at every run and there are no transcripts "
                "to score; write one with `voicelat fixtures annotate DIR`",
            )
        )
    for fixture in fixtures:
        findings.extend(_check_fixture(fixture, min_trailing_ms, tolerance_ms, has_manifest))
    if has_manifest:
        listed = {f.path.name for f in fixtures}
        for path in wav_files(directory):
            if path.name not in listed:
                findings.append(
                    Finding("warning", path.name, f"not in {MANIFEST}: it is never played")
                )
    return len(fixtures), findings


def _check_fixture(
    fixture: Fixture, min_trailing_ms: int, tolerance_ms: int, has_manifest: bool
) -> list[Finding]:
    name = fixture.path.name
    try:
        clip = measure(fixture.path)
    except (VoicelatError, OSError) as exc:
        return [Finding("error", name, str(exc))]
    start, end = fixture.speech_start_ms, fixture.speech_end_ms
    if end is not None and end > clip.duration_ms:
        return [
            Finding(
                "error",
                name,
                f"speech_end_ms {end} is past the end of the audio ({clip.duration_ms} ms)",
            )
        ]
    out = [Finding("warning", name, w) for w in clip_warnings(_as_annotated(clip, start, end))]
    if clip.speech_start_ms is not None:
        for key, given, found in (
            ("speech_start_ms", start, clip.speech_start_ms),
            ("speech_end_ms", end, clip.speech_end_ms),
        ):
            if given is not None and found is not None and abs(given - found) > tolerance_ms:
                out.append(
                    Finding(
                        "warning",
                        name,
                        f"{key} {given} is {abs(given - found)} ms from the detected {found}: "
                        "check the annotation (or re-annotate)",
                    )
                )
    if has_manifest and not fixture.text:
        out.append(Finding("warning", name, "no transcript (text): accuracy is not scored"))
    return out


def _as_annotated(clip: Clip, start: int | None, end: int | None) -> Clip:
    """The clip with the manifest's bounds where it gives them (they are what a run uses)."""
    if start is None or end is None or clip.speech_start_ms is None:
        return clip
    return Clip(clip.file, clip.rate, clip.duration_ms, start, end, clip.sha256)
