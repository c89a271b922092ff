"""Audio fixtures: a directory of WAV files and a manifest with transcripts and ground truth.

``manifest.json`` gives, per fixture, its transcript and the annotated ``speech_start_ms`` /
``speech_end_ms`` (t=0 of the turn is ``speech_end``). A directory without a manifest still works:
each WAV's speech bounds are then found by onset detection and marked as not annotated.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.base import jsontext
from voicelat.core.base.errors import ConfigError

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Fixture:
    """One recorded request: where its WAV is and where its speech lies."""

    id: str
    path: Path
    text: str | None
    speech_start_ms: int | None
    speech_end_ms: int | None
    sha256: str
    voice: str | None = None
    annotated: bool = True
    #: Annotated mid-utterance pauses, ``(start_ms, end_ms)`` half-open, in order; ``()`` for a
    #: fixture annotated as having none (a control), ``None`` when the manifest says nothing.
    pauses: tuple[tuple[int, int], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "file": self.path.name,
            "text": self.text,
            "speech_start_ms": self.speech_start_ms,
            "speech_end_ms": self.speech_end_ms,
            "sha256": self.sha256,
            "voice": self.voice,
            "annotated": self.annotated,
        }
        if self.pauses is not None:
            out["pauses"] = [{"start_ms": a, "end_ms": b} for a, b in self.pauses]
        return out


def default_fixtures_dir() -> Path:
    """The fixtures bundled with voicelat."""
    here = Path(__file__).resolve().parent.parent  # the package root (voicelat/)
    for candidate in (here / "data" / "fixtures", here.parent / "fixtures"):
        if (candidate / MANIFEST).exists():
            return candidate
    raise ConfigError("the bundled fixtures are missing from this installation: reinstall voicelat")


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"cannot read fixture {path}: {exc.strerror}") from None


def load_fixtures(directory: Path) -> list[Fixture]:
    """The fixtures of a directory (manifest order), or its WAV files when it has no manifest."""
    if directory.is_file() and directory.suffix.lower() == ".wav":
        return [
            Fixture(
                directory.stem, directory, None, None, None, _sha256(directory), annotated=False
            )
        ]
    if not directory.is_dir():
        raise ConfigError(f"fixtures directory {directory} does not exist: give --fixtures DIR")
    manifest = directory / MANIFEST
    if not manifest.exists():
        wavs = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav")
        if not wavs:
            raise ConfigError(f"{directory} holds no .wav files and no {MANIFEST}")
        return [Fixture(p.stem, p, None, None, None, _sha256(p), annotated=False) for p in wavs]
    try:
        data = jsontext.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{manifest} is not readable JSON ({exc})") from None
    entries = data.get("fixtures") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f'{manifest} needs a non-empty "fixtures" list')
    out: list[Fixture] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise ConfigError(f'{manifest}: fixtures[{i}] needs a "file"')
        path = directory / entry["file"]
        if not path.exists():
            raise ConfigError(
                f"{manifest}: fixtures[{i}] names {entry['file']}, which does not exist"
            )
        fid = str(entry.get("id") or path.stem)
        if fid in seen:
            raise ConfigError(f"{manifest}: fixture id {fid!r} appears twice")
        seen.add(fid)
        start, end = entry.get("speech_start_ms"), entry.get("speech_end_ms")
        for key, value in (("speech_start_ms", start), ("speech_end_ms", end)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ConfigError(
                    f"{manifest}: fixtures[{i}] {key} must be a non-negative integer (ms)"
                )
        if start is not None and end is not None and end <= start:
            raise ConfigError(
                f"{manifest}: fixtures[{i}] speech_end_ms must be after speech_start_ms"
            )
        digest = _sha256(path)
        pinned = entry.get("sha256")
        if isinstance(pinned, str) and pinned and pinned.lower() != digest:
            # The annotations belong to the audio they were made on: a changed file with stale
            # speech_end_ms would silently shift every e2e.
            raise ConfigError(
                f"{manifest}: {entry['file']} changed since it was annotated (sha256 differs): "
                "re-annotate it and update its sha256, or remove the sha256 to accept it as is"
            )
        out.append(
            Fixture(
                id=fid,
                path=path,
                text=entry.get("text") if isinstance(entry.get("text"), str) else None,
                speech_start_ms=start,
                speech_end_ms=end,
                sha256=digest,
                voice=entry.get("voice") if isinstance(entry.get("voice"), str) else None,
                annotated=start is not None and end is not None,
                pauses=_pauses(entry.get("pauses"), start, end, f"{manifest}: fixtures[{i}]"),
            )
        )
    return out


def _pauses(
    raw: object, start: int | None, end: int | None, where: str
) -> tuple[tuple[int, int], ...] | None:
    """The optional ``pauses`` list: ``[{"start_ms": a, "end_ms": b}, ...]`` inside the speech."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ConfigError(f'{where} "pauses" must be a list of {{"start_ms", "end_ms"}} objects')
    out: list[tuple[int, int]] = []
    for k, item in enumerate(raw):
        a = _ms(item.get("start_ms")) if isinstance(item, dict) else None
        b = _ms(item.get("end_ms")) if isinstance(item, dict) else None
        if a is None or b is None or b <= a:
            raise ConfigError(
                f"{where} pauses[{k}] needs integer start_ms < end_ms (ms from the file start)"
            )
        lo = out[-1][1] if out else (start if start is not None else 0)
        if a < lo or (end is not None and b > end):
            raise ConfigError(
                f"{where} pauses[{k}] must lie inside the speech, after the previous pause"
            )
        out.append((a, b))
    return tuple(out)


def _ms(value: object) -> int | None:
    """``value`` when it is a non-negative integer, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def fixture_set_hash(fixtures: list[Fixture]) -> str:
    """One hash for a fixture set (ids and content), to tell runs on the same audio apart."""
    h = hashlib.sha256()
    for f in sorted(fixtures, key=lambda f: f.id):
        h.update(f"{f.id}:{f.sha256}\n".encode())
    return h.hexdigest()
