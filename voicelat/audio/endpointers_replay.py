"""Offline endpointing replay: annotated fixtures through endpointers over a grid of settings.

No server and no clock: a fixture is read, resampled to 16 kHz and cut into the 20 ms frames the
pacer sends live; frame ``k`` is delivered at ``(k + 1) * 20 ms`` after the first sample, so an
endpoint decided on frame ``k`` happens then, exactly as ``engine/turn.py`` stamps it. Each
classifier runs once per fixture (all its thresholds at once); the hangover rule then runs per
hangover on the decisions, which is why a grid is much cheaper than configs x audio.
"""

from __future__ import annotations

import time
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from voicelat.audio.endpointers import FRAME_MS, RATE, SPECS, FrameVad, make_vad
from voicelat.audio.frames import frames as split_frames
from voicelat.audio.resample import load_for_stage
from voicelat.audio.vad import Endpoint, Endpointer
from voicelat.core.base.errors import ConfigError
from voicelat.core.measure.endpointing import (
    NS_PER_MS,
    Config,
    ConfigScore,
    FixtureScore,
    Truth,
    frames_for,
    hangover_endpoints,
    score_config,
    score_fixture,
)
from voicelat.files.fixtures import Fixture

#: Seconds of work per second of audio, measured on a 2-core machine (Silero's network
#: dominates); used only for the estimate printed before a grid starts. Energy levels and
#: Silero probabilities are computed once for all thresholds, WebRTC runs once per mode.
_COST_PER_AUDIO_S = {"energy": 0.003, "silero": 0.035, "webrtc": 0.0005}
_PER_THRESHOLD = frozenset({"webrtc"})
_COST_PER_FRAME_CONFIG_S = 1.5e-6

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Grid:
    """Endpointers, their thresholds and the hangovers to try (every combination)."""

    endpointers: tuple[str, ...] = ("energy", "silero", "webrtc")
    hangovers_ms: tuple[int, ...] = (200, 300, 400, 500, 600, 800, 1000, 1200)
    thresholds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    min_speech_ms: int = 100

    def thresholds_of(self, name: str) -> tuple[float, ...]:
        """The thresholds tried for ``name`` (its defaults unless given)."""
        return self.thresholds.get(name) or SPECS[name].thresholds

    def configs(self) -> list[Config]:
        """Every configuration, endpointer by endpointer, threshold, then hangover."""
        return [
            Config(name, thr, h)
            for name in self.endpointers
            for thr in self.thresholds_of(name)
            for h in self.hangovers_ms
        ]


@dataclass(frozen=True)
class Replay:
    """The grid's outcome: one score per configuration, and the per-fixture detail."""

    scores: list[ConfigScore]
    per_fixture: dict[Config, list[FixtureScore]]
    fixtures: int
    with_pauses: int
    pauses: int
    audio_s: float
    wall_s: float


def truth_of(fixture: Fixture) -> Truth:
    """A fixture's annotation in ns; one without speech bounds cannot be scored."""
    if fixture.speech_start_ms is None or fixture.speech_end_ms is None:
        raise ConfigError(
            f"fixture {fixture.id} has no annotated speech_start_ms/speech_end_ms: endpointing "
            "needs annotated fixtures (a manifest.json with speech bounds and pauses)"
        )
    pauses = tuple((a * NS_PER_MS, b * NS_PER_MS) for a, b in fixture.pauses or ())
    return Truth(
        fixture.id, fixture.speech_start_ms * NS_PER_MS, fixture.speech_end_ms * NS_PER_MS, pauses
    )


def estimate_seconds(grid: Grid, audio_s: float) -> float:
    """Expected wall time of :func:`replay` for ``audio_s`` seconds of fixture audio."""
    classify = sum(
        _COST_PER_AUDIO_S.get(name, 0.05)
        * audio_s
        * (len(grid.thresholds_of(name)) if name in _PER_THRESHOLD else 1)
        for name in grid.endpointers
    )
    frames = audio_s * 1000 / FRAME_MS
    return classify + frames * len(grid.configs()) * _COST_PER_FRAME_CONFIG_S


def audio_seconds(fixtures: Sequence[Fixture]) -> float:
    """Total length of the fixtures, from their WAV headers (nothing is decoded)."""
    total = 0.0
    for f in fixtures:
        try:
            with wave.open(str(f.path), "rb") as w:
                total += w.getnframes() / w.getframerate()
        except (OSError, wave.Error, EOFError):
            # Not a plain PCM header (float WAV, extensible): guess 16-bit mono at 16 kHz.
            total += max(0, f.path.stat().st_size - 44) / 2 / RATE
    return total


def replay(fixtures: Sequence[Fixture], grid: Grid, progress: Progress | None = None) -> Replay:
    """Run every fixture through every configuration of ``grid`` and score it."""
    truths = [truth_of(f) for f in fixtures]
    vads: dict[str, FrameVad] = {name: make_vad(name) for name in grid.endpointers}
    configs = grid.configs()
    per: dict[Config, list[FixtureScore]] = {c: [] for c in configs}
    steps, done = len(fixtures) * len(vads), 0
    audio_s = 0.0
    t0 = time.perf_counter()
    min_frames = frames_for(grid.min_speech_ms, FRAME_MS)
    for fixture, truth in zip(fixtures, truths, strict=True):
        frames = split_frames(load_for_stage(fixture.path, RATE), FRAME_MS)
        audio_s += len(frames) * FRAME_MS / 1000
        for name, vad in vads.items():
            thresholds = grid.thresholds_of(name)
            for thr, voiced in zip(thresholds, vad.voiced(frames, thresholds), strict=True):
                for h in grid.hangovers_ms:
                    ks = hangover_endpoints(
                        voiced,
                        hangover_frames=frames_for(h, FRAME_MS),
                        min_speech_frames=min_frames,
                    )
                    ends = [(k + 1) * FRAME_MS * NS_PER_MS for k in ks]
                    per[Config(name, thr, h)].append(score_fixture(truth, ends))
            done += 1
            if progress is not None:
                progress(done, steps, f"{fixture.id} {name}")
    return Replay(
        scores=[score_config(c, per[c]) for c in configs],
        per_fixture=per,
        fixtures=len(fixtures),
        with_pauses=sum(1 for t in truths if t.pauses),
        pauses=sum(len(t.pauses) for t in truths),
        audio_s=audio_s,
        wall_s=time.perf_counter() - t0,
    )


def first_endpoints_ns(
    fixtures: Sequence[Fixture],
    *,
    hangover_ms: int,
    threshold_dbfs: float,
    min_speech_ms: int,
    rate: int = RATE,
) -> dict[str, int | None]:
    """Each fixture's first endpoint (ns from its first sample) under the pipeline's own VAD.

    This is ``audio/vad.Endpointer`` fed exactly as ``engine/turn.py`` feeds it live (the
    fixture resampled to ``rate``, 20 ms frames); None when the audio ends first.
    """
    out: dict[str, int | None] = {}
    for fixture in fixtures:
        ep = Endpointer(
            threshold_dbfs=threshold_dbfs,
            hangover_ms=hangover_ms,
            min_speech_ms=min_speech_ms,
            frame_ms=FRAME_MS,
        )
        frames = split_frames(load_for_stage(fixture.path, rate), FRAME_MS)
        out[fixture.id] = None
        for k, frame in enumerate(frames):
            if any(isinstance(e, Endpoint) for e in ep.feed(frame, k)):
                out[fixture.id] = (k + 1) * FRAME_MS * NS_PER_MS
                break
    return out
