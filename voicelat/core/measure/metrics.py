"""Pure figures derived from milestones and stage events (no clock, no I/O)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from voicelat.core.base.contract import CRITICAL_PATH, SEGMENTS
from voicelat.core.measure.events import Audio, Delta

NS_PER_S = 1_000_000_000


def critical_segments(
    milestones: Mapping[str, int],
    path: Sequence[str] = CRITICAL_PATH,
    names: Sequence[str] = SEGMENTS,
) -> tuple[dict[str, int], int | None, list[str]]:
    """The contiguous segments of the critical path, their total (e2e) and any flags.

    A provider can reorder things (a streaming STT that finalizes before the endpoint): then a
    raw segment is negative. It is clamped to zero by walking the path with a running maximum,
    so the clamped segments still telescope to exactly ``output_first_audible - speech_end``;
    the raw milestones stay untouched and the turn is flagged ``clamped:<segment>``.
    Returns empty segments and no e2e when a milestone of the path is missing. ``path`` and
    ``names`` are the cascade's by default; an S2S turn passes its own (contract.S2S_*).
    """
    if any(m not in milestones for m in path):
        return {}, None, []
    flags: list[str] = []
    start = milestones[path[0]]
    end = milestones[path[-1]]
    if end < start:
        return {}, None, ["order:output_first_audible<speech_end"]
    segments: dict[str, int] = {}
    prev = start
    raw_prev = start
    for name, milestone in zip(names, path[1:], strict=True):
        raw = milestones[milestone]
        # The last boundary is the true total; later boundaries cannot exceed it.
        effective = min(max(prev, raw), end)
        # Negative raw segment (raw < raw_prev), or one squeezed by an earlier clamp (raw < prev).
        if raw < max(prev, raw_prev):
            flags.append(f"clamped:{name}")
        segments[name] = effective - prev
        prev = effective
        raw_prev = raw
    assert prev == end
    return segments, end - start, flags


def order_violations(milestones: Mapping[str, int], pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Pairs ``(a, b)`` present in ``milestones`` with ``a`` after ``b``, as ``order:a>b`` flags."""
    return [
        f"order:{a}>{b}"
        for a, b in pairs
        if a in milestones and b in milestones and milestones[a] > milestones[b]
    ]


def llm_figures(
    request_ns: int | None, deltas: Sequence[Delta], done_ns: int | None, usage: Mapping[str, int]
) -> dict[str, float | int | None]:
    """TTFD, TTFT, inter-chunk gaps and the decode rate of one LLM stream.

    Inter-chunk latency is per streamed event; ITL per token only when the server reports a token
    count (``usage.completion_tokens``): one event need not be one token.
    """
    content = [d for d in deltas if d.content]
    anything = [d for d in deltas if d.content or d.reasoning]
    out: dict[str, float | int | None] = {
        "llm_ttfd_ns": None,
        "llm_ttft_ns": None,
        "llm_chunks": len(content),
        "llm_chunk_gap_p50_ns": None,
        "llm_chunk_gap_max_ns": None,
        "llm_tokens": usage.get("completion_tokens"),
        "llm_prompt_tokens": usage.get("prompt_tokens"),
        "llm_cached_tokens": usage.get("cached_tokens"),
        "llm_itl_ns": None,
        "llm_tokens_per_s": None,
        "llm_total_ns": None,
    }
    if request_ns is None:
        return out
    if anything:
        out["llm_ttfd_ns"] = anything[0].t_ns - request_ns
    if content:
        out["llm_ttft_ns"] = content[0].t_ns - request_ns
        gaps = [b.t_ns - a.t_ns for a, b in itertools.pairwise(content)]
        if gaps:
            ordered = sorted(gaps)
            out["llm_chunk_gap_p50_ns"] = _median_int(ordered)
            out["llm_chunk_gap_max_ns"] = ordered[-1]
    if done_ns is not None:
        out["llm_total_ns"] = done_ns - request_ns
        if content:
            decode_ns = content[-1].t_ns - content[0].t_ns
            tokens = usage.get("completion_tokens")
            count = tokens if tokens else len(content)
            if count > 1 and decode_ns > 0:
                out["llm_tokens_per_s"] = (count - 1) * NS_PER_S / decode_ns
                if tokens:
                    out["llm_itl_ns"] = decode_ns // (tokens - 1)
    return out


def tts_figures(
    request_ns: int | None,
    audio: Sequence[Audio],
    done_ns: int | None,
    stall_threshold_ns: int = 20_000_000,
) -> dict[str, float | int | None]:
    """Audio length, real-time factor and stalls of one TTS stream.

    Stalls: playback starts at the first audio byte and runs in real time; when a piece arrives
    after the audio before it has finished playing, the listener hears a gap. Gaps shorter than
    ``stall_threshold_ns`` are ignored (a jitter buffer hides them).
    """
    pieces = [a for a in audio if a.pcm]
    out: dict[str, float | int | None] = {
        "tts_audio_ns": 0,
        "tts_chunks": len(pieces),
        "tts_rtf": None,
        "tts_stalls": 0,
        "tts_stall_total_ns": 0,
        "tts_stall_max_ns": 0,
    }
    if not pieces:
        return out
    audio_ns = 0
    play_end: int | None = None
    stalls = 0
    stall_total = 0
    stall_max = 0
    for piece in pieces:
        dur = piece.n_samples * NS_PER_S // piece.rate
        if play_end is None:
            play_end = piece.t_ns + dur
        else:
            gap = piece.t_ns - play_end
            if gap > stall_threshold_ns:
                stalls += 1
                stall_total += gap
                stall_max = max(stall_max, gap)
            play_end = max(play_end, piece.t_ns) + dur
        audio_ns += dur
    out["tts_audio_ns"] = audio_ns
    out["tts_stalls"] = stalls
    out["tts_stall_total_ns"] = stall_total
    out["tts_stall_max_ns"] = stall_max
    if request_ns is not None and done_ns is not None and audio_ns > 0:
        out["tts_rtf"] = (done_ns - request_ns) / audio_ns
    return out


def first_audible_ns(audio: Sequence[Audio], onset_sample: int) -> int | None:
    """When the first audible sample is available: the later of its arrival and the time it
    would play if playback started at the first byte (first byte + leading silence)."""
    pieces = [a for a in audio if a.pcm]
    if not pieces:
        return None
    first = pieces[0]
    seen = 0
    for piece in pieces:
        if onset_sample < seen + piece.n_samples:
            played = first.t_ns + onset_sample * NS_PER_S // first.rate
            return max(piece.t_ns, played)
        seen += piece.n_samples
    return None


def _median_int(ordered: Sequence[int]) -> int:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) // 2
