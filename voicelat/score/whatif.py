"""A what-if's inputs, loaded from a recorded run: the turns, the run's settings, its fixtures
replayed offline through the pipeline's VAD (old and new setting), the recorded LLM deltas, or
another TTS's cells of a compare run; then the prediction (:mod:`voicelat.core.judge.whatif`,
:mod:`voicelat.core.judge.whatif_reply` hold the model and its assumptions).

Like the run's scores it is computed after the run, from disk, never on a measuring loop;
``voicelat whatif`` prints it, and anything else (a bench script, a test) can call
:func:`run_prediction` without the command line. Bad input is a ``ConfigError`` (exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.audio.endpointers_replay import first_endpoints_ns
from voicelat.core.base.errors import ConfigError, VoicelatError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.comparison_doc import CombinationDoc
from voicelat.core.judge.whatif import (
    ASSUMPTIONS,
    CHUNKER_KEYS,
    ENDPOINTING_KEYS,
    TTS_KEY,
    Prediction,
    Setting,
    predict,
)
from voicelat.core.judge.whatif_reply import (
    ChunkerModel,
    ChunkerSetting,
    ReplyMove,
    chunker_assumptions,
    chunker_moves,
    chunker_notes,
    fixture_medians,
    tts_assumptions,
    tts_notes,
    tts_swap_moves,
    tts_text_unit,
)
from voicelat.core.measure.arrivals import EXTRA_KEY as DELTAS_KEY
from voicelat.files.fixtures import Fixture, default_fixtures_dir, load_fixtures
from voicelat.files.results import load_run

__all__ = ["TTSCell", "prediction_json", "run_prediction", "tts_cells"]

NS_PER_MS = 1_000_000


def _run_fixtures(directory: Path, summary: dict[str, Any], turns: Sequence[Turn]) -> list[Fixture]:
    """The run's fixtures, checked against the hashes its summary recorded."""
    by_id = {f.id: f for f in load_fixtures(directory)}
    recorded = {str(f.get("id")): f.get("sha256") for f in summary.get("fixtures") or []}
    needed = sorted({t.fixture for t in turns})
    missing = [i for i in needed if i not in by_id]
    if missing:
        raise ConfigError(
            f"{directory} lacks the run's fixture(s) {', '.join(missing)}: give --fixtures DIR"
        )
    changed = [i for i in needed if recorded.get(i) not in (None, by_id[i].sha256)]
    if changed:
        raise ConfigError(
            f"fixture(s) {', '.join(changed)} in {directory} differ from the run's audio "
            "(sha256): give the run's --fixtures DIR"
        )
    return [by_id[i] for i in needed]


@dataclass(frozen=True)
class TTSCell:
    """A compare cell measuring the TTS a swap asks for."""

    name: str
    turns: Sequence[Turn]
    output_latency_ms: float


def tts_cells(compare_dir: Path, name: str) -> list[TTSCell]:
    """The cells of a compare run whose TTS is ``name``: its label, else the combination's
    name, else its stage name."""
    from voicelat.files.comparison import read_comparison

    try:
        combos = read_comparison(compare_dir).combinations
    except VoicelatError as exc:
        raise ConfigError(
            f"--compare {compare_dir}: no readable comparison.json ({exc}): give the directory "
            "`voicelat compare` wrote"
        ) from None

    def tts_of(c: CombinationDoc) -> tuple[str, str]:
        stage = (c.stages.get("tts") or {}).get("stage", "")
        return c.labels.get("tts", ""), str(stage)

    # The matrix label first, then the combination's name (a compare of pipeline files labels
    # a TTS by its stage), then the stage name.
    picked = (
        [c for c in combos if tts_of(c)[0] == name]
        or [c for c in combos if c.name == name]
        or [c for c in combos if tts_of(c)[1] == name]
    )
    if not picked:
        known = sorted({x for c in combos for x in tts_of(c) if x})
        raise ConfigError(
            f"--compare {compare_dir} measured no TTS {name!r}; it has: "
            f"{', '.join(known) or 'none'}"
        )
    cells: list[TTSCell] = []
    for c in picked:
        where = c.run_dir
        found = next(
            (d for d in (compare_dir / where, Path(where)) if (d / "turns.jsonl").is_file()), None
        )
        if not where or found is None:
            raise ConfigError(f"--compare {compare_dir}: cell {c.name} has no turns.jsonl")
        try:
            run = load_run(found)
        except VoicelatError as exc:
            raise ConfigError(f"--compare {compare_dir}: cell {c.name}: {exc}") from None
        out = _pipeline(run.summary or {}, "output")
        cells.append(TTSCell(c.name, run.turns, float(out.get("latency_ms", 0))))
    return cells


def _endpointing(summary: dict[str, Any]) -> dict[str, Any]:
    ep = dict((summary.get("pipeline") or {}).get("endpointing") or {})
    if ep.get("mode", "vad") != "vad":
        raise ConfigError(
            "this run ended turns on the provider's end-of-turn (endpointing.mode = provider): "
            "its endpoint does not follow the VAD settings, so they cannot be predicted"
        )
    for key in ("hangover_ms", "threshold_dbfs", "min_speech_ms"):
        if key not in ep:
            raise ConfigError(f"the run's summary.json has no endpointing.{key}: rerun it")
    return ep


def run_prediction(
    run_dir: Path,
    settings: Sequence[Setting],
    fixtures_dir: Path | None,
    compare_dir: Path | None = None,
) -> tuple[Prediction, int | None]:
    """The prediction, and the largest gap (ns) between replayed and recorded old endpoints."""
    run = load_run(run_dir)
    summary = run.summary or {}
    turns = [t for t in run.turns if t.headline]
    if not turns:
        raise ConfigError(f"{run_dir} has no warm, successful turn to predict from")
    old_output = float(_pipeline(summary, "output").get("latency_ms", 0))
    delta_out = 0
    for s in settings:
        if s.key == "output.latency_ms":
            delta_out = round((s.number - old_output) * NS_PER_MS)
    shift: dict[str, int | None] = {t.fixture: 0 for t in turns}
    new_ep: dict[str, int | None] = {}
    gap: int | None = None
    ep_keys = [s for s in settings if s.key in ENDPOINTING_KEYS]
    if ep_keys:
        shift, new_ep, gap = _endpoint_shifts(summary, turns, ep_keys, fixtures_dir)
    assumptions = [*ASSUMPTIONS[:2]] if ep_keys else []
    reply = _reply(run_dir, summary, turns, settings, compare_dir)
    pred = predict(
        turns,
        settings,
        endpoint_shift_ns=shift,
        new_endpoint_ns=new_ep,
        output_latency_delta_ns=delta_out,
        reply_moves=reply.moves if reply else None,
        reply_part=reply.part if reply else "",
        assumptions=[*assumptions, *(reply.assumptions if reply else ()), ASSUMPTIONS[2]],
        notes=reply.notes if reply else (),
    )
    return pred, gap


def _pipeline(summary: dict[str, Any], table: str) -> dict[str, Any]:
    return dict((summary.get("pipeline") or {}).get(table) or {})


def _endpoint_shifts(
    summary: dict[str, Any],
    turns: Sequence[Turn],
    ep_keys: Sequence[Setting],
    fixtures_dir: Path | None,
) -> tuple[dict[str, int | None], dict[str, int | None], int | None]:
    """Per fixture: the endpoint's move and its new time; the replay's gap to the recorded."""
    old = _endpointing(summary)
    new = dict(old)
    for s in ep_keys:
        new[s.key.split(".", 1)[1]] = s.value
    fixtures = _run_fixtures(fixtures_dir or default_fixtures_dir(), summary, turns)
    before = first_endpoints_ns(fixtures, **_vad_args(old))
    new_ep = first_endpoints_ns(fixtures, **_vad_args(new))
    shift: dict[str, int | None] = {}
    for t in turns:
        a, b = before.get(t.fixture), new_ep.get(t.fixture)
        shift[t.fixture] = None if a is None or b is None else b - a
    gaps = [
        abs(recorded - offline)
        for t in turns
        if (recorded := t.milestones.get("endpoint")) is not None
        and (offline := before.get(t.fixture)) is not None
    ]
    return shift, new_ep, max(gaps) if gaps else None


@dataclass(frozen=True)
class _ReplyPrediction:
    moves: tuple[ReplyMove, ...]
    part: str
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]


def _reply(
    run_dir: Path,
    summary: dict[str, Any],
    turns: Sequence[Turn],
    settings: Sequence[Setting],
    compare_dir: Path | None,
) -> _ReplyPrediction | None:
    """The reply's move: a chunker or a TTS what-if (one of the two), else None."""
    chunker = [s for s in settings if s.key in CHUNKER_KEYS]
    tts = [s for s in settings if s.key == TTS_KEY]
    if chunker and tts:
        raise ConfigError(
            "--set chunker.* and --set tts=... together: the compare run measured the other TTS "
            "with the run's chunker; predict one of them at a time"
        )
    if compare_dir is not None and not tts:
        raise ConfigError("--compare DIR is for --set tts=LABEL: add it or drop --compare")
    if chunker:
        return _chunker_prediction(run_dir, summary, turns, chunker)
    if tts:
        if compare_dir is None:
            raise ConfigError(
                f"--set {tts[-1].text} needs --compare DIR: a voicelat compare run that measured "
                "that TTS on the same fixtures"
            )
        return _tts_prediction(summary, turns, str(tts[-1].value), compare_dir)
    return None


def _chunker_prediction(
    run_dir: Path, summary: dict[str, Any], turns: Sequence[Turn], chunker: Sequence[Setting]
) -> _ReplyPrediction:
    ch = _pipeline(summary, "chunker")
    if "mode" not in ch:
        raise ConfigError(f"{run_dir}/summary.json has no chunker.mode: rerun it")
    old = ChunkerSetting(str(ch["mode"]), int(ch.get("min_chars", 1)))
    new = old
    for s in chunker:
        if s.key == "chunker.mode":
            new = ChunkerSetting(str(s.value), new.min_chars)
        else:
            new = ChunkerSetting(new.mode, max(1, int(s.number)))
    if not any(DELTAS_KEY in t.extra for t in turns):
        raise ConfigError(
            f"{run_dir} keeps no per-delta arrival times (turns.jsonl extra.{DELTAS_KEY}, "
            "recorded since this version): rerun it, then predict"
        )
    tts = (summary.get("stages") or {}).get("tts") or _pipeline(summary, "tts")
    unit = tts_text_unit(tts)
    found = chunker_moves(turns, ChunkerModel(old, new, unit))
    return _ReplyPrediction(
        found.moves,
        "llm_first_token -> tts_first_byte",
        chunker_assumptions(unit, str(tts.get("stage", "?")), found.slope_ns_per_char),
        chunker_notes(found),
    )


def _tts_prediction(
    summary: dict[str, Any], turns: Sequence[Turn], name: str, compare_dir: Path
) -> _ReplyPrediction:
    cells = tts_cells(compare_dir, name)
    cell_turns = [t for c in cells for t in c.turns]
    medians = fixture_medians(cell_turns)
    common = sorted(set(medians) & {t.fixture for t in turns})
    if not common:
        raise ConfigError(
            f"{compare_dir}: the cell(s) measuring TTS {name!r} share no fixture with the run "
            "(with a warm turn): compare on the run's fixtures"
        )
    old_output = float(_pipeline(summary, "output").get("latency_ms", 0))
    delta = round((old_output - cells[0].output_latency_ms) * NS_PER_MS)
    mine = {t.fixture: t.reply for t in turns}
    other = {t.fixture: t.reply for t in cell_turns if t.headline}
    differ = sorted(f for f in common if mine.get(f) != other.get(f))
    return _ReplyPrediction(
        tts_swap_moves(turns, medians, delta),
        "llm_first_speakable -> output_first_audible",
        tts_assumptions(name, [c.name for c in cells]),
        tts_notes(common, differ),
    )


def _vad_args(ep: dict[str, Any]) -> dict[str, Any]:
    return {
        "hangover_ms": int(ep["hangover_ms"]),
        "threshold_dbfs": float(ep["threshold_dbfs"]),
        "min_speech_ms": int(ep["min_speech_ms"]),
    }


def prediction_json(pred: Prediction, gap_ns: int | None) -> dict[str, Any]:
    """The prediction as ``voicelat whatif --json`` writes it (times in integer ns)."""
    return {
        "settings": [s.text for s in pred.settings],
        "n": pred.n,
        "recorded_p50_ns": pred.recorded(50),
        "recorded_p90_ns": pred.recorded(90),
        "predicted_p50_ns": pred.predicted(50),
        "predicted_p90_ns": pred.predicted(90),
        "predicted_endpointing_p50_ns": (
            pred.predicted_endpointing(50) if pred.part == "endpointing" else None
        ),
        "part": pred.part,
        "recorded_part_p50_ns": pred.recorded_part(50),
        "predicted_part_p50_ns": pred.predicted_endpointing(50),
        "notes": list(pred.notes),
        "endpoint_replay_gap_ns": gap_ns,
        "excluded": [list(e) for e in pred.excluded],
        "assumptions": list(pred.assumptions),
    }
