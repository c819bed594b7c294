"""IPPO's learner: :class:`rlgen.algorithms.mappo.learner.MAPPOLearner` without a state."""

from __future__ import annotations

from rlgen.algorithms.mappo.learner import MAPPOLearner

__all__ = ["MAPPOLearner"]
