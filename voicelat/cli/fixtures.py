"""``voicelat fixtures annotate DIR`` and ``voicelat fixtures check DIR``: bring your own recordings.

``annotate`` writes ``DIR/manifest.json``: each WAV's detected speech bounds, its duration and
sha256, a transcript from the embedded stack's Whisper when it is running (``--transcribe``
insists on it, ``--no-transcribe`` skips it) marked as Whisper's guess (``text_by``) until
someone checks it, and a warning for a clip that would make a poor fixture (no silence after
the speech, speech at the very start, nothing audible). FLAC and Ogg recordings are converted
to a WAV beside them first; a file that cannot be read is skipped and named, not fatal.

``check`` reads the directory as ``voicelat run`` will and reports, per file, what is wrong
(errors: unreadable audio or manifest, bounds past the end, a changed file) or doubtful
(warnings). Exit codes: 0 no errors (warnings are printed), 1 errors found, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from voicelat.cli.args import non_negative_int
from voicelat.core.base.errors import EXIT_GATE_FAILED, EXIT_OK, ConfigError, InfraError, StageError
from voicelat.files.annotate import (
    WHISPER_GUESS,
    ManifestEntry,
    existing_guesses,
    existing_texts,
    write_manifest,
)
from voicelat.files.fixtures import MANIFEST

__all__ = ["add_parser"]


def _info(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``fixtures annotate`` and ``fixtures check``; each sets ``func``."""
    from voicelat.audio.annotate import MIN_TRAILING_MS

    p: argparse.ArgumentParser = subparsers.add_parser(
        "fixtures",
        help="annotate or check a directory of your own recordings (WAV files)",
        description="Bring your own recordings: write a manifest for a directory of WAVs, or "
        "check one before a run.",
    )
    sub = p.add_subparsers(dest="fixtures_command", metavar="COMMAND")
    trailing_help = (
        f"silence a clip needs after its speech (default {MIN_TRAILING_MS} ms: the "
        "pipelines' 500 ms VAD hangover and a margin)"
    )
    annotate = sub.add_parser(
        "annotate",
        help="write DIR/manifest.json: speech bounds, transcripts, warnings",
        description="Detect each WAV's speech bounds, transcribe it with the embedded "
        "stack's Whisper when it runs, and write DIR/manifest.json.",
    )
    annotate.add_argument(
        "dir", type=Path, metavar="DIR", help="directory of .wav (or .flac, .ogg) recordings"
    )
    annotate.add_argument(
        "--transcribe",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="transcripts from the embedded stack's Whisper (default: when it is running; "
        "`voicelat stack up` starts it)",
    )
    annotate.add_argument(
        "--force", action="store_true", help="replace an existing manifest (its texts are kept)"
    )
    annotate.add_argument(
        "--min-trailing-ms", type=non_negative_int, default=MIN_TRAILING_MS, help=trailing_help
    )
    annotate.set_defaults(func=cmd_annotate)
    check = sub.add_parser(
        "check",
        help="check a fixtures directory as `voicelat run` will read it",
        description="Report unreadable or inconsistent fixtures (errors, exit 1) and doubtful "
        "ones (warnings).",
    )
    check.add_argument("dir", type=Path, metavar="DIR", help="fixtures directory")
    check.add_argument(
        "--min-trailing-ms", type=non_negative_int, default=MIN_TRAILING_MS, help=trailing_help
    )
    check.add_argument(
        "--tolerance-ms",
        type=non_negative_int,
        default=100,
        help="warn when an annotated bound is further than this from the detected one "
        "(default 100)",
    )
    check.set_defaults(func=cmd_check)
    p.set_defaults(func=_usage)
    return p


def _usage(args: argparse.Namespace) -> int:
    raise ConfigError(
        "name a fixtures command: `voicelat fixtures annotate DIR` or `... check DIR`"
    )


def _directory(path: Path) -> Path:
    if not path.is_dir():
        raise ConfigError(f"{path} is not a directory: give the directory holding the .wav files")
    return path


# -- annotate ---------------------------------------------------------------------------------
def cmd_annotate(args: argparse.Namespace) -> int:
    from voicelat.audio.annotate import annotate_dir

    directory = _directory(args.dir)
    if (directory / MANIFEST).exists() and not args.force:
        raise ConfigError(
            f"{directory / MANIFEST} exists: check it with `voicelat fixtures check {directory}`"
            ", or replace it with --force (its transcripts are kept)"
        )
    texts, guesses = existing_texts(directory), existing_guesses(directory)
    found = annotate_dir(directory, texts, args.min_trailing_ms)
    for source, wav in found.converted:
        print(f"  converted {source} -> {wav} (16-bit mono WAV: what a run plays)")
    for file, why in found.skipped:
        print(f"  skipped {file}: {why}")
    if not found.entries:
        what = "no readable recording" if found.skipped else "no .wav, .flac or .ogg files"
        raise ConfigError(f"{directory} holds {what}")
    entries = [
        dataclasses.replace(e, text_by=WHISPER_GUESS) if e.file in guesses else e
        for e in found.entries
    ]
    if args.transcribe is not False:
        entries = _with_transcripts(entries, directory, required=bool(args.transcribe))
    for e in entries:
        _print_entry(e)
    path = write_manifest(directory, entries, rate=found.rate)
    warned = sum(1 for e in entries if e.warnings)
    guessed = sum(1 for e in entries if e.text_by is not None and e.text)
    skipped = f", {len(found.skipped)} unreadable file(s) skipped" if found.skipped else ""
    print(f"wrote {path}: {len(entries)} fixture(s), {warned} with warnings{skipped}")
    if guessed:
        print(
            f"{guessed} transcript(s) are Whisper's guesses (text_by in the manifest): check "
            "each text and delete its text_by; accuracy is scored against them"
        )
    return EXIT_OK


def _print_entry(e: ManifestEntry) -> None:
    bounds = (
        f"speech {e.speech_start_ms}-{e.speech_end_ms} ms of {e.duration_ms} ms"
        if e.speech_start_ms is not None
        else f"no speech in {e.duration_ms} ms"
    )
    guess = " (Whisper's guess)" if e.text_by is not None else ""
    text = f"  {e.text!r}{guess}" if e.text else ""
    print(f"  {e.file:<28} {bounds}{text}")
    for warning in e.warnings:
        print(f"    warning: {warning}")


def _with_transcripts(
    entries: list[ManifestEntry], directory: Path, *, required: bool
) -> list[ManifestEntry]:
    from voicelat.stack import StackConfig

    url = StackConfig().stt_url
    try:
        texts = asyncio.run(_transcribe_all(entries, directory, url))
    except StageError as exc:
        if required:
            raise InfraError(
                f"cannot transcribe: the embedded stack's Whisper is not reachable at {url} "
                f"({exc}); start it with `voicelat stack up`"
            ) from None
        _info(
            f"transcripts: none (the embedded stack is not running at {url}; "
            "`voicelat stack up` starts it)"
        )
        return entries
    # A text Whisper wrote is marked as its guess; a kept (checked) text stays unmarked.
    return [
        dataclasses.replace(e, text=texts[e.file], text_by=WHISPER_GUESS)
        if texts.get(e.file) and not e.text
        else e
        for e in entries
    ]


async def _transcribe_all(
    entries: list[ManifestEntry], directory: Path, url: str
) -> dict[str, str]:
    from voicelat.audio.frames import frames
    from voicelat.audio.resample import load_for_stage
    from voicelat.core.measure.events import Failed, Final
    from voicelat.stages.base import load_stage_class

    stt = load_stage_class("wyoming-stt", "stt")({"stage": "wyoming-stt", "url": url})
    out: dict[str, str] = {}
    async with stt:  # describes the server: a StageError when nothing listens there
        for i, entry in enumerate(entries, 1):
            if entry.speech_start_ms is None:
                continue
            pcm = load_for_stage(directory / entry.file, stt.input_rate)
            finals: list[str] = []
            async for ev in stt.transcribe(_unpaced(frames(pcm, 20))):
                if isinstance(ev, Final) and ev.text.strip():
                    finals.append(ev.text.strip())
                elif isinstance(ev, Failed):
                    _info(f"  {entry.file}: no transcript ({ev.reason})")
            out[entry.file] = " ".join(finals)
            _info(f"transcribing [{i}/{len(entries)}] {entry.file}")
    return out


async def _unpaced(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:  # not a measurement: as fast as the server takes them
        yield chunk


# -- check ------------------------------------------------------------------------------------
def cmd_check(args: argparse.Namespace) -> int:
    from voicelat.audio.annotate import check_dir

    directory = _directory(args.dir)
    count, findings = check_dir(directory, args.min_trailing_ms, args.tolerance_ms)
    for f in findings:
        print(f"  {f.level:<7}  {f.file:<28} {f.message}")
    errors = sum(1 for f in findings if f.level == "error")
    warnings = len(findings) - errors
    verdict = "FAILED" if errors else "ok"
    print(
        f"fixtures check {verdict}: {directory}: {count} fixture(s), "
        f"{errors} error(s), {warnings} warning(s)"
    )
    return EXIT_GATE_FAILED if errors else EXIT_OK
