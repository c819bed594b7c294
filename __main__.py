"""``python -m rlgen``."""

from rlgen.cli import main

raise SystemExit(main())
