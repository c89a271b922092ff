"""Testing helpers for users' own suites: the pytest plugin (a latency budget as a test)."""
