"""DQN with many gradient steps in one compiled call.

One :meth:`DQNLearner.update` is one TensorFlow call: it takes ``K`` minibatches
stacked as ``[K, batch, ...]`` (:meth:`rlgen.runtime.replay.ReplayBuffer.sample_many`)
and runs ``K`` gradient steps in an in-graph loop. Semantics follow
Stable-Baselines3's DQN (and its defaults):

* TD target ``r + gamma * (1 - terminated) * max_a Q_target(next_obs, a)``; a
  truncated episode's last transition keeps its bootstrap term (see
  :mod:`rlgen.runtime.replay`). With ``double=True`` the next action is the online
  network's argmax, valued by the target network (van Hasselt et al., 2016; not in
  SB3).
* Loss: Huber / smooth L1 (``delta = 1``), mean over the minibatch, as
  ``F.smooth_l1_loss``. Gradients are clipped to a global norm of ``max_grad_norm``.
* The target network is a copy of the online one made at construction (same
  architecture and weights, own variables). :meth:`DQNLearner.sync_target` copies
  the weights (``tau == 1``) or moves them by Polyak averaging
  ``target = tau * online + (1 - tau) * target``. How often to call it is the
  loop's business (SB3's ``target_update_interval`` counts env steps).
* ``reduce_gradients`` (e.g. a Horovod allreduce for the multi-learner policy) is
  applied inside the graph to the list of gradients, before clipping.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import tensorflow as tf

from rlgen.algorithms.dqn.config import METRICS, STEP_METRICS, DQNConfig
from rlgen.algorithms.offpolicy import GradientReducer, OffPolicyLearner
from rlgen.runtime.optim import build_optimizer, clip_by_global_norm
from rlgen.runtime.qvalue import QNetwork
from rlgen.runtime.tfutil import flat_caller


def huber(x: tf.Tensor, delta: float = 1.0) -> tf.Tensor:
    """Elementwise Huber / smooth L1: ``0.5 x^2`` for ``|x| < delta``, else ``delta (|x| - 0.5 delta)``."""
    a = tf.abs(x)
    return tf.where(a < delta, 0.5 * tf.square(x), delta * (a - 0.5 * delta))


class DQNLearner(OffPolicyLearner):
    """Learns a :class:`QNetwork` from replayed transitions; owns its target network.
    ``update`` returns ``loss``, ``q`` (mean Q of the taken actions), ``target_q`` (mean TD
    target) and ``grad_norm`` (before clipping), averaged over its K steps, and ``lr``."""

    METRICS = METRICS
    ACTION_DTYPE = tf.int32

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"params", "update_fn", "sync_fn", "_call", "_sync"})

    def __init__(
        self,
        q: QNetwork,
        config: DQNConfig,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        target: QNetwork | None = None,
        reduce_gradients: GradientReducer | None = None,
        name: str | None = "dqn",
        obs_dtype: tf.DType | str = tf.float32,
    ) -> None:
        super().__init__(name=name)
        if not 0.0 < config.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {config.tau}")
        self.q, self.config = q, config
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.obs_dtype = tf.as_dtype(obs_dtype)
        self.action_shape = tuple(int(d) for d in action_shape)
        if target is None:
            target = QNetwork(copy.deepcopy(q.network), q.num_actions, name="q_target")
        self.target = target
        self.params = list(q.trainable_variables)
        self._target_vars = list(target.network.trainable_variables)
        self._online_vars = list(q.network.trainable_variables)
        if len(self._target_vars) != len(self._online_vars) or any(
            a.shape != b.shape for a, b in zip(self._target_vars, self._online_vars, strict=True)
        ):
            raise ValueError("target network does not match the online network's variables")
        if any(a is b for a, b in zip(self._target_vars, self._online_vars, strict=True)):
            raise ValueError("target network shares variables with the online network")
        self.optimizer = build_optimizer(config.optimizer, self.params)
        self._compile_update(config, reduce_gradients, len(STEP_METRICS))
        self.sync_fn = tf.function(self._sync_target, input_signature=[], autograph=False)
        self._sync = flat_caller(self.sync_fn)
        self._sync()  # the copy starts equal to the online network (also for a given ``target``)

    def replicated_variables(self) -> list[tf.Variable]:
        """The learner's state every replica must hold equal (its networks, targets and
        optimizer state; not its random streams): rank 0 broadcasts it at the start, so that
        a resumed multi-learner run continues from rank 0's checkpoint on every rank."""
        return [*self.optimizer.variables, *self._target_vars]

    # --- host API -----------------------------------------------------------------

    def sync_target(self) -> None:
        """Hard copy (``tau == 1``) or Polyak step of the online weights into the target."""
        self._sync()

    def td_target(self, rewards: tf.Tensor, next_obs: tf.Tensor, terminated: tf.Tensor) -> tf.Tensor:
        """``r + gamma * (1 - terminated) * Q_target(next_obs, a*)``, ``a*`` the target's
        argmax, or the online network's with ``double``."""
        next_q = self.target.values(next_obs)
        if self.config.double:
            best = self.q.greedy(next_obs)
            next_v = tf.gather(next_q, best, batch_dims=1)
        else:
            next_v = tf.reduce_max(next_q, axis=-1)
        return rewards + self.config.gamma * (1.0 - terminated) * next_v

    def loss(
        self, obs: tf.Tensor, actions: tf.Tensor, rewards: tf.Tensor, next_obs: tf.Tensor, terminated: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``(mean Huber loss, Q(obs, actions), TD targets)`` of one minibatch ``[batch, ...]``."""
        target = tf.stop_gradient(self.td_target(rewards, next_obs, terminated))
        q = tf.gather(self.q.values(obs), tf.cast(actions, tf.int32), batch_dims=1)
        return tf.reduce_mean(huber(q - target)), q, target

    # --- graphs -------------------------------------------------------------------

    def _sync_target(self) -> list[tf.Tensor]:
        tau = float(self.config.tau)
        for t, o in zip(self._target_vars, self._online_vars, strict=True):
            t.assign(o if tau == 1.0 else tau * o + (1.0 - tau) * t)
        return []

    def _train_step(self, batch: tuple[tf.Tensor, ...], lr: tf.Tensor) -> tf.Tensor:
        """One gradient step; returns ``STEP_METRICS`` of this minibatch."""
        with tf.GradientTape() as tape:
            loss, q, target = self.loss(*batch)
        grads = self._reduced(tape.gradient(loss, self.params, unconnected_gradients="zero"))
        if self.config.max_grad_norm is not None:
            grads, grad_norm = clip_by_global_norm(grads, self.config.max_grad_norm)
        else:
            grad_norm = tf.linalg.global_norm(list(grads))
        self.optimizer.apply(grads, lr)
        return tf.stack([loss, tf.reduce_mean(q), tf.reduce_mean(target), grad_norm])
