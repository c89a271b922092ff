"""The reply's sound: DNSMOS P.835 (SIG, BAK, OVRL on 1..5), a no-reference MOS from
``speechmos``'s shipped ONNX model.

Limits: DNSMOS is a model's opinion trained on noise-suppressed speech, not listeners'; it
scores noise and distortion, not whether the words are right (that is the reply WER) nor
naturalness of a voice; clips shorter than its 9 s window are repeated to fill it (speechmos's
rule), so a 1 s reply is judged as that second looped. The P.808 figure speechmos adds needs
librosa's mel front end (a ~30 s numba compile per process): it is left out; SIG/BAK/OVRL are
the model speechmos's ``dnsmos.run`` uses, with its polynomial calibration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.core.errors import ConfigError
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


__all__ = ["MIN_SECONDS", "Dnsmos", "DnsmosScorer"]
