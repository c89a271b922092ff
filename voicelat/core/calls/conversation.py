"""A call's conversation so far, as an LLM stage's prompt (pure).

A single turn prompts the LLM with the transcript alone. A turn of a call prompts it with a
:class:`Conversation`: the earlier exchanges (what the agent said, what the user said) and
the user's new words, so the model sees the context a real agent's does and the prompt grows
turn by turn. ``str(conversation)`` is the new words, so a stage that knows nothing of calls
still gets the transcript.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Conversation", "Message", "prompt_text"]

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Message:
    """One thing said in the call: by the ``user`` or by the agent (``assistant``)."""

    role: Role
    content: str


@dataclass(frozen=True)
class Conversation:
    """The call's messages before this turn (oldest first) and the user's new words."""

    history: tuple[Message, ...]
    text: str

    def __str__(self) -> str:
        return self.text

    def messages(self) -> list[dict[str, str]]:
        """The chat messages: the history, then the new user message."""
        out = [{"role": m.role, "content": m.content} for m in self.history]
        out.append({"role": "user", "content": self.text})
        return out

    def then(self, reply: str) -> Conversation:
        """The conversation after this turn, with the agent's ``reply`` (the next turn's
        history; its ``text`` is empty until the user speaks again)."""
        said = (Message("user", self.text),) if self.text else ()
        answered = (Message("assistant", reply),) if reply else ()
        return Conversation((*self.history, *said, *answered), "")

    def with_text(self, text: str) -> Conversation:
        """The same history and the user's new words ``text``."""
        return Conversation(self.history, text)


def prompt_text(template: str, prompt: str | Conversation) -> str:
    """A completions prompt from ``template`` (its ``{text}`` placeholder is the user's new
    words). A conversation's history goes where ``{history}`` stands, else on the lines
    before the line holding ``{text}``, as ``User: ...`` / ``Assistant: ...`` lines."""
    text = str(prompt)
    history = prompt.history if isinstance(prompt, Conversation) else ()
    lines = "".join(
        f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}\n" for m in history
    )
    if "{history}" in template:
        return template.replace("{history}", lines).replace("{text}", text)
    if lines and "{text}" in template:
        head, _, tail = template.partition("{text}")
        cut = head.rfind("\n") + 1  # the start of the line holding {text}
        return head[:cut] + lines + head[cut:] + text + tail
    return template.replace("{text}", text)
