"""IPPO: its home is :mod:`rlgen.algorithms.mappo` (one learner for both kinds); this
package names it where a kind's home is found by the kind's name (the registry, the
template part, generated code's metrics import)."""

from __future__ import annotations

from rlgen.algorithms.mappo import IPPO as ALGORITHM
from rlgen.algorithms.mappo.config import METRICS

__all__ = ["ALGORITHM", "METRICS"]
