"""The core's base layer (docs/ARCHITECTURE.md, "The core's layers")."""
