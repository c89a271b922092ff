"""voicelat's version, in a module of its own: every layer may read it without importing the
package root (which re-exports the public API and so would make every reader part of a circle)."""

__version__ = "0.1.0"
