"""The core's calls layer (docs/ARCHITECTURE.md, "The core's layers")."""
