"""Regenerate ``docs/tui.svg``: ``python -m tests.tui.screenshot`` (from the repository root).

The saved test run at 120x40, waterfall at P90, the cursor on the slowest turn: the same
fixture and size as the snapshot tests, so the picture in the docs is one the tests pin.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.tui.helpers import saved_model
from voicelat.tui.app import VoicelatApp

DOCS_DEFAULT = Path(__file__).resolve().parents[2] / "docs"
#: Where the picture is written (a test points it elsewhere to compare with the shipped one).
DOCS = DOCS_DEFAULT


async def main() -> None:
    """Drive the app with Pilot and save its screen as SVG."""
    app = VoicelatApp(saved_model())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(*["down"] * 12, "p")
        await pilot.pause()
        app.save_screenshot("tui.svg", path=str(DOCS))


if __name__ == "__main__":
    asyncio.run(main())
