"""Protocol-faithful provider emulators with latency and fault profiles (docs/EMULATORS.md).

Each emulator speaks one provider's wire protocol on loopback (HTTP and websocket paths on
one port), injects latencies drawn from a profile, injects faults with given probabilities,
and records ground truth: when it actually wrote the first token or audio byte, on the
``perf_counter_ns`` clock voicelat measures with.
"""

from voicelat.emulate.profile import EmulatorConfig, Fault, Profile, Wire, load_profile
from voicelat.emulate.registry import emulator_class, known_emulators
from voicelat.emulate.running import Emulators
from voicelat.emulate.truth import Exchange, GroundTruth, ResponseTruth

__all__ = [
    "EmulatorConfig",
    "Emulators",
    "Exchange",
    "Fault",
    "GroundTruth",
    "Profile",
    "ResponseTruth",
    "Wire",
    "emulator_class",
    "known_emulators",
    "load_profile",
]
