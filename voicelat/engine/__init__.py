"""The engine: runs turns on the measuring event loop.

Public API, by module:

* ``turn``: :class:`TurnEngine`, the one timeout / cancel / figures shell of every turn shape;
* ``cascade_turn``, ``s2s_turn``, ``agent_turn``: the three shapes (:class:`CascadeTurnEngine`:
  listen -> endpoint -> STT -> LLM -> chunker -> TTS -> sink; :class:`S2STurnEngine`: one
  realtime model; :class:`AgentTurnEngine`: a running agent over its transport, then its trace);
  ``shapes``: :func:`turn_engine_for`, the shape a pipeline runs;
* ``phases``: the public pieces a turn is made of (:class:`Listener`, :class:`Playback`,
  :class:`CascadeReply`);
* ``turn_input``: :class:`TurnInput` (a prepared input), the :class:`FrameSource` and
  :class:`Sink` protocols;
* ``stageset``: :class:`StageSet`, tagged by shape (:class:`CascadeStageSet`,
  :class:`S2SStageSet`, :class:`AgentStageSet`);
* ``load``: sessions (:class:`SessionPool`) and the load shapes (closed and open loops);
* ``probes``: the loop-lag probe and the garbage-collector freeze;
* ``progress``: the :class:`Observer` protocol of progress events;
* ``writer``: the turns writer thread;
* ``runner``: :class:`Runner`, the fixture runner composing them;
* ``live``: live sessions (microphone in, speaker out).

Modules are imported by their full path (``voicelat.engine.turn``): importing this package
costs nothing.
"""
