"""What the off-policy learners (DQN, SAC, TD3) share: many gradient steps in one compiled call.

One ``update`` is one TensorFlow call: it takes ``K`` minibatches of replayed transitions
stacked as ``[K, batch, ...]`` (:meth:`rlgen.runtime.replay.ReplayBuffer.sample_many`), or one
minibatch ``[batch, ...]``, and runs ``K`` gradient steps in an in-graph loop, each the
learner's own ``_train_step``; the call returns the learner's ``METRICS`` over the K steps.
``reduce_gradients`` (e.g. a Horovod allreduce for the multi-learner policy) is applied inside
the graph to each gradient list a step computes (:meth:`OffPolicyLearner._reduced`). The
update compiles with XLA unless it reduces gradients (Horovod's ops have no XLA kernels) or
the config says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from rlgen.runtime.convnets import has_convolutions
from rlgen.runtime.optim import as_schedule
from rlgen.runtime.replay import Transitions
from rlgen.runtime.tfutil import flat_caller, to_tensor

GradientReducer = Callable[[list[tf.Tensor]], list[tf.Tensor]]


def stack_transitions(
    batches: Transitions | Sequence[np.ndarray], obs_shape: tuple[int, ...], action_shape: tuple[int, ...]
) -> tuple[np.ndarray, ...]:
    """The five fields as ``[K, batch, ...]`` arrays (a K axis added to one minibatch), shapes checked."""
    obs, actions, rewards, next_obs, terminated = batches
    if np.ndim(obs) == len(obs_shape) + 1:  # one minibatch: add the K axis
        obs, actions, rewards, next_obs, terminated = (
            np.expand_dims(x, 0) for x in (obs, actions, rewards, next_obs, terminated)
        )
    k, b = np.shape(obs)[:2]
    want = {
        "obs": (k, b, *obs_shape),
        "actions": (k, b, *action_shape),
        "rewards": (k, b),
        "next_obs": (k, b, *obs_shape),
        "terminated": (k, b),
    }
    fields = (obs, actions, rewards, next_obs, terminated)
    for (key, shape), x in zip(want.items(), fields, strict=True):
        if np.shape(x) != shape:
            raise ValueError(f"{key} has shape {np.shape(x)}; expected {shape}")
    return fields


class OffPolicyLearner(tf.Module):
    """The compiled K-step update (see the module docstring). A learner sets ``obs_shape``,
    ``action_shape`` and its variables, then calls :meth:`_compile_update`; it defines
    ``_train_step(batch, lr)`` (one gradient step, returning a vector of ``step_values``
    figures) and, where the means of those and the learning rate are not its metrics,
    ``_metrics``."""

    #: the names of the vector ``update`` returns, in order
    METRICS: tuple[str, ...] = ()
    #: the dtype replayed actions are fed in (DQN's are indices)
    ACTION_DTYPE = tf.float32
    #: the dtype replayed observations are fed in (uint8 images stay uint8 up to the networks)
    obs_dtype: tf.DType = tf.float32

    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]

    def _compile_update(self, config: Any, reduce_gradients: GradientReducer | None, step_values: int) -> None:
        self._lr = as_schedule(config.lr)
        self._reduce = reduce_gradients
        self._step_values = step_values
        jit = config.jit_compile
        if jit is None:  # XLA unless gradients are reduced (no XLA kernels) or convolutions (slow XLA on CPU)
            jit = reduce_gradients is None and not has_convolutions(self)
        obs, act = self.obs_shape, self.action_shape
        kb = [None, None]
        signature = [
            tf.TensorSpec([*kb, *obs], self.obs_dtype),
            tf.TensorSpec([*kb, *act], self.ACTION_DTYPE),
            tf.TensorSpec(kb, tf.float32),
            tf.TensorSpec([*kb, *obs], self.obs_dtype),
            tf.TensorSpec(kb, tf.float32),
            tf.TensorSpec([], tf.float32),
        ]
        self.update_fn = tf.function(self._update, input_signature=signature, jit_compile=jit, autograph=False)
        self._call = flat_caller(self.update_fn)

    # --- host API -----------------------------------------------------------------

    def update(self, batches: Transitions | Sequence[np.ndarray], progress: float = 0.0) -> dict[str, float]:
        """Run one gradient step per minibatch of ``batches`` (fields ``[K, batch, ...]``, or
        ``[batch, ...]`` for one step) in one compiled call; ``progress`` in [0, 1] drives the
        learning-rate schedule. Returns ``METRICS`` over the K steps."""
        arrays = stack_transitions(batches, self.obs_shape, self.action_shape)
        dtypes = (self.obs_dtype, self.ACTION_DTYPE, tf.float32, self.obs_dtype, tf.float32)
        (out,) = self._call(
            *(to_tensor(x, d) for x, d in zip(arrays, dtypes, strict=True)), tf.constant(progress, tf.float32)
        )
        return dict(zip(self.METRICS, out.numpy().tolist(), strict=True))

    # --- graphs -------------------------------------------------------------------

    def _update(
        self,
        obs: tf.Tensor,
        actions: tf.Tensor,
        rewards: tf.Tensor,
        next_obs: tf.Tensor,
        terminated: tf.Tensor,
        progress: tf.Tensor,
    ) -> tf.Tensor:
        lr = self._lr(progress)
        steps = tf.shape(obs)[0]

        def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            batch = (obs[k], actions[k], rewards[k], next_obs[k], terminated[k])
            return k + 1, totals + self._train_step(batch, lr)

        _, totals = tf.while_loop(lambda k, _: k < steps, step, (tf.constant(0), tf.zeros([self._step_values])))
        return self._metrics(totals, steps, lr)

    def _train_step(self, batch: tuple[tf.Tensor, ...], lr: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def _metrics(self, totals: tf.Tensor, steps: tf.Tensor, lr: tf.Tensor) -> tf.Tensor:
        """The metrics vector from the K steps' summed figures: their means, then the learning rate."""
        means = totals / tf.cast(tf.maximum(steps, 1), tf.float32)
        return tf.concat([means, tf.reshape(lr, [1])], axis=0)

    def _reduced(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return list(grads) if self._reduce is None else list(self._reduce(list(grads)))
