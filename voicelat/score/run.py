"""Score a measured run after the fact: cost per turn, reply WER, DNSMOS (``voicelat score``).

Modes: ``off`` prices the turns only (arithmetic on what the run recorded: always cheap, so a
run does it when it ends); ``wer`` adds the reply WER; ``all`` adds DNSMOS, and PLCMOS when the
run's network lost packets (``plcmos=True`` asks for it whatever the network). The audio scores
need the reply audio (``[output] save_audio = true`` or ``--save-audio``). Nothing here runs on
a measuring loop: it reads the run directory and writes ``scores.jsonl`` and the summary's
``cost`` and ``quality`` sections.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.audio.onset import first_audible_sample
from voicelat.audio.resample import resample
from voicelat.audio.wav import read_wav
from voicelat.core.base.errors import AudioError, ConfigError, VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.cost import Prices, cost_section, stage_names_of, turn_cost
from voicelat.core.measure.clock import now_ns
from voicelat.files.results import SUMMARY_FILE, load_run, write_summary
from voicelat.files.scores import read_scores, reply_audio_path, write_scores

MODES = ("off", "wer", "all")
#: Less audible reply than this is not worth a transcript (a click, a breath).
MIN_WER_SECONDS = 0.3


@dataclass
class Scorers:
    """The audio scorers, built on first use (loading Whisper or the DNSMOS model takes seconds)."""

    mode: str
    make_transcriber: Callable[[], Any] | None = None
    make_dnsmos: Callable[[], Any] | None = None
    make_plcmos: Callable[[], Any] | None = None
    #: Score PLCMOS (set by score_run: asked for, or the run's network lost packets).
    plc: bool = False
    _transcriber: Any = None
    _dnsmos: Any = None
    _plcmos: Any = None

    def transcriber(self) -> Any:
        if self._transcriber is None:
            from voicelat.score.reply import WhisperTranscriber

            self._transcriber = (self.make_transcriber or WhisperTranscriber)()
        return self._transcriber

    def dnsmos(self) -> Any:
        if self._dnsmos is None:
            from voicelat.score.mos import DnsmosScorer

            self._dnsmos = (self.make_dnsmos or DnsmosScorer)()
        return self._dnsmos

    def plcmos(self) -> Any:
        if self._plcmos is None:
            from voicelat.score.mos import PlcmosScorer

            self._plcmos = (self.make_plcmos or PlcmosScorer)()
        return self._plcmos


@dataclass(frozen=True)
class ScoreOutcome:
    """What a scoring pass wrote: the summary's new sections and the per-turn rows."""

    run_dir: Path
    cost: dict[str, Any] | None
    quality: dict[str, Any] | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _reply_audio(run_dir: Path, turn: Turn) -> tuple[npt.NDArray[np.float32] | None, str | None]:
    """The turn's reply audio at 16 kHz as float32, or None and why it cannot be scored."""
    path = reply_audio_path(run_dir, turn.index, turn.fixture)
    if not path.is_file():
        return None, "no reply audio saved (run with --save-audio or [output] save_audio = true)"
    try:
        pcm = resample(read_wav(path), 16000)
    except (AudioError, OSError) as exc:
        return None, f"reply audio unreadable: {exc}"
    start = first_audible_sample(pcm)
    if start is None:
        return None, "reply audio is silence"
    samples = np.frombuffer(pcm.samples, dtype="<i2").astype(np.float32) / 32768.0
    audible = samples[start:]
    if len(audible) < MIN_WER_SECONDS * 16000:
        return None, f"reply audio too short to score ({len(audible) / 16000:.2f} s audible)"
    return audible, None


def _score_turn(run_dir: Path, turn: Turn, scorers: Scorers) -> dict[str, Any]:
    """One turn's audio scores (``wer`` and/or ``dnsmos``), each with its reason when empty."""
    from voicelat.score.mos import MIN_SECONDS
    from voicelat.score.reply import reply_wer

    row: dict[str, Any] = {}
    if turn.failed or not turn.reply:
        row["skipped"] = "failed turn" if turn.failed else "no reply text"
        return row
    audio, why = _reply_audio(run_dir, turn)
    if audio is None:
        row["skipped"] = why
        return row
    t0 = now_ns()
    hyp = scorers.transcriber().transcribe(audio)
    scored = reply_wer(turn.reply, hyp)
    row["wer"] = None if scored is None else scored.to_json()
    short = len(audio) < MIN_SECONDS * 16000
    if scorers.mode == "all":
        if short:
            row["dnsmos"] = None
            row["dnsmos_skipped"] = f"under {MIN_SECONDS:g} s of audible reply"
        else:
            row["dnsmos"] = scorers.dnsmos().score(audio).to_json()
    if scorers.plc:
        if short:
            row["plcmos"] = None
            row["plcmos_skipped"] = f"under {MIN_SECONDS:g} s of audible reply"
        else:
            row["plcmos"] = scorers.plcmos().score(audio)
    row["score_ms"] = (now_ns() - t0) / 1e6
    return row


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def quality_section(rows: Sequence[Mapping[str, Any]], mode: str, scorer: str) -> dict[str, Any]:
    """The summary's ``quality`` section from the per-turn rows."""
    wers = [r["wer"]["wer"] for r in rows if isinstance(r.get("wer"), Mapping)]
    mos = [r["dnsmos"] for r in rows if isinstance(r.get("dnsmos"), Mapping)]
    plc = [float(r["plcmos"]) for r in rows if isinstance(r.get("plcmos"), int | float)]
    times = [float(r["score_ms"]) for r in rows if isinstance(r.get("score_ms"), int | float)]
    skipped: dict[str, int] = {}
    for r in rows:
        if isinstance(r.get("skipped"), str):
            skipped[r["skipped"]] = skipped.get(r["skipped"], 0) + 1
    ordered = sorted(wers)
    return {
        "mode": mode,
        "transcriber": scorer,
        "scored_turns": len(wers),
        "wer": {
            "n": len(wers),
            "mean": _mean(wers),
            "p50": ordered[len(ordered) // 2] if ordered else None,
            "max": ordered[-1] if ordered else None,
        },
        "truncated": sum(
            1 for r in rows if isinstance(r.get("wer"), Mapping) and r["wer"]["truncated"]
        ),
        "dnsmos": {k: _mean([float(m[k]) for m in mos]) for k in ("sig", "bak", "ovrl")}
        | {"n": len(mos)},
        "plcmos": {"mean": _mean(plc), "min": min(plc, default=None), "n": len(plc)},
        "score_ms_per_turn": _mean(times),
        "skipped": skipped,
    }


def _prices(summary: Mapping[str, Any]) -> Prices | None:
    pipeline = summary.get("pipeline")
    priced = pipeline.get("cost") if isinstance(pipeline, Mapping) else None
    return Prices.from_json(priced) if isinstance(priced, Mapping) else None


def score_run(
    run_dir: Path,
    mode: str = "off",
    *,
    scorers: Scorers | None = None,
    prices: Prices | None = None,
    plcmos: bool | None = None,
) -> ScoreOutcome:
    """Price and (``wer``/``all``) score the turns of ``run_dir``; rewrite its summary sections.

    ``prices`` overrides the prices the run's pipeline saved (``voicelat score --prices``).
    ``plcmos``: True scores PLCMOS with any audio scoring, False never; None (the default) in
    ``all`` when the run's network lost packets (its summary's ``network`` section).
    """
    if mode not in MODES:
        raise ConfigError(f"--score must be one of {', '.join(MODES)}, not {mode!r}")
    run = load_run(run_dir)
    if run.summary is None:
        raise VoicelatError(f"{run_dir} has no {SUMMARY_FILE}: score a run that finished")
    summary = dict(run.summary)
    prices = prices or _prices(summary)
    notes: list[str] = []
    names = stage_names_of(summary.get("pipeline") or {})
    rows: list[dict[str, Any]] = [{"index": t.index, "fixture": t.fixture} for t in run.turns]
    cost = None
    if prices is None:
        notes.append("no prices: add a [cost] table to the pipeline (docs/COMPARE.md: Cost)")
        if mode == "off":
            return ScoreOutcome(run.path, None, None, [], notes)  # nothing to write
    else:
        cost = cost_section(run.turns, prices, names)
        for row, turn in zip(rows, run.turns, strict=True):
            row["cost"] = turn_cost(turn, prices, names).to_json()
        summary["cost"] = cost
    quality = None
    if mode == "off":
        # Pricing alone keeps the audio scores an earlier pass wrote.
        earlier = read_scores(run.path)
        for row in rows:
            old = earlier.get(row["index"], {})
            row.update({k: v for k, v in old.items() if k not in row and k != "cost"})
    else:
        from voicelat.score.mos import had_loss

        scorers = scorers or Scorers(mode)
        scorers.mode = mode
        lossy = had_loss(summary)
        scorers.plc = plcmos if plcmos is not None else (mode == "all" and lossy)
        if scorers.plc:
            why = "asked for" if plcmos else "the run's network lost packets"
            notes.append(f"PLCMOS scored ({why})")
        for row, turn in zip(rows, run.turns, strict=True):
            row.update(_score_turn(run.path, turn, scorers))
        name = (
            getattr(scorers.transcriber(), "name", "stt") if any("wer" in r for r in rows) else ""
        )
        quality = quality_section(rows, mode, name)
        summary["quality"] = quality
    write_scores(run.path, rows)
    write_summary(run.path, summary)
    return ScoreOutcome(run.path, cost, quality, rows, notes)


def combination_scores(run_dir: Path) -> dict[str, Any]:
    """A compared combination's price, quality and goodput (for ``comparison.json``): the
    summary's ``cost`` and ``quality`` headlines and the goodput under its own ``[budget]``."""
    from voicelat.core.judge.goodput import GoodputRule, goodput

    run = load_run(run_dir)
    summary = run.summary or {}
    rows = read_scores(run.path)
    wer = {i: float(r["wer"]["wer"]) for i, r in rows.items() if isinstance(r.get("wer"), Mapping)}
    cost = {
        i: float(r["cost"]["total"])
        for i, r in rows.items()
        if isinstance(r.get("cost"), Mapping) and isinstance(r["cost"].get("total"), int | float)
    }
    budget = summary.get("budget")
    rule = GoodputRule.from_budget(budget if isinstance(budget, Mapping) else {})
    out: dict[str, Any] = {"goodput": goodput(run.turns, rule, wer, cost).to_json()}
    c = summary.get("cost")
    if isinstance(c, Mapping):
        out["cost"] = {
            "currency": c.get("currency"),
            "per_turn": (c.get("per_turn") or {}).get("mean"),
            "per_minute": c.get("per_minute"),
            "missing": c.get("missing") or [],
            "unpriced": c.get("unpriced") or [],
        }
    q = summary.get("quality")
    if isinstance(q, Mapping):
        out["quality"] = {
            "wer": (q.get("wer") or {}).get("mean"),
            "truncated": q.get("truncated"),
            "scored_turns": q.get("scored_turns"),
            "dnsmos_ovrl": (q.get("dnsmos") or {}).get("ovrl"),
            "plcmos": (q.get("plcmos") or {}).get("mean"),
        }
    return out


__all__ = ["MODES", "ScoreOutcome", "Scorers", "combination_scores", "quality_section", "score_run"]
