"""The recorder of a speech-to-speech turn: one realtime model hears the user and answers.

Sans-I/O like :class:`~voicelat.core.measure.recorder.TurnRecorder`, whose interface it keeps (the
engine marks, stages report events under ``"s2s"``). It derives the S2S milestones
(``contract.S2S_MILESTONES``) and the segments of ``contract.S2S_CRITICAL_PATH``:

* ``endpoint``: the engine's own mark (voicelat endpointed and committed) or else the first of
  the server's end of speech (``ServerSpeech(started=False)``, OpenAI ``speech_stopped``), the
  provider's end of turn (``EndOfTurn``) or our ``commit`` send (``RequestSent("commit")``).
  With none of them (Gemini's automatic activity detection on the Developer API) it is
  ``speech_end``: the endpointing segment is 0, ``model`` holds speech_end -> first audio,
  and the turn is flagged ``endpoint_unobserved``.
* ``response_start``: ``ResponseStarted``; ``first_text``: the first non-empty ``Delta``
  (the reply's transcript or text); ``first_audio``: the first non-empty ``Audio``;
  ``first_audible``: first audio + leading silence, from the onset the engine found;
  ``response_done``: the stage's ``Done`` (its usage goes into figures ``s2s_usage_*``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voicelat.core.base.contract import (
    S2S_CRITICAL_PATH,
    S2S_KIND,
    S2S_MILESTONES,
    S2S_SEGMENTS,
    S2S_STRICT_ORDER,
)
from voicelat.core.base.turn import Turn
from voicelat.core.measure.events import (
    Audio,
    Delta,
    Done,
    EndOfTurn,
    Final,
    Interrupted,
    RequestSent,
    ResponseStarted,
    ServerSpeech,
    StageEvent,
)
from voicelat.core.measure.metrics import first_audible_ns, tts_figures
from voicelat.core.measure.recorder import TurnRecorder

__all__ = ["S2S_RUNNER_MILESTONES", "S2SRecorder", "is_s2s"]

#: What the engine observes itself on an S2S turn.
S2S_RUNNER_MILESTONES = frozenset(
    {"speech_start", "speech_end", "endpoint", "first_audible", "output_first_audible"}
)


def is_s2s(turn: Turn) -> bool:
    """Whether ``turn`` went through a speech-to-speech model (else it is a cascade turn)."""
    return turn.extra.get("kind") == S2S_KIND


class S2SRecorder(TurnRecorder):
    """Collects one S2S turn's events (stage ``"s2s"``); :meth:`finish` builds the Turn."""

    path = S2S_CRITICAL_PATH
    segment_names = S2S_SEGMENTS
    strict_order = S2S_STRICT_ORDER
    runner_milestones = S2S_RUNNER_MILESTONES

    def finish(self) -> Turn:
        self.extra("kind", S2S_KIND)
        return super().finish()

    def milestones(self) -> dict[str, int]:
        found = dict(self._marks)
        ev = self._events["s2s"]
        started = _first(ev, lambda e: isinstance(e, ServerSpeech) and e.started)
        if started is not None:
            found["server_speech_start"] = started
        if "endpoint" not in found:
            end = _first(
                ev,
                lambda e: (
                    (isinstance(e, ServerSpeech) and not e.started)
                    or isinstance(e, EndOfTurn)
                    or (isinstance(e, RequestSent) and e.what == "commit")
                ),
            )
            if end is not None:
                found["endpoint"] = end
        for name, pred in (
            ("response_start", lambda e: isinstance(e, ResponseStarted)),
            ("first_text", lambda e: isinstance(e, Delta) and bool(e.content)),
            ("first_audio", lambda e: isinstance(e, Audio) and bool(e.pcm)),
            ("response_done", lambda e: isinstance(e, Done)),
        ):
            t = _first(ev, pred)
            if t is not None:
                found[name] = t
        if "endpoint" not in found and "speech_end" in found and "first_audio" in found:
            # No observable endpoint (Gemini's automatic activity detection): endpointing
            # and model merge into speech_end -> first_audio, all of it in ``model``.
            found["endpoint"] = found["speech_end"]
            self.flag("endpoint_unobserved")
        if "first_audible" not in found and self._onset_sample is not None:
            audible = first_audible_ns([e for e in ev if isinstance(e, Audio)], self._onset_sample)
            if audible is not None:
                found["first_audible"] = audible
        return {m: found[m] for m in S2S_MILESTONES if m in found}

    def transcript(self) -> str | None:
        """What the server heard (its input transcription), when it reports one."""
        finals = [e.text for e in self._events["s2s"] if isinstance(e, Final)]
        return " ".join(t.strip() for t in finals if t.strip()) if finals else None

    def reply(self) -> str | None:
        """The reply's transcript (or text)."""
        deltas = [e.content for e in self._events["s2s"] if isinstance(e, Delta)]
        return "".join(deltas).strip() if deltas else None

    def _stage_figures(self, absolute: dict[str, int]) -> dict[str, float | int | None]:
        ev = self._events["s2s"]
        audio = [e for e in ev if isinstance(e, Audio)]
        # Audio continuity after the first byte: length, gaps a listener hears, and the real-time
        # factor of delivery (first audio -> response done over the audio's length; < 1 is
        # faster than real time).
        tts = tts_figures(absolute.get("first_audio"), audio, absolute.get("response_done"))
        out: dict[str, float | int | None] = {
            "s2s" + k[3:]: v for k, v in tts.items() if k.startswith("tts_")
        }
        out["s2s_interrupted"] = int(any(isinstance(e, Interrupted) for e in ev))
        done = next((e for e in ev if isinstance(e, Done)), None)
        if done is not None:
            out.update({f"s2s_usage_{k}": v for k, v in sorted(done.usage.items())})
            if done.finish_reason:
                self._extra.setdefault("s2s_status", done.finish_reason)
        return out


def _first(events: list[StageEvent], pred: Callable[[Any], bool]) -> int | None:
    """The stamp of the first event ``pred`` accepts (every accepted event has a ``t_ns``)."""
    for e in events:
        if pred(e):
            return int(e.t_ns)  # type: ignore[union-attr]
    return None
