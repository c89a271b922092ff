"""The terminal UI (Textual): a live run (``voicelat run``) or a saved one (``voicelat view``).

``model`` holds the data, ``render`` the pure renderables, ``app`` (+ ``app.tcss``) the layout,
``live`` the measuring child process, ``protocol`` the JSON lines it reports through, ``cli``
the ``view`` command; ``compare`` is the comparison screen. ``model``, ``render``, ``live``,
``protocol`` and ``cli`` never import Textual.
"""
