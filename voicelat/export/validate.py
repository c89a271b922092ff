"""The JSON Schemas of summary.json and of a turns.jsonl line, shipped in the package.

``jsonschema`` is only needed to *validate* (tests, scripts); reading the schemas needs nothing.
"""

from __future__ import annotations

import importlib
import json
from functools import cache
from importlib import resources
from typing import Any

from voicelat.export.base import ExportError

SUMMARY_SCHEMA = "summary.schema.json"
TURN_SCHEMA = "turn.schema.json"
SCHEMAS: tuple[str, ...] = (SUMMARY_SCHEMA, TURN_SCHEMA)


@cache
def _text(name: str) -> str:
    if name not in SCHEMAS:
        raise ExportError(f"no schema {name!r}: voicelat ships {', '.join(SCHEMAS)}")
    return (resources.files("voicelat.export") / "schemas" / name).read_text("utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """A fresh copy of one shipped schema (``SUMMARY_SCHEMA`` or ``TURN_SCHEMA``)."""
    doc: dict[str, Any] = json.loads(_text(name))
    return doc


def schema_errors(document: object, name: str) -> list[str]:
    """Every violation of schema ``name`` by ``document``, as ``"<json path>: <message>"``."""
    try:
        # Imported by name: jsonschema ships no type hints, and its stubs are not a dependency.
        jsonschema: Any = importlib.import_module("jsonschema")
    except ImportError:  # pragma: no cover - depends on the environment
        raise ExportError("validating needs jsonschema: pip install jsonschema") from None
    validator = jsonschema.Draft202012Validator(load_schema(name))
    return [
        f"{e.json_path}: {e.message}"
        for e in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    ]


def validate(document: object, name: str) -> None:
    """Raise :class:`ExportError` naming the first violations of schema ``name``."""
    errors = schema_errors(document, name)
    if errors:
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise ExportError(f"not a valid {name.removesuffix('.schema.json')}: {shown}")
