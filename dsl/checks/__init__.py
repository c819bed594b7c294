"""Semantic checks: each is a generator of :class:`Finding`s over a :class:`Context`.

Checks are registered with :func:`check` (:mod:`.registry`) in the modules imported here,
and run in registration order by :func:`run_checks`. Every check's
docstring shows the smallest YAML it catches.
"""

from __future__ import annotations

from rlgen.dsl.checks.registry import CHECKS, Context, check, run_checks

# Registration order is report order within a file (after sorting by position).
# isort: off
from rlgen.dsl.checks import names  # noqa: F401
from rlgen.dsl.checks import spaces  # noqa: F401
from rlgen.dsl.checks import agents  # noqa: F401
from rlgen.dsl.checks import memory  # noqa: F401
from rlgen.dsl.checks import partitions  # noqa: F401
from rlgen.dsl.checks import train  # noqa: F401
from rlgen.dsl.checks import devices  # noqa: F401
# isort: on

__all__ = ["CHECKS", "Context", "check", "run_checks"]
