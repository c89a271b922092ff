"""The ``voicelat`` command: one module per subcommand, shared argument helpers in ``args``."""
