"""The provider's answer to a flush that no turn waits for: read and dropped between turns.

With ``[endpointing] mode = "provider"`` a turn ends on the provider's end-of-turn, but the
client keeps sending audio until that message arrives (the provider decided a network trip
and its processing earlier). When the user was already speaking again in that window (a
provider cut-off inside a pause), the provider holds a new, open utterance. Left alone, the
next turn's leading silence ends it and the next turn "ends" a few hundred ms into its own
audio on the previous turn's words (bench/provider_eot.py found 8 of 66 turns ended so).

So the STT stages flush that leftover at the end of the turn (Deepgram ``Finalize``,
AssemblyAI ``ForceEndpoint``) without waiting for the answer: the turn that was cut keeps
the provider's cut-off as its endpoint and what the provider had said by then as its
transcript, and its reply is not delayed. The answer is neither that turn's nor the next's:
:class:`LeftoverDrain` reads it off the socket in the background (while the cut turn's reply
plays) and drops it, up to a bounded wait; the next request waits for the drain in
``prepare()``, outside its measured window. What still comes later is told apart by stream
time (each protocol ignores results whose words ended before the request's first audio).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed

from voicelat.stages._ws import WsConn

__all__ = ["DRAIN_S", "LeftoverDrain"]

#: How long the drain waits for the provider's answer to a flush, from the flush. Providers
#: answer a flush in a network trip plus their finalization (the emulators: 120 ms; real
#: Deepgram and AssemblyAI a few hundred ms); AssemblyAI answers nothing when no speech was
#: heard, so the drain may run to this bound; a later answer is caught by stream time.
DRAIN_S = 1.0


class LeftoverDrain:
    """At most one background read of a connection after a request that flushed a leftover."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    def start(
        self, conn: WsConn, answered: Callable[[str | bytes], bool], *, wait_s: float = DRAIN_S
    ) -> None:
        """Read ``conn`` until ``answered(message)`` is true, it closes, or ``wait_s``."""
        self._task = asyncio.create_task(_drain(conn, answered, wait_s))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def settle(self) -> None:
        """Wait for the drain (bounded by its own ``wait_s``): the connection is ours again."""
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await task

    async def cancel(self) -> None:
        """Stop the drain now (the stage is closing)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _drain(conn: WsConn, answered: Callable[[str | bytes], bool], wait_s: float) -> None:
    # Cancelling recv() on timeout loses nothing: a message that comes later stays queued
    # for the next request, whose protocol tells it apart by stream time.
    with contextlib.suppress(TimeoutError, ConnectionClosed):
        async with asyncio.timeout(wait_s):
            while True:
                message, _ = await conn.recv()
                if answered(message):
                    return
