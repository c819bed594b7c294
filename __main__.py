"""``python -m rlgen``."""

from rlgen.cli import entry

entry()
