"""IPPO's settings: MAPPO's (:mod:`rlgen.algorithms.mappo.config`)."""

from __future__ import annotations

from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig

__all__ = ["METRICS", "MAPPOConfig"]
