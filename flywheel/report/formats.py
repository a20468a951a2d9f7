"""The report's output formats, importable without pandas (the CLI's option list needs only these)."""

from __future__ import annotations

from typing import Literal

Format = Literal["table", "csv", "json", "md", "curve-csv"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "md", "curve-csv")
