"""Real audio devices through PortAudio (the ``sounddevice`` package), imported on demand.

Nothing here imports ``sounddevice`` at module level: :func:`load_sounddevice` does, the first
time live mode needs it, and turns a missing PortAudio library or package into one
:class:`~voicelat.core.base.errors.AudioError` line (exit code 2) that says what to install and that
``voicelat run`` replays fixtures without any device. The rest of voicelat never imports this
module's device classes, so it works where PortAudio is missing.

Threads and clocks. PortAudio calls the stream callbacks on its own thread. The capture
callback only stamps the clock (``clock.now_ns()``: the measuring clock, monotonic by
default, read from any thread) and copies the block into a thread-safe
handoff (:class:`CapturedBlock`, with the stream's input latency); the measuring event loop
consumes it (:meth:`InputDevice.read`), resamples it and cuts 20 ms frames
(:class:`FrameAssembler`). The playback callback only copies bytes out of the current
:class:`DeviceSink`'s buffer and stamps when the first audible sample left it. Everything
else (VAD, resampling, onset detection) runs on the loop, in small per-block steps.

Timing model (all on the one measuring clock, :class:`~voicelat.core.measure.clock.Clock`):

* capture: the first sample of a block was at the microphone
  ``max(input latency, block duration)`` before its callback ran (the last sample of a block
  cannot be younger than the callback that delivers it);
* playback: a block reaches the speaker the reported output latency after the callback that
  pulled it, or when the blocks pulled before it have played, whichever is later (a device
  filling its buffer pulls several blocks at once); a sample adds its offset in the block.
  ``output_first_audible`` is that time for the reply's first audible sample; the reported
  latency is also recorded on its own.

Watchdogs turn a device that stops (unplugged, a stalled driver) or that delivers audio faster
than real time (an unpaced ALSA ``null``/``file`` device) into one clear error instead of a
hang or nonsense numbers.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import math
import os
import queue
import threading
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from voicelat.audio.frames import frame_samples
from voicelat.audio.onset import OnsetDetector
from voicelat.audio.resample import KAISER_BETA, ROLLOFF, ZERO_CROSSINGS
from voicelat.audio.wav import PCM, write_wav
from voicelat.core.base.errors import AudioError
from voicelat.core.measure.clock import Clock, MonotonicClock

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000

Kind = Literal["input", "output"]

#: Callback block length: the 20 ms of the frames cut from capture, and a playback step that
#: keeps the reply's stamps within 20 ms.
BLOCK_MS = 20
#: No capture block for this long while the stream should run: the device stopped.
STALL_S = 2.0
#: How long closing a stream may take before the driver is deemed stuck.
CLOSE_TIMEOUT_S = 2.0
#: A device that is this far ahead of real time is not a real-time device.
RUNAWAY_S = 2.0

#: The one line for "replay without a device", appended to every device error.
NO_DEVICE_HINT = "`voicelat run` replays audio fixtures without any device"

_sd: ModuleType | None = None


def load_sounddevice() -> ModuleType:
    """Import ``sounddevice`` (which loads PortAudio) once; errors are one actionable line."""
    global _sd
    if _sd is not None:
        return _sd
    try:
        # importlib keeps the package optional for type checking too (it ships no stubs).
        module = importlib.import_module("sounddevice")
    except ModuleNotFoundError:
        raise AudioError(
            "live mode needs the sounddevice package: pip install 'voicelat[live]' "
            f"(or {NO_DEVICE_HINT})"
        ) from None
    except OSError as exc:
        # sounddevice raises OSError('PortAudio library not found') at import time.
        raise AudioError(
            f"cannot load the PortAudio library ({exc}): install it "
            "(Debian/Ubuntu: apt-get install libportaudio2; Fedora: dnf install portaudio; "
            f"macOS: brew install portaudio), or {NO_DEVICE_HINT}"
        ) from None
    _sd = module
    return module


# -- devices ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One PortAudio device as ``voicelat devices`` lists it."""

    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: int
    default_input: bool = False
    default_output: bool = False

    def has(self, kind: Kind) -> bool:
        """The device can capture (``input``) or play (``output``)."""
        return (self.max_input_channels if kind == "input" else self.max_output_channels) > 0

    @property
    def label(self) -> str:
        """``#4 'default'``: how errors and summaries name it."""
        return f"#{self.index} {self.name!r}"

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "hostapi": self.hostapi,
            "max_input_channels": self.max_input_channels,
            "max_output_channels": self.max_output_channels,
            "default_samplerate": self.default_samplerate,
        }


def _portaudio_error(sd: ModuleType) -> type[BaseException]:
    err: type[BaseException] = sd.PortAudioError
    return err


def list_devices(sd: ModuleType) -> list[DeviceInfo]:
    """Every device PortAudio knows (an empty list on a machine without a sound card)."""
    try:
        raw = list(sd.query_devices())
        apis = [str(a["name"]) for a in sd.query_hostapis()]
    except _portaudio_error(sd) as exc:
        raise AudioError(
            f"PortAudio cannot list the audio devices ({exc}); {NO_DEVICE_HINT}"
        ) from None
    default_in, default_out = _defaults(sd)
    out = []
    for i, d in enumerate(raw):
        api = int(d.get("hostapi", 0))
        out.append(
            DeviceInfo(
                index=int(d.get("index", i)),
                name=str(d["name"]),
                hostapi=apis[api] if 0 <= api < len(apis) else "?",
                max_input_channels=int(d["max_input_channels"]),
                max_output_channels=int(d["max_output_channels"]),
                default_samplerate=round(float(d["default_samplerate"])),
                default_input=i == default_in,
                default_output=i == default_out,
            )
        )
    return out


def _defaults(sd: ModuleType) -> tuple[int, int]:
    """PortAudio's default input and output device indexes (-1 when there is none)."""
    try:
        pair = sd.default.device
        din, dout = int(pair[0]), int(pair[1])
    except (TypeError, ValueError, IndexError):
        din = dout = -1
    if din < 0 or dout < 0:
        # sounddevice leaves its defaults at -1 until set: ask PortAudio itself.
        lib = getattr(sd, "_lib", None)
        if lib is not None:
            din = din if din >= 0 else int(lib.Pa_GetDefaultInputDevice())
            dout = dout if dout >= 0 else int(lib.Pa_GetDefaultOutputDevice())
    return din, dout


def resolve_device(devices: list[DeviceInfo], spec: str | None, kind: Kind) -> DeviceInfo:
    """The device ``--input-device``/``--output-device`` names: an index, an exact name or
    a unique part of a name (case-insensitive); the default device when ``spec`` is None."""
    flag = f"--{kind}-device"
    usable = [d for d in devices if d.has(kind)]
    if not usable:
        what = "microphone" if kind == "input" else "speaker"
        raise AudioError(
            f"no audio {kind} device: PortAudio finds none on this machine (no sound card?); "
            f"connect a {what} and pick it with {flag} (see `voicelat devices`), or {NO_DEVICE_HINT}"
        )
    if spec is None:
        for d in usable:
            if d.default_input if kind == "input" else d.default_output:
                return d
        # No default but some device: the first one is as good a default as PortAudio's.
        return usable[0]
    spec = spec.strip()
    if spec.lstrip("-").isdigit():
        index = int(spec)
        for d in devices:
            if d.index == index:
                if not d.has(kind):
                    raise AudioError(
                        f"device {d.label} has no {kind} channels: pick an {kind} device with "
                        f"{flag} (see `voicelat devices`)"
                    )
                return d
        raise AudioError(
            f"there is no audio device #{index}: `voicelat devices` lists them (use {flag} N)"
        )
    exact = [d for d in usable if d.name == spec]
    if exact:
        return exact[0]
    partial = [d for d in usable if spec.lower() in d.name.lower()]
    if len(partial) == 1:
        return partial[0]
    if not partial:
        raise AudioError(
            f"no {kind} device matches {spec!r}: `voicelat devices` lists them "
            f"(give {flag} an index or part of a name)"
        )
    names = ", ".join(d.label for d in partial[:6])
    raise AudioError(
        f"{spec!r} matches several {kind} devices ({names}): give {flag} the index instead"
    )


def check_rate(sd: ModuleType, device: DeviceInfo, rate: int, kind: Kind) -> None:
    """Refuse, with the flag to use, a sample rate the device does not accept."""
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    try:
        check(device=device.index, samplerate=rate, channels=1, dtype="int16")
    except (_portaudio_error(sd), ValueError) as exc:
        hint = (
            f"drop --input-rate to capture at its default rate ({device.default_samplerate} Hz)"
            if kind == "input"
            else "the reply is resampled to its default rate instead"
        )
        raise AudioError(
            f"{kind} device {device.label} refuses {rate} Hz mono 16-bit ({_reason(exc)}): "
            f"{hint}, or pick another device with --{kind}-device (see `voicelat devices`)"
        ) from None


def accepts_rate(sd: ModuleType, device: DeviceInfo, rate: int, kind: Kind) -> bool:
    """Whether :func:`check_rate` would pass."""
    try:
        check_rate(sd, device, rate, kind)
    except AudioError:
        return False
    return True


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# -- streaming resampling -------------------------------------------------------------------------
class StreamResampler:
    """:func:`voicelat.audio.resample` over a stream that arrives in pieces.

    The output equals resampling the whole stream at once (same Kaiser-windowed sinc, same
    arithmetic), sample for sample: a piece's outputs are emitted as soon as every input they
    need has arrived (about 2 ms of look-ahead at 16 kHz), and :meth:`flush` emits the tail at
    the end of the stream. Output sample ``m`` sits at input time ``m * rate_in / rate_out``:
    the filter is symmetric, so it adds no delay to the audio's timing.
    """

    def __init__(self, rate_in: int, rate_out: int) -> None:
        if rate_in <= 0 or rate_out <= 0:
            raise AudioError(f"invalid sample rates {rate_in} -> {rate_out}: both must be positive")
        self.rate_in, self.rate_out = rate_in, rate_out
        g = math.gcd(rate_in, rate_out)
        self.up, self.down = rate_out // g, rate_in // g
        self.identity = self.up == self.down
        fc = 0.5 * min(1.0, self.up / self.down) * ROLLOFF
        half = ZERO_CROSSINGS / (2.0 * fc)
        self.k = math.ceil(half)
        self._taps = np.arange(-self.k + 1, self.k + 1, dtype=np.int64)
        # Every phase tabulated once (resample() tabulates the phases one buffer needs, with
        # the same formula, so the rows are identical): per piece only the dot products remain.
        phases = np.arange(self.up, dtype=np.float64)
        dist = phases[:, None] / self.up - self._taps[None, :]
        inside = np.clip(1.0 - (dist / half) ** 2, 0.0, None)
        window = np.i0(KAISER_BETA * np.sqrt(inside)) / np.i0(KAISER_BETA)
        window = np.where(np.abs(dist / half) <= 1.0, window, 0.0)
        table = 2.0 * fc * np.sinc(2.0 * fc * dist) * window
        table /= table.sum(axis=1, keepdims=True)
        self._table = table
        # The buffer starts with k zeros before the first sample, as resample() pads.
        self._buf: npt.NDArray[np.float64] = np.zeros(self.k, dtype=np.float64)
        self._buf_start = -self.k
        self._n_in = 0
        self._m = 0
        self._flushed = False

    @property
    def samples_in(self) -> int:
        """Input samples pushed so far."""
        return self._n_in

    @property
    def samples_out(self) -> int:
        """Output samples emitted so far."""
        return self._m

    def push(self, pcm: bytes) -> bytes:
        """Add int16 samples; returns the int16 output samples that are now complete."""
        if self._flushed:
            raise RuntimeError("StreamResampler.push() after flush()")
        x = np.frombuffer(pcm, dtype="<i2", count=len(pcm) // 2)
        self._n_in += x.size
        if self.identity:
            self._m += x.size
            return x.tobytes()
        self._buf = np.concatenate([self._buf, x.astype(np.float64)])
        # Output m needs inputs up to floor(m*down/up) + k: emit every m whose inputs are in.
        avail = self._n_in - self.k
        m_end = -(-avail * self.up // self.down) if avail > 0 else 0
        return self._emit(m_end)

    def flush(self) -> bytes:
        """End of stream: the remaining outputs (zeros stand for the samples after the end)."""
        if self._flushed:
            return b""
        self._flushed = True
        if self.identity:
            return b""
        n_out = (2 * self._n_in * self.up + self.down) // (2 * self.down)
        self._buf = np.concatenate([self._buf, np.zeros(self.k + 1, dtype=np.float64)])
        return self._emit(n_out)

    def _emit(self, m_end: int) -> bytes:
        if m_end <= self._m:
            return b""
        m = np.arange(self._m, m_end, dtype=np.int64)
        num = m * self.down
        idx = num // self.up - self._buf_start
        phase = num % self.up
        y = np.zeros(m.size, dtype=np.float64)
        for col, j in enumerate(self._taps):
            y += self._table[phase, col] * self._buf[idx + j]
        self._m = m_end
        # Keep only the inputs the next output can still need.
        keep_from = (self._m * self.down) // self.up - self.k + 1
        drop = keep_from - self._buf_start
        if drop > 0:
            self._buf = self._buf[drop:]
            self._buf_start = keep_from
        return bytes(np.clip(np.rint(y), -32768, 32767).astype("<i2").tobytes())


# -- capture ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CapturedBlock:
    """What the capture callback hands over: int16 mono bytes at the device rate, the
    clock reading of the callback, the stream's input latency, and PortAudio's
    overflow flag (samples were lost before this block)."""

    data: bytes
    frames: int
    t_ns: int
    latency_ns: int
    overflow: bool = False


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """A 20 ms frame of live input at the STT rate.

    ``index`` counts frames since capture started; ``t_ns`` is when its first sample was at
    the microphone; ``arrived_ns`` is when the callback that completed it ran.
    """

    index: int
    pcm: bytes
    t_ns: int
    arrived_ns: int


class FrameAssembler:
    """Device blocks (any size, device rate) in, 20 ms frames at the STT rate out, each
    placed on the clock by the capture stamps of the samples it holds."""

    def __init__(self, rate_in: int, rate_out: int, frame_ms: int = 20) -> None:
        self.rate_in, self.rate_out = rate_in, rate_out
        self.frame_ms = frame_ms
        self._fs = frame_samples(rate_out, frame_ms)
        self._resampler = StreamResampler(rate_in, rate_out)
        self._pending = bytearray()
        self._pending_start = 0  # output sample index of _pending[0]
        # (first input sample, samples, capture time of the first) of recent blocks.
        self._blocks: deque[tuple[int, int, int]] = deque()
        self._n_in = 0
        self._index = 0
        self.overflows = 0

    def push(self, block: CapturedBlock) -> list[LiveFrame]:
        """Add one captured block; returns the frames it completed."""
        if block.overflow:
            self.overflows += 1
        n = block.frames
        duration = n * NS_PER_S // self.rate_in
        first_ns = block.t_ns - max(block.latency_ns, duration)
        self._blocks.append((self._n_in, n, first_ns))
        self._n_in += n
        self._pending += self._resampler.push(block.data)
        out: list[LiveFrame] = []
        size = self._fs * 2
        while len(self._pending) >= size:
            pcm = bytes(self._pending[:size])
            del self._pending[:size]
            out.append(LiveFrame(self._index, pcm, self._time_of(self._pending_start), block.t_ns))
            self._index += 1
            self._pending_start += self._fs
        self._prune()
        return out

    def _time_of(self, m: int) -> int:
        """Capture time of output sample ``m`` (input position ``m * rate_in / rate_out``)."""
        num = m * self.rate_in  # input position times rate_out
        pos = num // self.rate_out
        for start, _n, first_ns in reversed(self._blocks):
            if start <= pos:
                # The sample's offset from the block's first sample, in exact ns.
                return first_ns + (num - start * self.rate_out) * NS_PER_S // (
                    self.rate_in * self.rate_out
                )
        start, _, first_ns = self._blocks[0]
        return first_ns + (num - start * self.rate_out) * NS_PER_S // (self.rate_in * self.rate_out)

    def _prune(self) -> None:
        # Blocks before the next frame's first sample can no longer be asked about.
        pos = self._pending_start * self.rate_in // self.rate_out
        while len(self._blocks) > 1 and self._blocks[1][0] <= pos:
            self._blocks.popleft()


class InputDevice:
    """A capture stream at the device rate, mono int16, handing blocks to the event loop."""

    def __init__(
        self,
        sd: ModuleType,
        info: DeviceInfo,
        rate: int,
        *,
        latency: str | float = "low",
        stall_s: float = STALL_S,
        runaway_s: float = RUNAWAY_S,
        clock: Clock | None = None,
    ) -> None:
        self.sd = sd
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self._now = self.clock.now_ns  # bound once: the callback runs every 20 ms
        self.info = info
        self.rate = rate
        self.latency = latency
        self.stall_s = stall_s
        self.runaway_s = runaway_s
        self.latency_ns = 0
        self._blocks: queue.SimpleQueue[CapturedBlock] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stream: Any = None
        self._first_ns: int | None = None
        self._received = 0
        self._closing = False
        #: Why the stream stopped on its own (set on the PortAudio thread, read on the loop).
        self.error: str | None = None

    def start(self) -> None:
        """Open and start the stream (call on the event loop that will :meth:`read`)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        try:
            stream = self.sd.RawInputStream(
                device=self.info.index,
                samplerate=self.rate,
                channels=1,
                dtype="int16",
                # 20 ms blocks, like the frames cut from them; PortAudio adapts to the host.
                blocksize=self.rate * BLOCK_MS // 1000,
                latency=self.latency,
                callback=self._callback,
                finished_callback=self._finished,
            )
            self.latency_ns = round(float(stream.latency) * NS_PER_S)
            self._stream = stream
            stream.start()
        except (_portaudio_error(self.sd), ValueError) as exc:
            self.close()
            raise AudioError(
                f"cannot open input device {self.info.label} at {self.rate} Hz ({_reason(exc)}): "
                f"pick another with --input-device (see `voicelat devices`), or {NO_DEVICE_HINT}"
            ) from None

    # PortAudio's thread: stamp, copy, hand over. Nothing else.
    def _callback(self, indata: Any, frames: int, time_info: Any, status: Any) -> None:
        t = self._now()
        self._blocks.put(
            CapturedBlock(bytes(indata), frames, t, self.latency_ns, bool(status.input_overflow))
        )
        if self._first_ns is None:
            self._first_ns = t
        self._received += frames
        if (
            self._received
            > (t - self._first_ns) * self.rate // NS_PER_S + self.runaway_s * self.rate
        ):
            # An unpaced device (ALSA null/file) would spin this thread and flood the loop.
            self.error = (
                f"input device {self.info.label} delivers audio faster than real time "
                "(an ALSA null or file device is not paced): live mode needs a real-time "
                f"device; {NO_DEVICE_HINT}"
            )
            self._notify()
            raise self.sd.CallbackAbort
        self._notify()

    def _notify(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            # A loop that already closed (shutdown) has nobody left to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _finished(self) -> None:
        if not self._closing and self.error is None:
            self.error = (
                f"input device {self.info.label} stopped delivering audio (unplugged?): "
                f"reconnect it or pick another with --input-device, or {NO_DEVICE_HINT}"
            )
        self._notify()

    async def read(self) -> CapturedBlock:
        """The next captured block; :class:`AudioError` when the device stopped or misbehaves."""
        wake = self._wake
        if wake is None:
            raise RuntimeError("InputDevice.read() before start()")
        deadline_ns = self._now() + round(self.stall_s * NS_PER_S)
        while True:
            if self.error is not None:
                raise AudioError(self.error)
            try:
                return self._blocks.get_nowait()
            except queue.Empty:
                pass
            wake.clear()
            # Re-check after clearing: a block put between get_nowait and clear is not lost.
            if not self._blocks.empty() or self.error is not None:
                continue
            left = (deadline_ns - self._now()) / NS_PER_S
            if left <= 0:
                self.error = (
                    f"input device {self.info.label} stopped delivering audio for "
                    f"{self.stall_s:g} s (unplugged or stalled?): reconnect it or pick another "
                    f"with --input-device, or {NO_DEVICE_HINT}"
                )
                raise AudioError(self.error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), left)

    def close(self) -> None:
        """Stop and close the stream (idempotent); never raises."""
        self._closing = True
        stream, self._stream = self._stream, None
        if stream is not None:
            _close_stream(self.sd, stream)


def _close_stream(sd: ModuleType, stream: Any, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Abort (drop what is buffered) and close, on a helper thread with a time limit: a
    driver stuck in a blocking call must not hang the shutdown that saves the results.

    Returns False when the driver did not let go in time. PortAudio is then wedged, and its
    exit handler (``Pa_Terminate``, registered by sounddevice) would hang the process at
    exit the same way: it is unregistered, and the operating system reclaims the device.
    """

    def close() -> None:
        with contextlib.suppress(Exception):
            stream.abort()
        with contextlib.suppress(Exception):
            stream.close()

    t = threading.Thread(target=close, name="voicelat-close-audio", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        handler = getattr(sd, "_exit_handler", None)
        if handler is not None:
            atexit.unregister(handler)
        return False
    return True


# -- playback ---------------------------------------------------------------------------------
class OutputDevice:
    """One output stream for the whole session; each reply plays through a :class:`DeviceSink`.

    The stream runs at the reply's own rate when the device accepts it (ALSA ``plug`` devices
    accept any), so no resampling happens on the measuring loop; otherwise at the device's
    default rate, with the reply resampled there. Between replies it plays silence.
    """

    def __init__(
        self,
        sd: ModuleType,
        info: DeviceInfo,
        *,
        latency: str | float = "low",
        clock: Clock | None = None,
    ) -> None:
        self.sd = sd
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self._now = self.clock.now_ns  # bound once: the callback runs every 20 ms
        self.info = info
        self.latency = latency
        self.rate: int | None = None
        self.latency_ns = 0
        self.resampling = False
        self._stream: Any = None
        self._sink: DeviceSink | None = None
        self._zeros = b""
        self._queue_end_ns = 0
        self._first_ns: int | None = None
        self._pulled = 0
        self._closing = False
        self.error: str | None = None
        self.underflows = 0

    def validate(self) -> None:
        """Refuse, before anything starts, a device that cannot play at its own default rate."""
        check_rate(self.sd, self.info, self.info.default_samplerate, "output")

    def open(self, rate: int | None = None) -> None:
        """(Re)open the stream at ``rate`` (default: the device's default rate)."""
        rate = rate or self.info.default_samplerate
        if self._stream is not None and self.rate == rate:
            return
        self._close_stream()
        self._closing = False
        try:
            stream = self.sd.RawOutputStream(
                device=self.info.index,
                samplerate=rate,
                channels=1,
                dtype="int16",
                blocksize=rate * BLOCK_MS // 1000,
                latency=self.latency,
                callback=self._callback,
                finished_callback=self._finished,
            )
            self.latency_ns = round(float(stream.latency) * NS_PER_S)
            self.rate = rate
            self._queue_end_ns = 0
            self._first_ns = None
            self._pulled = 0
            self._stream = stream
            stream.start()
        except (_portaudio_error(self.sd), ValueError) as exc:
            raise AudioError(
                f"cannot open output device {self.info.label} at {rate} Hz ({_reason(exc)}): "
                f"pick another with --output-device (see `voicelat devices`), or {NO_DEVICE_HINT}"
            ) from None

    def rate_for(self, rate: int) -> int:
        """Make the stream play ``rate`` Hz if the device accepts it; returns the stream rate."""
        if self._stream is not None and self.rate == rate:
            return rate
        if accepts_rate(self.sd, self.info, rate, "output"):
            self.open(rate)
            self.resampling = False
        elif self._stream is None:
            self.open(None)
            self.resampling = True
        else:
            self.resampling = True
        assert self.rate is not None
        return self.rate

    def attach(self, sink: DeviceSink) -> None:
        """Play ``sink`` from now on (one reply at a time)."""
        self._sink = sink

    def detach(self, sink: DeviceSink) -> None:
        """Stop playing ``sink`` (if it is the current one)."""
        if self._sink is sink:
            self._sink = None

    # PortAudio's thread: copy out of the current sink, or silence.
    def _callback(self, outdata: Any, frames: int, time_info: Any, status: Any) -> None:
        t = self._now()
        if status.output_underflow:
            self.underflows += 1
        # When this block reaches the speaker: the reported latency after the callback, but
        # never before the blocks pulled earlier have played (PortAudio pulls several blocks
        # back to back to fill the device buffer at start, and some drivers always do).
        rate = self.rate or 1
        play_ns = max(t + self.latency_ns, self._queue_end_ns)
        self._queue_end_ns = play_ns + frames * NS_PER_S // rate
        n = len(outdata)
        if len(self._zeros) < n:
            self._zeros = bytes(n)
        if self._first_ns is None:
            self._first_ns = t
        self._pulled += frames
        if self._pulled > (t - self._first_ns) * rate // NS_PER_S + RUNAWAY_S * rate:
            # An unpaced device (ALSA null/file) would spin this thread flat out.
            outdata[:] = self._zeros[:n]
            self.error = (
                f"output device {self.info.label} plays audio faster than real time (an ALSA "
                "null or file device is not paced): live mode needs a real-time device; "
                f"{NO_DEVICE_HINT}"
            )
            sink = self._sink
            if sink is not None:
                sink._device_failed()
            raise self.sd.CallbackAbort
        sink = self._sink
        if sink is None:
            outdata[:] = self._zeros[:n]
            return
        sink._pull(outdata, n, play_ns, self._zeros)

    def _finished(self) -> None:
        if not self._closing and self.error is None:
            self.error = (
                f"output device {self.info.label} stopped playing (unplugged?): reconnect it "
                f"or pick another with --output-device, or {NO_DEVICE_HINT}"
            )
            sink = self._sink
            if sink is not None:
                sink._device_failed()

    def _close_stream(self) -> None:
        self._closing = True
        stream, self._stream = self._stream, None
        if stream is not None:
            _close_stream(self.sd, stream)

    def close(self) -> None:
        """Stop and close the stream (idempotent); never raises."""
        sink = self._sink
        self._sink = None
        self._close_stream()
        if sink is not None:
            sink._device_failed()


class DeviceSink:
    """One reply played through an :class:`OutputDevice`, with the API of
    :class:`~voicelat.audio.SimulatedSink` (``feed``/``finish``/``cancel``/``play``,
    ``audible``, ``first_audible_ns``, ``underruns``) so the runner's reply phase drives it.

    ``feed`` runs on the loop: onset detection on the audio as fed (the same rule as the
    simulated sink), resampling only if the device refused the reply's rate, then an append
    under a lock. The PortAudio callback pulls from that buffer; when it pulls the onset
    sample it stamps ``first_audible_ns`` (when that block reaches the speaker, see
    :class:`OutputDevice`, plus the onset's offset in it) and wakes the loop. An underrun is the callback finding the buffer empty after playback started
    while more audio is still to come; its silence is summed in ``underrun_total_ns``.
    """

    def __init__(
        self,
        device: OutputDevice,
        *,
        threshold_dbfs: float = -40.0,
        window_ms: int = 10,
        record_path: str | os.PathLike[str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.device = device
        self.record_path = record_path
        #: The device's clock unless told otherwise: its stamps and this sink's must agree.
        self.clock: Clock = clock or getattr(device, "clock", None) or MonotonicClock()
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._detector = OnsetDetector(threshold_dbfs, window_ms)
        self._resampler: StreamResampler | None = None
        self.in_rate: int | None = None
        self.rate: int | None = None
        self.latency_ns = 0
        self.audible = asyncio.Event()
        """Set once ``first_audible_ns`` is known (never, if the audio stays silent)."""
        self._done = asyncio.Event()
        self.first_audible_ns: int | None = None
        self.started_ns: int | None = None
        self.ended_ns: int | None = None
        self.underruns = 0
        self.underrun_total_ns = 0
        self.fed_samples = 0
        self.played_samples = 0
        self._buf = bytearray()
        self._odd = b""
        self._onset: int | None = None  # onset sample index at the device rate
        self._history: deque[tuple[int, int, int]] = deque(maxlen=64)
        self._recorded: list[bytes] = []
        self._underrun_samples = 0
        self._in_underrun = False
        self._finished = False
        self._cancelled = False
        self._attached = False

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def feed(self, pcm_bytes: bytes, rate: int, arrival_ns: int) -> None:
        """Queue int16 mono audio for playback; ignored after :meth:`cancel`."""
        if self._cancelled or not pcm_bytes:
            return
        if self._finished:
            raise RuntimeError("DeviceSink.feed() after finish()")
        if self.in_rate is None:
            self.in_rate = rate
            self.rate = self.device.rate_for(rate)
            self.latency_ns = self.device.latency_ns
            if self.rate != rate:
                self._resampler = StreamResampler(rate, self.rate)
        elif rate != self.in_rate:
            raise AudioError(
                f"the sink got {rate} Hz audio after {self.in_rate} Hz audio in the same stream; "
                "resample it to one rate before playing"
            )
        data = self._odd + pcm_bytes
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        if cut == 0:
            return
        data = data[:cut]
        self.fed_samples += cut // 2
        if self._detector.onset is None:
            found = self._detector.feed(data, rate)
            if found is not None:
                self._set_onset(found)
        out = self._resampler.push(data) if self._resampler is not None else data
        with self._lock:
            self._buf += out
        if not self._attached:
            self._attached = True
            self.device.attach(self)

    def _set_onset(self, sample: int) -> None:
        assert self.in_rate is not None and self.rate is not None
        at_rate = sample * self.rate // self.in_rate
        with self._lock:
            self._onset = at_rate
            self._check_audible_locked()

    def finish(self) -> None:
        """No more audio; :meth:`play` returns once what was fed has played."""
        if self._finished:
            return
        self._finished = True
        if self._detector.onset is None and self.in_rate is not None:
            found = self._detector.flush()
            if found is not None:
                self._set_onset(found)
        if self._resampler is not None:
            tail = self._resampler.flush()
            with self._lock:
                self._buf += tail
        if not self._attached:
            # Nothing was ever fed: nothing to play.
            self._done.set()

    def cancel(self) -> None:
        """Stop now (barge-in): the speaker goes silent at the next callback."""
        with self._lock:
            self._cancelled = True
            self._buf.clear()
            if self.started_ns is not None and self.ended_ns is None:
                self.ended_ns = self.clock.now_ns()
        self.device.detach(self)
        self._done.set()

    def _device_failed(self) -> None:
        # Any thread: the stream is gone, so play() must not wait for callbacks.
        with self._lock:
            self._cancelled = True
            self._buf.clear()
        self._wake(self._done)

    async def play(self) -> None:
        """Wait until the fed audio has played (or the sink was cancelled)."""
        try:
            await self._done.wait()
        finally:
            self.device.detach(self)
            self._write_record()

    # PortAudio's thread. ``play_ns``: when the block's first sample reaches the speaker.
    def _pull(self, outdata: Any, n_bytes: int, play_ns: int, zeros: bytes) -> None:
        with self._lock:
            if self._cancelled:
                outdata[:] = zeros[:n_bytes]
                return
            take = min(len(self._buf), n_bytes - n_bytes % 2)
            chunk = bytes(self._buf[:take])
            del self._buf[:take]
            first = self.played_samples
            n = take // 2
            self.played_samples += n
            drained = self._finished and not self._buf
            if n:
                if self.started_ns is None:
                    self.started_ns = play_ns
                self._history.append((first, n, play_ns))
                self._in_underrun = False
                self._check_audible_locked()
            short = (n_bytes - take) // 2
            if short and not drained and self.started_ns is not None:
                # Due, nothing buffered, more to come: the speaker plays a gap.
                if not self._in_underrun:
                    self.underruns += 1
                    self._in_underrun = True
                self._underrun_samples += short
                assert self.rate is not None
                self.underrun_total_ns = self._underrun_samples * NS_PER_S // self.rate
        outdata[:take] = chunk
        if take < n_bytes:
            outdata[take:] = zeros[: n_bytes - take]
        if self.record_path is not None:
            self._recorded.append(chunk)
            if short and not drained and self.started_ns is not None:
                self._recorded.append(zeros[: 2 * short])
        if drained:
            assert self.rate is not None
            self.ended_ns = play_ns + n * NS_PER_S // self.rate
            self.device.detach(self)
            self._wake(self._done)

    def _check_audible_locked(self) -> None:
        onset = self._onset
        if onset is None or self.first_audible_ns is not None or self.rate is None:
            return
        for first, n, stamp in self._history:
            if first <= onset < first + n:
                self.first_audible_ns = stamp + (onset - first) * NS_PER_S // self.rate
                self._wake(self.audible)
                return

    def _wake(self, event: asyncio.Event) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            event.set()
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed: nobody waits
            self._loop.call_soon_threadsafe(event.set)

    def _write_record(self) -> None:
        if self.record_path is None or self.rate is None:
            return
        write_wav(self.record_path, PCM(b"".join(self._recorded), self.rate))


__all__ = [
    "CapturedBlock",
    "DeviceInfo",
    "DeviceSink",
    "FrameAssembler",
    "InputDevice",
    "LiveFrame",
    "OutputDevice",
    "StreamResampler",
    "accepts_rate",
    "check_rate",
    "list_devices",
    "load_sounddevice",
    "resolve_device",
]
