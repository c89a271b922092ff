"""What a fixture's audio must be for its turns to mean anything, checked when it is loaded,
before any server starts: a problem here is the fixture's (exit 2, naming it and the fix), not
the infrastructure's. Silence, or a ``speech_end_ms`` past the end, used to pass and make every
turn fail with "incomplete turn: no speech_end" (exit 3)."""

from __future__ import annotations

from voicelat.audio.onset import first_audible_sample
from voicelat.audio.wav import PCM
from voicelat.core.base.errors import AudioError
from voicelat.files.fixtures import Fixture

__all__ = ["check_fixture_audio"]


def check_fixture_audio(fixture: Fixture, pcm: PCM) -> None:
    """Raise :class:`AudioError` (exit 2) when ``pcm`` cannot serve as ``fixture``'s turn."""
    duration_ms = pcm.n_samples * 1000 // pcm.rate
    where = f"fixture {fixture.id} ({fixture.path})"
    for key in ("speech_start_ms", "speech_end_ms"):
        value = getattr(fixture, key)
        if value is not None and value > duration_ms:
            raise AudioError(
                f"{where}: {key} = {value} is past the end of the audio ({duration_ms} ms): "
                "fix it in manifest.json or re-annotate the fixture"
            )
    if first_audible_sample(pcm) is None:
        raise AudioError(
            f"{where} is silent (nothing above -40 dBFS in {duration_ms} ms): "
            "record it again or use a fixture with speech"
        )
