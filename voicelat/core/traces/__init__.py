"""The core's traces layer (docs/ARCHITECTURE.md, "The core's layers")."""
