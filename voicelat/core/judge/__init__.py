"""The core's judge layer (docs/ARCHITECTURE.md, "The core's layers")."""
