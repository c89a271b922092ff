"""The core's summaries layer (docs/ARCHITECTURE.md, "The core's layers")."""
