"""Where the profiler ran: a run's ``--region LABEL`` (pure).

A region is a short label the user picks (``eu-west``, ``us-east-1``, ``office.berlin``): the
run records it in its summary's ``run`` section and on every turn (``extra["region"]``), so
turns measured from two places and read together (two runs' turns in one results directory,
Ray nodes that carry their own label) are told apart by the per-region section of the
summary (``core/summaries/regions.py``). docs/NETWORK.md, "Regions".
"""

from __future__ import annotations

import re

__all__ = ["MAX_REGION_LEN", "NO_REGION", "REGION", "REGION_ENV", "check_region"]

#: The turn's ``extra`` key and the summary ``run`` key holding the label.
REGION = "region"
#: The environment variable a run (or a Ray node's raylet) takes its label from.
REGION_ENV = "VOICELAT_REGION"
#: Labels are table cells and file-name-safe words, not descriptions.
MAX_REGION_LEN = 40
#: Where turns without a label are counted when others have one (a label cannot be this:
#: parentheses are not in the alphabet).
NO_REGION = "(none)"

_LABEL = re.compile(r"[A-Za-z0-9._-]+")


def check_region(value: str) -> str:
    """``value`` as a region label, or ``ValueError`` with the one-line reason."""
    if not value:
        raise ValueError("a region label cannot be empty (e.g. eu-west)")
    if len(value) > MAX_REGION_LEN:
        raise ValueError(
            f"region label {value[:MAX_REGION_LEN]!r}... is longer than {MAX_REGION_LEN} "
            "characters: a short label (e.g. eu-west)"
        )
    if not _LABEL.fullmatch(value):
        raise ValueError(
            f"region label {value!r} may hold only letters, digits, '.', '_' and '-' (e.g. eu-west)"
        )
    return value
