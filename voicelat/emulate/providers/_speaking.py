"""What the realtime speech-to-speech emulators share: one spoken reply, synthesized at start-up."""

from __future__ import annotations

from typing import ClassVar

from voicelat.emulate.base import Emulator
from voicelat.emulate.content import Speaker
from voicelat.emulate.profile import EmulatorConfig


class SpeakingEmulator(Emulator):
    """An emulator that answers every turn with ``content["reply"]`` spoken at ``REPLY_RATE``."""

    REPLY_RATE: ClassVar[int]

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.speaker = Speaker.from_content(self.content)
        self._pcm = b""

    async def startup(self) -> None:
        await self.speaker.startup()
        # The reply is the same every turn: synthesized once, never on a turn's clock.
        self._pcm = await self.speaker.speak(str(self.content["reply"]), self.REPLY_RATE)
