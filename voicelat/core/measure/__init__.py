"""The core's measure layer (docs/ARCHITECTURE.md, "The core's layers")."""
