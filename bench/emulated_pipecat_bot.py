"""The example Pipecat bot (examples/pipecat-bot/bot.py) with its providers behind voicelat's
OpenAI emulator instead of local models: for bench/watch_bot_soak.py.

Everything but the three services is the example bot's own code, run as it runs: its FastAPI
app and ``/ws-client`` route (one fresh pipeline per connection, so concurrent calls work), its
Silero VAD and speech-timeout turn stop, ``enable_tracing`` / ``enable_turn_tracking`` with the
conversation id from the URL, and its OTLP/HTTP exporter (a BatchSpanProcessor, 50 ms delay).
The services are Pipecat's own ``OpenAISTTService``, ``OpenAILLMService`` and
``OpenAITTSService`` (their real HTTP clients, their ``@traced_*`` spans and TTFB metrics)
pointed at ``voicelat serve openai``: no model loads, so five calls at once fit a loaded
2-core box, and the spans carry the stt, llm and tts children a production bot's do.

    python bench/emulated_pipecat_bot.py --port 9150 --llm-url http://127.0.0.1:8401 \
        --otlp-endpoint http://127.0.0.1:4318/v1/traces
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEY = "bench"  # the emulator wants a key sent, as OpenAI does; any value


def _bot_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "pipecat_example_bot", ROOT / "examples" / "pipecat-bot" / "bot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    bot = _bot_module()

    def services(args: argparse.Namespace) -> tuple[Any, Any, Any]:
        from pipecat.services.openai.llm import OpenAILLMService
        from pipecat.services.openai.stt import OpenAISTTService
        from pipecat.services.openai.tts import OpenAITTSService
        from pipecat.transcriptions.language import Language

        base = f"{args.llm_url.rstrip('/')}/v1"
        stt = OpenAISTTService(
            api_key=KEY,
            base_url=base,
            settings=OpenAISTTService.Settings(
                model="gpt-4o-mini-transcribe", language=Language.EN
            ),
        )
        llm = OpenAILLMService(
            api_key=KEY,
            base_url=base,
            settings=OpenAILLMService.Settings(
                model=args.llm_model,
                system_instruction=bot.SYSTEM_PROMPT,
                max_tokens=args.max_tokens,
            ),
        )
        tts = OpenAITTSService(
            api_key=KEY,
            base_url=base,
            settings=OpenAITTSService.Settings(model="gpt-4o-mini-tts", voice="alloy"),
        )
        return stt, llm, tts

    bot._services = services
    bot._check_models = lambda args: None  # no Whisper or Piper files: nothing to check
    argv = sys.argv[1:]
    if "--llm-model" not in argv:
        argv += ["--llm-model", "gpt-4o-mini"]
    bot.main(argv)


if __name__ == "__main__":
    main()
