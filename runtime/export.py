"""The exported policy: a SavedModel whose ``act(obs)`` maps a float32 batch of observations
(uint8 for images, which the networks scale) to the policy's deterministic actions
(``policy/`` and ``policy-best/`` of a run directory, what ``rlgen eval`` loads). Rank 0
exports it, and so does the evaluator process (:mod:`rlgen.runtime.evaluation.process`)
from its own copy of the policy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def export_policy(policy: Any, obs_shape: Sequence[int], target: Path, obs_dtype: str | None = None) -> None:
    """Write ``policy`` as a SavedModel with ``act(obs)`` to ``target``, atomically; ``obs``
    is ``obs_dtype`` (``uint8`` for images: fed as the env gives them; None: float32)."""
    import tensorflow as tf

    spec = tf.TensorSpec([None, *obs_shape], tf.as_dtype(obs_dtype or "float32"), name="obs")

    class ExportedPolicy(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="policy")
            self.policy = policy

        # straight-line code: autograph's conversion was 0.6 of the first export's 0.8 s
        @tf.function(input_signature=[spec], autograph=False)
        def act(self, obs: tf.Tensor) -> tf.Tensor:
            return self.policy.act(obs, deterministic=True)[0]

    from .devices import host_scope

    with host_scope():  # the exported policy runs on the CPU, wherever the rank's fragments are
        save(ExportedPolicy(), target)


def save(module: Any, target: Path) -> None:
    """``tf.saved_model.save`` to ``target`` atomically: written aside, then put in place (a
    reader sees the old or the new one)."""
    import shutil

    import tensorflow as tf

    tmp = target.with_name(f".{target.name}.tmp")
    tf.saved_model.save(module, str(tmp))
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
