"""The engine: runs turns on the measuring event loop.

Public API, by module:

* ``turn``: :class:`TurnEngine` (one turn: listen -> endpoint -> STT -> LLM -> chunker -> TTS
  -> sink), :class:`TurnInput` (a prepared input), the :class:`FrameSource` and :class:`Sink`
  protocols;
* ``stageset``: :class:`StageSet` (a session's STT, LLM and TTS stages as one object);
* ``load``: sessions (:class:`SessionPool`) and the load shapes (closed and open loops);
* ``probes``: the loop-lag probe and the garbage-collector freeze;
* ``progress``: the :class:`Observer` protocol of progress events;
* ``writer``: the turns writer thread;
* ``runner``: :class:`Runner`, the fixture runner composing them;
* ``live``: live sessions (microphone in, speaker out).

Modules are imported by their full path (``voicelat.engine.turn``): importing this package
costs nothing.
"""
