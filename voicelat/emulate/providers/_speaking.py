"""What the realtime speech-to-speech emulators share: the spoken reply (and an optional
greeting), synthesized at start-up, never on a turn's clock."""

from __future__ import annotations

from typing import ClassVar

from voicelat.emulate.base import Emulator
from voicelat.emulate.content import Speaker
from voicelat.emulate.profile import EmulatorConfig


class SpeakingEmulator(Emulator):
    """An emulator that answers every turn with ``content["reply"]`` spoken at ``REPLY_RATE``,
    and opens a session with ``content["greeting"]`` when one is set."""

    REPLY_RATE: ClassVar[int]

    def __init__(self, config: EmulatorConfig) -> None:
        super().__init__(config)
        self.speaker = Speaker.from_content(self.content)
        self._pcm = b""
        self._greeting_pcm = b""

    async def startup(self) -> None:
        await self.speaker.startup()
        # The reply is the same every turn: synthesized once, never on a turn's clock.
        self._pcm = await self.speaker.speak(str(self.content["reply"]), self.REPLY_RATE)
        greeting = str(self.content.get("greeting") or "")
        if greeting:
            self._greeting_pcm = await self.speaker.speak(greeting, self.REPLY_RATE)

    def spoken(self, greeting: bool) -> tuple[str, bytes]:
        """The text and PCM of a reply, or of the greeting."""
        if greeting:
            return str(self.content["greeting"]), self._greeting_pcm
        return str(self.content["reply"]), self._pcm
