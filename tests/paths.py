"""Where the tests' data lives."""

from pathlib import Path

# Verbatim copies of the public guide's YAML (see tests/data/guide/PROVENANCE.md).
GUIDE = Path(__file__).parent / "data" / "guide"
