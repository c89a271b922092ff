"""voicelat: a latency profiler for realtime voice pipelines."""

__version__ = "0.1.0"
