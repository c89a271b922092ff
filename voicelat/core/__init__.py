"""The pure core: the metric contract, events, turns, recorder, metrics, statistics, summaries,
budgets, comparisons and plans. No I/O library is imported here (no asyncio, numpy, httpx,
websockets, textual or rich): everything is tested with plain integers."""
