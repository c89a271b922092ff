"""Scores of a measured run, computed after it and never on its measuring loop: the cost of each
turn (core/judge/cost.py), the reply's intelligibility (WER of the reply audio transcribed back against
the text sent to the TTS) and its sound (DNSMOS). ``voicelat score RUN`` runs them."""
