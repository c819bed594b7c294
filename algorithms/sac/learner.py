"""Soft Actor-Critic with many gradient steps in one compiled call.

One :meth:`SACLearner.update` is one TensorFlow call: it takes ``K`` minibatches
stacked as ``[K, batch, ...]`` (:meth:`rlgen.runtime.replay.ReplayBuffer.sample_many`)
and runs ``K`` gradient steps in an in-graph loop. Each step follows
Stable-Baselines3's ``SAC.train`` (Haarnoja et al., 2018), in its order:

1. Sample ``a~, log pi(a~|s)`` from the actor (reparameterised; with gSDE, one
   exploration matrix per step serves this and step 2's sample). With a learned
   entropy coefficient, ``alpha = exp(log_alpha)`` is read *before* this step's
   update of it and used for the rest of the step; ``log_alpha`` takes one step on
   ``-mean(log_alpha * (log pi + target_entropy))``.
2. Critics: TD target ``r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha
   * log pi(a'|s'))``, ``a'`` sampled from the actor at ``s'``, ``Q'`` the target
   critics; loss ``0.5 * sum_i mean((Q_i(s, a) - target)^2)``. A truncated episode's
   last transition keeps its bootstrap (see :mod:`rlgen.runtime.replay`).
3. Actor: ``mean(alpha * log pi(a~|s) - min_i Q_i(s, a~))`` with the critics just
   updated.
4. Every ``target_update_interval`` gradient steps (counted across calls by
   :attr:`SACLearner.steps`), Polyak-average the target critics:
   ``target = tau * online + (1 - tau) * target``.

Actions arrive in env units, as the replay stores them, and are scaled to ``[-1, 1]``
here. ``reduce_gradients`` (e.g. a Horovod allreduce for the multi-learner policy) is
applied inside the graph to each gradient list (critic, actor, entropy coefficient)
before its optimiser step.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import tensorflow as tf

from rlgen.algorithms.offpolicy import GradientReducer, OffPolicyLearner
from rlgen.algorithms.sac.config import METRICS, STEP_METRICS, SACConfig
from rlgen.runtime.continuous import QCritic, SquashedGaussianActor, check_target, polyak
from rlgen.runtime.optim import build_optimizer


class SACLearner(OffPolicyLearner):
    """Learns a :class:`SquashedGaussianActor` and a twin :class:`QCritic`; owns the target critics.
    ``update`` (actions in env units) returns ``critic_loss``, ``actor_loss``, ``ent_coef``
    (alpha used), ``ent_coef_loss`` (0 for a fixed coefficient) and ``q`` (mean Q of the
    replayed actions over the heads), averaged over its K steps, and ``lr``."""

    METRICS = METRICS

    _TF_MODULE_IGNORED_PROPERTIES = frozenset(
        {"actor_params", "critic_params", "update_fn", "_call", "_target_vars", "_online_vars"}
    )

    def __init__(
        self,
        actor: SquashedGaussianActor,
        critic: QCritic,
        config: SACConfig,
        obs_shape: Sequence[int],
        target: QCritic | None = None,
        reduce_gradients: GradientReducer | None = None,
        name: str | None = "sac",
    ) -> None:
        super().__init__(name=name)
        if critic.num_heads != config.n_critics:
            raise ValueError(f"the critic has {critic.num_heads} Q heads; config.n_critics is {config.n_critics}")
        self.actor, self.critic, self.config = actor, critic, config
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.action_shape = tuple(int(d) for d in actor.action_spec.shape)
        if target is None:
            target = QCritic([copy.deepcopy(n) for n in critic.networks], name="critic_target")
        self.target = target
        self._target_vars = list(target.trainable_variables)
        self._online_vars = list(critic.trainable_variables)
        check_target(self._target_vars, self._online_vars, "critic")
        for t, o in zip(self._target_vars, self._online_vars, strict=True):
            t.assign(o)  # the copy starts equal to the online critic (also for a given ``target``)

        self.actor_params = list(actor.trainable_variables)
        self.critic_params = list(critic.trainable_variables)
        self.actor_optimizer = build_optimizer(config.optimizer, self.actor_params)
        self.critic_optimizer = build_optimizer(config.optimizer, self.critic_params)
        self.auto_ent_coef = config.auto_ent_coef
        log_init = math.log(config.initial_ent_coef())
        # a fixed coefficient is a non-trainable variable: checkpointed, and read the same way
        self.log_ent_coef = tf.Variable(log_init, trainable=self.auto_ent_coef, name="log_ent_coef")
        self.target_entropy = config.entropy_target(actor.action_dim)
        self.ent_coef_optimizer = build_optimizer(config.optimizer, [self.log_ent_coef]) if self.auto_ent_coef else None
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="gradient_steps")
        self._compile_update(config, reduce_gradients, len(STEP_METRICS))

    def replicated_variables(self) -> list[tf.Variable]:
        """The learner's state every replica must hold equal (its networks, targets and
        optimizer state; not its random streams): rank 0 broadcasts it at the start, so that
        a resumed multi-learner run continues from rank 0's checkpoint on every rank."""
        return [
            *self.actor_optimizer.variables,
            *self.critic_optimizer.variables,
            *(self.ent_coef_optimizer.variables if self.ent_coef_optimizer is not None else ()),
            self.log_ent_coef,
            *self._target_vars,
            self.steps,
        ]

    # --- host API -----------------------------------------------------------------

    @property
    def ent_coef(self) -> float:
        """The entropy coefficient alpha now."""
        return float(tf.exp(self.log_ent_coef).numpy())

    # --- graphs -------------------------------------------------------------------

    def _train_step(self, batch: tuple[tf.Tensor, ...], lr: tf.Tensor) -> tf.Tensor:
        """One gradient step of the entropy coefficient, the critics and the actor; returns ``STEP_METRICS``."""
        obs, actions, rewards, next_obs, terminated = batch
        cfg = self.config
        scaled = self.actor.scale(actions)

        noise = self.actor.step_noise()  # gSDE: one exploration matrix for the step's samples
        with tf.GradientTape() as actor_tape:
            pi, logp = self.actor.sample(obs, noise)

        log_alpha = tf.identity(self.log_ent_coef)  # this step's value, before its update
        alpha = tf.exp(log_alpha)
        if self.auto_ent_coef:
            with tf.GradientTape() as alpha_tape:
                alpha_loss = -tf.reduce_mean(self.log_ent_coef * tf.stop_gradient(logp + self.target_entropy))
            grads = alpha_tape.gradient(alpha_loss, [self.log_ent_coef], unconnected_gradients="zero")
            self.ent_coef_optimizer.apply(self._reduced(grads), lr)
        else:
            alpha_loss = tf.constant(0.0)

        next_pi, next_logp = self.actor.sample(next_obs, noise)
        next_q = tf.reduce_min(self.target.values(next_obs, next_pi), axis=0) - alpha * next_logp
        td_target = tf.stop_gradient(rewards + cfg.gamma * (1.0 - terminated) * next_q)
        with tf.GradientTape() as critic_tape:
            q = self.critic.values(obs, scaled)
            critic_loss = 0.5 * tf.reduce_sum(tf.reduce_mean(tf.square(q - td_target[None]), axis=1))
        grads = critic_tape.gradient(critic_loss, self.critic_params, unconnected_gradients="zero")
        self.critic_optimizer.apply(self._reduced(grads), lr)

        with actor_tape:  # the critics' update is done: Q of the sampled actions reads the new weights
            q_pi = tf.reduce_min(self.critic.values(obs, pi), axis=0)
            actor_loss = tf.reduce_mean(tf.stop_gradient(alpha) * logp - q_pi)
        grads = actor_tape.gradient(actor_loss, self.actor_params, unconnected_gradients="zero")
        self.actor_optimizer.apply(self._reduced(grads), lr)

        due = tf.equal(self.steps % int(cfg.target_update_interval), 0)
        polyak(self._target_vars, self._online_vars, float(cfg.tau) * tf.cast(due, tf.float32))
        self.steps.assign_add(1)
        return tf.stack([critic_loss, actor_loss, alpha, alpha_loss, tf.reduce_mean(q)])
