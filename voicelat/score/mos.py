"""The reply's sound: DNSMOS P.835 (SIG, BAK, OVRL on 1..5), a no-reference MOS from
``speechmos``'s shipped ONNX model; and PLCMOS for runs under packet loss.

Limits: DNSMOS is a model's opinion trained on noise-suppressed speech, not listeners'; it
scores noise and distortion, not whether the words are right (that is the reply WER) nor
naturalness of a voice; clips shorter than its 9 s window are repeated to fill it (speechmos's
rule), so a 1 s reply is judged as that second looped. The P.808 figure speechmos adds needs
librosa's mel front end (a ~30 s numba compile per process): it is left out; SIG/BAK/OVRL are
the model speechmos's ``dnsmos.run`` uses, with its polynomial calibration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import Direction
from voicelat.score.reply import SCORE_EXTRA

RATE = 16000
_WINDOW_S = 9.01
#: Below this much audio a MOS is the model judging a loop of a fragment: not scored.
MIN_SECONDS = 1.0
# speechmos dnsmos.DNSMOS.get_polyfit_val, non-personalised coefficients.
_P_OVR = (-0.06766283, 1.11546468, 0.04602535)
_P_SIG = (-0.08397278, 1.22083953, 0.0052439)
_P_BAK = (-0.13166888, 1.60915514, -0.39604546)


@dataclass(frozen=True, slots=True)
class Dnsmos:
    """DNSMOS P.835 of one clip: speech signal, background, overall (1..5)."""

    sig: float
    bak: float
    ovrl: float

    def to_json(self) -> dict[str, float]:
        return {"sig": self.sig, "bak": self.bak, "ovrl": self.ovrl}


class DnsmosScorer:
    """speechmos's DNSMOS model in an onnxruntime session (loaded once)."""

    def __init__(self) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
            import speechmos  # type: ignore[import-untyped]
        except ImportError:
            raise ConfigError(f"DNSMOS needs speechmos and onnxruntime: {SCORE_EXTRA}") from None
        model = Path(speechmos.__file__).parent / "dnsmos_models" / "sig_bak_ovr.onnx"
        opts = ort.SessionOptions()
        # Two cores are shared with the rest of the machine: one thread is enough for 9 s clips.
        opts.intra_op_num_threads = 1
        self.session: Any = ort.InferenceSession(str(model), opts)

    def score(self, audio: npt.NDArray[np.float32]) -> Dnsmos:
        """DNSMOS of mono float32 audio at 16 kHz within -1..1 (speechmos's segmentation)."""
        need = int(_WINDOW_S * RATE)
        while len(audio) < need:
            audio = np.append(audio, audio)
        hops = int(np.floor(len(audio) / RATE) - _WINDOW_S) + 1
        sig, bak, ovr = [], [], []
        for i in range(hops):
            seg = audio[i * RATE : i * RATE + need]
            if len(seg) < need:
                continue
            out = self.session.run(None, {"input_1": seg.astype(np.float32)[np.newaxis, :]})
            s_raw, b_raw, o_raw = out[0][0]
            sig.append(np.polyval(_P_SIG, s_raw))
            bak.append(np.polyval(_P_BAK, b_raw))
            ovr.append(np.polyval(_P_OVR, o_raw))
        return Dnsmos(float(np.mean(sig)), float(np.mean(bak)), float(np.mean(ovr)))


#: speechmos's PLCMOS averages this many random "rater" embeddings per clip (its default).
PLC_RATERS = 15


class PlcmosScorer:
    """PLCMOS v2 (speechmos's ``plcmos_v2.onnx``, Microsoft's INTERSPEECH 2023 model): a
    no-reference MOS of how well a receiver concealed lost packets, on 1..5.

    Limits: a model's opinion trained on listeners' ratings of packet-loss-concealed speech,
    not listeners' own; it expects 16 kHz mono speech (the reply audio is resampled to it); it
    judges the gaps, clicks and smeared syllables concealment leaves, not noise (DNSMOS) nor
    the words (the reply WER). It is meaningful only where packets were lost: voicelat's relay
    loses packets only on UDP transports (TCP loss is delay: docs/NETWORK.md), so a reply over
    a websocket under a lossy profile scores as clean. speechmos draws its rater embeddings at
    random on every call (scores move by a few hundredths between calls); here they are drawn
    from a fixed seed, so a clip always gets the same score.
    """

    def __init__(self) -> None:
        try:
            import onnxruntime as ort
            from speechmos import plcmos
        except ImportError:
            raise ConfigError(f"PLCMOS needs speechmos and onnxruntime: {SCORE_EXTRA}") from None
        self._model: Any = plcmos.PLCMOS()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # as DNSMOS: two shared cores
        self._model.session = ort.InferenceSession(self._model.model_path, opts)
        self._raters = np.random.default_rng(0).normal(size=(PLC_RATERS, 64)).astype(np.float32)

    def score(self, audio: npt.NDArray[np.float32]) -> float:
        """PLCMOS of mono float32 audio at 16 kHz within -1..1: the mean over the raters."""
        feats = np.asarray(self._model.stft_transform(audio), dtype=np.float32)
        feats = feats[np.newaxis, np.newaxis, ...]
        scores = [
            float(
                self._model.session.run(
                    None, {"degraded_audio": feats, "rater_embed": rater.reshape(1, -1)}
                )[0]
            )
            for rater in self._raters
        ]
        return float(np.mean(scores))


def had_loss(summary: Mapping[str, Any]) -> bool:
    """Whether the run's network (its summary's ``network`` section) lost packets: a profile
    that asked for loss in either direction, or a relay that realised some."""
    net = summary.get("network")
    if not isinstance(net, Mapping):
        return False
    requested = net.get("requested")
    for side in ("up", "down"):
        d = requested.get(side) if isinstance(requested, Mapping) else None
        if isinstance(d, Mapping) and _lossy(d):
            return True
        realised = net.get("realised")
        r = realised.get(side) if isinstance(realised, Mapping) else None
        if isinstance(r, Mapping) and isinstance(r.get("lost"), int) and r["lost"] > 0:
            return True
    return False


def _lossy(d: Mapping[str, Any]) -> bool:
    """A requested direction's long-run loss is above zero (core/base/network.py's own rule, with
    its defaults for the keys a summary left out)."""
    known = {f.name for f in fields(Direction)}
    try:
        return Direction(**{k: v for k, v in d.items() if k in known}).lossy
    except (TypeError, ValueError, ZeroDivisionError):
        return False


__all__ = ["MIN_SECONDS", "PLC_RATERS", "Dnsmos", "DnsmosScorer", "PlcmosScorer", "had_loss"]
