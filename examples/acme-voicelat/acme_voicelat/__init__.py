"""Acme's voicelat stages (an example third-party package; see voicelat's docs/STAGES.md)."""

from acme_voicelat.llm import AcmeLLM, AcmeLLMOptions

__all__ = ["AcmeLLM", "AcmeLLMOptions"]
