"""Audio for voicelat: WAV I/O, resampling, framing, VAD/endpointing, onset detection, pacing
and a simulated output sink. All audio is 16-bit little-endian mono PCM; times are integer
nanoseconds on the measuring clock."""

from voicelat.audio.frames import bytes_dbfs, frame_samples, frames, rms_dbfs
from voicelat.audio.onset import OnsetDetector, first_audible_sample
from voicelat.audio.pacer import Pacer, StopPacing, sleep_until
from voicelat.audio.resample import load_for_stage, resample, resample_array
from voicelat.audio.sink import SimulatedSink
from voicelat.audio.vad import Endpoint, Endpointer, SpeechEnd, SpeechStart, VadEvent
from voicelat.audio.wav import PCM, read_wav, write_wav

__all__ = [
    "PCM",
    "Endpoint",
    "Endpointer",
    "OnsetDetector",
    "Pacer",
    "SimulatedSink",
    "SpeechEnd",
    "SpeechStart",
    "StopPacing",
    "VadEvent",
    "bytes_dbfs",
    "first_audible_sample",
    "frame_samples",
    "frames",
    "load_for_stage",
    "read_wav",
    "resample",
    "resample_array",
    "rms_dbfs",
    "sleep_until",
    "write_wav",
]
