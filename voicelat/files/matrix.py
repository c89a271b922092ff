"""Combinations to compare, and the fair order to measure them in (pure; no I/O but reading TOML).

A *matrix* file lists alternatives per stage and shares everything else::

    [matrix]
    name = "local-2x2"
    stack = "local"
    exclude = [{ stt = "pocketsphinx", tts = "piper" }]   # optional

    [[stt]]                       # each alternative is a stage table, as in a pipeline file,
    label = "whisper"             # plus an optional label (default: the stage name)
    stage = "wyoming-stt"

    [[stt]]
    label = "pocketsphinx"
    stage = "pocketsphinx-stt"

    [[llm]] ...
    [[tts]] ...

    [endpointing] / [chunker] / [output] / [turn] / [budget]    # shared by every combination

It expands to the product of the alternatives minus the excluded ones; each combination is a
:class:`~voicelat.files.pipeline.Pipeline`, validated like any pipeline file.

The schedule measures every combination on the same fixtures, interleaved: fixture A on every
combination, then fixture B on every combination, ... so slow drift of a shared machine (thermal
state, a neighbour's load, a server's caches) lands on all combinations alike instead of on
whichever ran last. Warm-up turns come first, one round over the combinations per warm-up turn,
and are kept (marked) but excluded from the statistics.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.plan import PlannedTurn, plan_turns
from voicelat.core.measure.events import STAGES, StageName
from voicelat.files.pipeline import Pipeline, load_pipeline, parse_pipeline

#: Tables a matrix shares with every combination (as in a pipeline file).
SHARED_TABLES = ("endpointing", "chunker", "output", "turn", "budget", "cost")
_TOP_LEVEL = {"matrix", "exclude", *STAGES, *SHARED_TABLES}
_MATRIX_KEYS = {"name", "description", "stack", "exclude"}


@dataclass(frozen=True)
class Combination:
    """One pipeline to measure, with the labels of the alternatives it is made of."""

    name: str
    labels: dict[str, str]  # stage kind -> alternative label
    pipeline: Pipeline

    @property
    def slug(self) -> str:
        """A directory name for its results (names are unique, so slugs are too)."""
        return slug(self.name)


@dataclass(frozen=True)
class Matrix:
    """A parsed matrix file."""

    name: str
    path: Path | None
    description: str
    alternatives: dict[str, list[tuple[str, dict[str, Any]]]]  # kind -> [(label, stage table)]
    combinations: list[Combination]
    excluded: list[str]


def slug(name: str) -> str:
    """A file-system-safe form of a combination name."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")
    return s or "combination"


def load_matrix(path: Path) -> Matrix:
    """Read and expand a matrix file; errors name the file and the alternative."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"matrix file {path} does not exist (see pipelines/matrix-local.toml for an example)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read matrix file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_matrix(data, path=path)


def parse_matrix(data: Mapping[str, Any], *, path: Path | None = None) -> Matrix:
    """Expand a matrix document (already parsed TOML) into its combinations."""
    where = str(path) if path else "matrix"

    def err(msg: str) -> ConfigError:
        return ConfigError(f"{where}: {msg}")

    unknown = sorted(set(data) - _TOP_LEVEL)
    if unknown:
        raise err(f"unknown table(s) {', '.join(unknown)}; valid: {', '.join(sorted(_TOP_LEVEL))}")
    meta = data.get("matrix", {})
    if not isinstance(meta, dict):
        raise err("[matrix] must be a table")
    bad = sorted(set(meta) - _MATRIX_KEYS)
    if bad:
        raise err(
            f"[matrix] has unknown key(s) {', '.join(bad)}; valid: {', '.join(sorted(_MATRIX_KEYS))}"
        )
    name = meta.get("name", path.stem if path else "matrix")
    if not isinstance(name, str) or not name:
        raise err("[matrix] name must be a non-empty string")
    description = meta.get("description", "")
    if not isinstance(description, str):
        raise err("[matrix] description must be a string")

    alternatives: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for kind in STAGES:
        alternatives[kind] = _alternatives(data.get(kind), kind, err)

    exclude_raw = data.get("exclude", meta.get("exclude", []))
    rules = _exclude_rules(exclude_raw, alternatives, err)

    shared = {t: data[t] for t in SHARED_TABLES if t in data}
    # A label names the alternative everywhere; the stage table itself must not carry it.
    multi = [k for k in STAGES if len(alternatives[k]) > 1] or list(STAGES)
    combos: list[Combination] = []
    excluded: list[str] = []
    for picks in itertools.product(*(alternatives[k] for k in STAGES)):
        labels: dict[str, str] = {
            str(k): label for k, (label, _) in zip(STAGES, picks, strict=True)
        }
        combo_name = "+".join(labels[k] for k in multi)
        if any(all(labels[k] == v for k, v in rule.items()) for rule in rules):
            excluded.append(combo_name)
            continue
        doc: dict[str, Any] = {
            "pipeline": {"name": combo_name, "description": f"{name}: {combo_name}"},
            **{k: dict(table) for k, (_, table) in zip(STAGES, picks, strict=True)},
            **shared,
        }
        if "stack" in meta:
            doc["pipeline"]["stack"] = meta["stack"]
        # Each combination's identity: the exact tables it runs with (stable across runs).
        digest = hashlib.sha256(
            json.dumps(doc, sort_keys=True, default=str).encode("utf-8")
        ).hexdigest()
        try:
            pipeline = parse_pipeline(doc, path=path, sha256=digest)
        except ConfigError as exc:
            raise ConfigError(f"combination {combo_name}: {exc}") from None
        combos.append(Combination(combo_name, labels, pipeline))
    if not combos:
        raise err("every combination is excluded: nothing to compare")
    return Matrix(name, path, description, alternatives, combos, excluded)


def _alternatives(
    value: Any, kind: str, err: Callable[[str], ConfigError]
) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(value, dict):
        value = [value]  # a single [stt] table: one alternative, shared by all
    if not isinstance(value, list) or not value:
        raise err(f"needs at least one [[{kind}]] alternative (a stage table with stage = ...)")
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for i, table in enumerate(value, start=1):
        if not isinstance(table, dict):
            raise err(f"{kind} alternative #{i} must be a table")
        table = dict(table)
        stage = table.get("stage")
        if not isinstance(stage, str) or not stage:
            raise err(f'{kind} alternative #{i} needs stage = "..." (a registered stage name)')
        label = table.pop("label", stage)
        if not isinstance(label, str) or not label or "+" in label:
            raise err(f"{kind} alternative #{i}: label must be a non-empty string without '+'")
        if label in seen:
            raise err(
                f"two {kind} alternatives are labelled {label!r}: give each a distinct label = ..."
            )
        seen.add(label)
        out.append((label, table))
    return out


def _exclude_rules(
    value: Any,
    alternatives: Mapping[str, Sequence[tuple[str, dict[str, Any]]]],
    err: Callable[[str], ConfigError],
) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise err('exclude must be a list of tables like { stt = "label", tts = "label" }')
    rules: list[dict[str, str]] = []
    for i, rule in enumerate(value, start=1):
        if not isinstance(rule, dict) or not rule:
            raise err(f'exclude #{i} must be a non-empty table like {{ stt = "label" }}')
        for kind, label in rule.items():
            if kind not in STAGES:
                raise err(f"exclude #{i} names {kind!r}; use stt, llm or tts")
            labels = [lbl for lbl, _ in alternatives[kind]]
            if label not in labels:
                raise err(
                    f"exclude #{i}: no {kind} alternative labelled {label!r}; "
                    f"{kind} labels: {', '.join(labels)}"
                )
        rules.append({str(k): str(v) for k, v in rule.items()})
    return rules


def check_stages(
    combos: Sequence[Combination], lookup: Callable[[str, StageName], object], source: str
) -> None:
    """Resolve every stage name with ``lookup(name, kind)`` (raises ConfigError listing the known
    ones); the error is prefixed with where the name came from."""
    for combo in combos:
        for kind in _kinds(combo.pipeline):
            table = getattr(combo.pipeline, kind)
            try:
                lookup(str(table["stage"]), kind)
            except ConfigError as exc:
                raise ConfigError(
                    f"{source}: {kind} alternative {combo.labels.get(kind, '?')!r}: {exc}"
                ) from None


def combinations_from_files(paths: Sequence[Path]) -> list[Combination]:
    """One combination per pipeline file, named after the pipeline (or the file when two share
    a name)."""
    pipelines = [load_pipeline(p) for p in paths]
    names = [p.name for p in pipelines]
    combos: list[Combination] = []
    for path, pipeline in zip(paths, pipelines, strict=True):
        name = pipeline.name if names.count(pipeline.name) == 1 else path.stem
        combos.append(
            Combination(
                name, {k: str(getattr(pipeline, k)["stage"]) for k in _kinds(pipeline)}, pipeline
            )
        )
    taken = [c.name for c in combos]
    dupes = sorted({n for n in taken if taken.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"two pipelines are both named {dupes[0]!r}: give each a distinct [pipeline] name"
        )
    return combos


def _kinds(pipeline: Pipeline) -> tuple[StageName, ...]:
    """The stage tables a pipeline has: ``("s2s",)`` for a speech-to-speech one, ``("agent",)``
    for a black-box agent."""
    if pipeline.agent is not None:
        return ("agent",)
    return ("s2s",) if pipeline.s2s is not None else STAGES


# -- the fair schedule ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Slot:
    """One turn of the comparison: which combination runs which planned turn, and when."""

    position: int
    combination: int
    planned: PlannedTurn


def fair_schedule(
    n_combinations: int,
    fixture_ids: Sequence[str],
    *,
    repeat: int = 1,
    turns: int | None = None,
    warmup: int = 1,
) -> list[Slot]:
    """Every combination gets the same plan (:func:`~voicelat.core.base.plan.plan_turns`); the plans are
    interleaved turn by turn, each round in the same combination order.

    The same order in every round keeps the idle time between two turns of one combination equal
    for all combinations (servers drop idle connections and caches cool): rotating the order
    would give some turns a shorter gap than others.
    """
    if n_combinations < 1:
        raise ValueError("nothing to schedule: no combinations")
    plan = plan_turns(fixture_ids, repeat=repeat, turns=turns, warmup=warmup)
    out: list[Slot] = []
    for planned in plan:  # plan_turns puts warm-up turns first
        for c in range(n_combinations):
            out.append(Slot(len(out), c, planned))
    return out


__all__ = [
    "SHARED_TABLES",
    "Combination",
    "Matrix",
    "Slot",
    "check_stages",
    "combinations_from_files",
    "fair_schedule",
    "load_matrix",
    "parse_matrix",
    "slug",
]
