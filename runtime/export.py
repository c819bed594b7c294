"""The exported policy: a SavedModel whose ``act(obs)`` maps a float32 batch of observations
(uint8 for images, which the networks scale) to the policy's deterministic actions
(``policy/`` and ``policy-best/`` of a run directory, what ``rlgen eval`` loads). Rank 0
exports it, and so does the evaluator process (:mod:`rlgen.runtime.evaluation.process`)
from its own copy of the policy. A multi-agent policy's ``obs`` are rows ``b*N + i``; with
several agent groups, ``obs`` is a tuple of one batch per group and ``act`` returns one batch
of actions per group (:class:`rlgen.runtime.policies.GroupPolicies`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def observation_spec(env: Mapping[str, Any]) -> Any:
    """What the exported ``act`` takes for a run's ``env`` (its RunConfig's): one
    ``tf.TensorSpec`` of a batch of observations, or with several agent groups a tuple of one
    per group (``obs_shapes``)."""
    import tensorflow as tf

    dtype = tf.as_dtype(env.get("obs_dtype") or "float32")
    if len(env.get("groups") or ()) > 1:
        return tuple(tf.TensorSpec([None, *shape], dtype, name=f"obs_{g}") for g, shape in env["obs_shapes"].items())
    return tf.TensorSpec([None, *env.get("obs_shape", [])], dtype, name="obs")


def export_policy(policy: Any, env: Mapping[str, Any], target: Path) -> None:
    """Write ``policy`` as a SavedModel with ``act(obs)`` to ``target``, atomically; ``obs``
    as :func:`observation_spec` says for ``env`` (uint8 images: fed as the env gives them). A
    recurrent policy's has ``initial_state(rows)`` and ``act(obs, state, first) -> (action, state)``."""
    import tensorflow as tf

    spec = observation_spec(env)

    class ExportedPolicy(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="policy")
            self.policy = policy

        # straight-line code: autograph's conversion was 0.6 of the first export's 0.8 s
        @tf.function(input_signature=[spec], autograph=False)
        def act(self, obs: Any) -> Any:
            return self.policy.act(obs, deterministic=True)[0]

    from .devices import host_scope

    recurrent = getattr(policy, "recurrent", False)
    with host_scope():  # the exported policy runs on the CPU, wherever the rank's fragments are
        save(_recurrent_export(policy, spec) if recurrent else ExportedPolicy(), target)


def _recurrent_export(policy: Any, spec: Any) -> Any:
    """A recurrent policy's SavedModel module: ``initial_state(rows)`` (zeros) and ``act(obs,
    state, first) -> (action, state)``; its state goes in and out, and starts from zeros where
    ``first``."""
    import tensorflow as tf

    class ExportedRecurrentPolicy(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="policy")
            self.policy = policy

        @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="rows")], autograph=False)
        def initial_state(self, rows: Any) -> Any:
            return self.policy.initial_state(rows)

        @tf.function(
            input_signature=[
                spec,
                tf.TensorSpec([None, policy.network.state_size], tf.float32, name="state"),
                tf.TensorSpec([None], tf.bool, name="first"),
            ],
            autograph=False,
        )
        def act(self, obs: Any, state: Any, first: Any) -> Any:
            action, _, state = self.policy.act_recurrent(obs, state, first, deterministic=True)
            return action, state

    return ExportedRecurrentPolicy()


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
