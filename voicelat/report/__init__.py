"""Renderers of turns and summaries: plain text, JSON, Markdown, JUnit, HTML/SVG."""
