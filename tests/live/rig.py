"""A file-backed sound card for the live tests: real PortAudio, real ALSA, no hardware.

The rig writes an ALSA configuration into a temporary HOME (``.asoundrc``) whose ``default``
device is:

* a microphone: a ``file`` PCM over ``null`` whose ``infile`` is a FIFO. ALSA ``file``/``null``
  devices are not paced (they deliver as fast as they are read), so a writer thread paces
  the FIFO itself: every 20 ms it writes exactly one ALSA period (the ``plug`` slave's
  ``period_size`` is pinned to 20 ms so every read is one whole write). A read then blocks
  until the writer's next period, which makes the PortAudio capture callback run in real
  time, as with a sound card. The writer plays silence until :meth:`AlsaRig.say` queues a
  clip, and records when each sample of the clip was "spoken" (ground truth).
* a speaker: a ``file`` PCM whose output file is another FIFO, drained by a reader thread at
  real-time speed (one period every 20 ms), which paces playback the same way and keeps what
  was played with the time it was read.

Both FIFOs are opened read-write by the rig before any PortAudio process starts, because
PortAudio opens every device while it lists them and a FIFO open would otherwise block.
The PortAudio process must run with :attr:`AlsaRig.env` (a subprocess, so it reads the
configuration fresh). Pinning the period hides the named plug devices from PortAudio's
device list (its probe fails on them); ``default`` is listed, so tests use the default device.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

NS_PER_S = 1_000_000_000
FRAME_MS = 20

ASOUNDRC = """\
# voicelat live tests: a FIFO-fed microphone and a FIFO-drained speaker (see tests/live/rig.py)
pcm.!default {{
  type asym
  capture.pcm "vlmic"
  playback.pcm "vlspeaker"
}}
pcm.vlmic {{
  type file
  slave.pcm "null"
  file "/dev/null"
  infile "{mic_fifo}"
  format "raw"
}}
pcm.vlspeaker {{
  type file
  slave.pcm "null"
  file "{spk_fifo}"
  format "raw"
}}
"""

#: The unpaced devices: a file-fed microphone and a null speaker, no FIFO, no pacing.
UNPACED_ASOUNDRC = """\
pcm.!default {{
  type asym
  capture.pcm "vlmic"
  playback.pcm "vlspeaker"
}}
pcm.vlmic {{
  type file
  slave.pcm "null"
  file "/dev/null"
  infile "{mic_file}"
  format "raw"
}}
pcm.vlspeaker {{
  type null
}}
"""

#: A PortAudio configuration with no usable device at all (its only PCM has no slave).
NO_DEVICE_ASOUNDRC = """\
pcm.!default {
  type plug
  slave.pcm "voicelat_no_such_device"
}
"""


def _sleep_until(t_ns: int) -> int:
    while True:
        now = time.perf_counter_ns()
        if now >= t_ns:
            return now
        time.sleep(min(0.005, (t_ns - now) / NS_PER_S))


class AlsaRig:
    """The FIFO-backed default ALSA device; use as a context manager."""

    def __init__(
        self,
        root: Path,
        *,
        mic_rate: int = 44100,
        speaker_rate: int = 22050,
        paced: bool = True,
        null_speaker: bool = False,
    ) -> None:
        """``paced=False``: the plain ALSA file/null devices, as LOCAL_ENGINES.md measured them
        (the microphone reads a regular file of silence, the speaker is ``null``): they run
        as fast as they are read, which live mode must refuse. ``null_speaker``: a paced
        microphone but the unpaced ``null`` speaker."""
        self.paced = paced
        self.null_speaker = null_speaker
        self.root = root
        self.home = root / "home"
        self.mic_rate = mic_rate
        self.speaker_rate = speaker_rate
        self.mic_period = mic_rate * FRAME_MS // 1000
        self.spk_period = speaker_rate * FRAME_MS // 1000
        self.mic_fifo = root / "mic.fifo"
        self.spk_fifo = root / "speaker.fifo"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._queue: deque[tuple[np.ndarray, dict[str, int]]] = deque()
        self._lock = threading.Lock()
        self._mic_fd = -1
        self._spk_fd = -1
        #: Periods the writer could not write because nobody read the microphone.
        self.dropped = 0
        #: Clip samples lost that way (a test must not start a clip before the reader runs).
        self.dropped_speech = 0
        #: (perf_counter_ns when read, bytes) of everything the speaker played.
        self.played: list[tuple[int, bytes]] = []
        #: Set: the speaker stops reading (its FIFO fills up, playback blocks).
        self.paused = threading.Event()
        #: Set: the microphone stops delivering (a stalled or unplugged device).
        self.stall = threading.Event()

    @property
    def env(self) -> dict[str, str]:
        """Environment for a PortAudio subprocess that should see this rig as its sound card."""
        return {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config")}

    def __enter__(self) -> AlsaRig:
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.paced:
            silence = self.root / "silence.raw"
            silence.write_bytes(bytes(2 * self.mic_rate * 10))
            (self.home / ".asoundrc").write_text(UNPACED_ASOUNDRC.format(mic_file=silence))
            return self
        conf = ASOUNDRC.format(mic_fifo=self.mic_fifo, spk_fifo=self.spk_fifo)
        if self.null_speaker:
            conf = conf.split("pcm.vlspeaker {")[0] + "pcm.vlspeaker {\n  type null\n}\n"
        (self.home / ".asoundrc").write_text(conf)
        for fifo in (self.mic_fifo, self.spk_fifo):
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo)
        # Read-write opens never block and never see EOF/EPIPE when the other side comes and
        # goes (PortAudio opens and closes the device while it lists devices).
        self._mic_fd = os.open(self.mic_fifo, os.O_RDWR | os.O_NONBLOCK)
        self._spk_fd = os.open(self.spk_fifo, os.O_RDWR | os.O_NONBLOCK)
        for fd in (self._mic_fd, self._spk_fd):
            # A small pipe: at most ~2 periods of slack, so pacing stays tight.
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 4096)
        for target, name in ((self._write_mic, "rig-mic"), (self._read_speaker, "rig-speaker")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2.0)
        for fd in (self._mic_fd, self._spk_fd):
            if fd >= 0:
                os.close(fd)

    # -- microphone -------------------------------------------------------------------------
    def say(self, samples: np.ndarray) -> dict[str, int]:
        """Queue int16 samples (at ``mic_rate``) to be spoken next; the returned dict gets
        ``start_ns``: when the clip's first sample was at the "microphone"."""
        truth: dict[str, int] = {}
        with self._lock:
            self._queue.append((np.asarray(samples, dtype="<i2"), truth))
        return truth

    def wait_said(self, truth: dict[str, int], timeout: float = 30.0) -> None:
        """Block until a clip queued with :meth:`say` has been fully written."""
        deadline = time.monotonic() + timeout
        while "end_ns" not in truth:
            if time.monotonic() > deadline:
                raise TimeoutError("the rig did not finish speaking the clip")
            time.sleep(0.01)

    def _write_mic(self) -> None:
        period = self.mic_period
        silence = bytes(2 * period)
        current: np.ndarray | None = None
        truth: dict[str, int] = {}
        pos = 0
        t0 = time.perf_counter_ns()
        k = 0
        while not self._stop.is_set():
            k += 1
            # A period is written when its last sample has been "recorded".
            now = _sleep_until(t0 + k * FRAME_MS * 1_000_000)
            if self.stall.is_set():
                continue
            if current is None:
                with self._lock:
                    if self._queue:
                        current, truth = self._queue.popleft()
                        pos = 0
            if current is not None:
                chunk = current[pos : pos + period]
                data = chunk.tobytes() + bytes(2 * (period - chunk.size))
                if pos == 0:
                    # The period's first sample was spoken one period before it was written.
                    truth["start_ns"] = now - FRAME_MS * 1_000_000
            else:
                data = silence
            try:
                os.write(self._mic_fd, data)
            except BlockingIOError:
                self.dropped += 1
                if current is not None:
                    self.dropped_speech += min(period, current.size - pos)
            if current is not None:
                pos += period
                if pos >= current.size:
                    truth["end_ns"] = now
                    current = None

    # -- speaker ------------------------------------------------------------------------------
    def _read_speaker(self) -> None:
        n = 2 * self.spk_period
        t0 = time.perf_counter_ns()
        k = 0
        while not self._stop.is_set():
            k += 1
            now = _sleep_until(t0 + k * FRAME_MS * 1_000_000)
            if self.paused.is_set():
                continue
            try:
                data = os.read(self._spk_fd, n)
            except OSError as exc:
                if exc.errno != errno.EAGAIN:
                    raise
                continue
            if data:
                self.played.append((now, data))

    def first_played_above(
        self, level: int = 328, after_ns: int = 0, before_ns: int | None = None
    ) -> int | None:
        """When the speaker first played a sample above ``level`` (about -40 dBFS)."""
        for t, data in list(self.played):
            if t < after_ns or (before_ns is not None and t >= before_ns):
                continue
            x = np.frombuffer(data[: len(data) - len(data) % 2], dtype="<i2")
            if x.size and int(np.abs(x.astype(np.int32)).max()) > level:
                return t
        return None
