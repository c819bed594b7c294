"""TD3 (Twin Delayed DDPG) with many gradient steps in one compiled call.

One :meth:`TD3Learner.update` is one TensorFlow call running ``K`` gradient steps on
minibatches stacked as ``[K, batch, ...]``. Each step follows Stable-Baselines3's
``TD3.train`` (Fujimoto et al., 2018):

1. Critics: target policy smoothing, ``a' = clip(mu'(s') + clip(N(0, sigma), -c, c),
   -1, 1)`` with ``mu'`` the target actor, ``sigma = target_policy_noise``, ``c =
   target_noise_clip``; TD target ``r + gamma * (1 - terminated) * min_i Q'_i(s',
   a')``; loss ``sum_i mean((Q_i(s, a) - target)^2)``.
2. Every ``policy_delay``-th gradient step (the ``policy_delay``-th, ``2 *
   policy_delay``-th, ... counted across calls by :attr:`TD3Learner.steps`): the actor
   takes a step on ``-mean(Q_1(s, mu(s)))`` (the first head only), then the target
   actor and target critics move by Polyak averaging with ``tau``.

Actions arrive in env units, as the replay stores them, and are scaled to ``[-1, 1]``
here. ``reduce_gradients`` is applied inside the graph to each gradient list (critic,
actor) before its optimiser step; a reducer must then run the same delayed steps on
every learner, which it does, as they all count the same gradient steps.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import tensorflow as tf

from rlgen.algorithms.offpolicy import GradientReducer, OffPolicyLearner
from rlgen.algorithms.td3.config import METRICS, TD3Config
from rlgen.runtime.continuous import DeterministicActor, QCritic, check_target, polyak
from rlgen.runtime.optim import build_optimizer

# per gradient step: critic loss, actor loss (0 when the actor waits), mean Q, 1 if the actor stepped
_STEP_VALUES = 4


class TD3Learner(OffPolicyLearner):
    """Learns a :class:`DeterministicActor` and a twin :class:`QCritic`; owns the target actor and critics.
    ``update`` (actions in env units) returns ``critic_loss`` and ``q`` (mean Q of the
    replayed actions over the heads) averaged over its K steps, ``actor_loss`` averaged over
    the steps that updated the actor (0 if none did), and ``lr``."""

    METRICS = METRICS

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"actor_params", "critic_params", "update_fn", "_call"})

    def __init__(
        self,
        actor: DeterministicActor,
        critic: QCritic,
        config: TD3Config,
        obs_shape: Sequence[int],
        target_actor: DeterministicActor | None = None,
        target_critic: QCritic | None = None,
        reduce_gradients: GradientReducer | None = None,
        seed: int = 0,
        name: str | None = "td3",
    ) -> None:
        super().__init__(name=name)
        if critic.num_heads != config.n_critics:
            raise ValueError(f"the critic has {critic.num_heads} Q heads; config.n_critics is {config.n_critics}")
        self.actor, self.critic, self.config = actor, critic, config
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.action_shape = tuple(int(d) for d in actor.action_spec.shape)
        if target_actor is None:
            target_actor = DeterministicActor(
                copy.deepcopy(actor.network), actor.action_spec, noise_std=0.0, name="actor_target"
            )
        if target_critic is None:
            target_critic = QCritic([copy.deepcopy(n) for n in critic.networks], name="critic_target")
        self.target_actor, self.target_critic = target_actor, target_critic
        self.actor_params = list(actor.trainable_variables)
        self.critic_params = list(critic.trainable_variables)
        self._actor_pairs = (list(target_actor.trainable_variables), self.actor_params)
        self._critic_pairs = (list(target_critic.trainable_variables), self.critic_params)
        check_target(*self._actor_pairs, "actor")
        check_target(*self._critic_pairs, "critic")
        for targets, online in (self._actor_pairs, self._critic_pairs):
            for t, o in zip(targets, online, strict=True):
                t.assign(o)  # the copies start equal to the online modules (also given ones)

        self.actor_optimizer = build_optimizer(config.optimizer, self.actor_params)
        self.critic_optimizer = build_optimizer(config.optimizer, self.critic_params)
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="gradient_steps")
        self.generator = tf.random.Generator.from_seed(seed)  # target policy smoothing noise
        self._compile_update(config, reduce_gradients, _STEP_VALUES)

    def replicated_variables(self) -> list[tf.Variable]:
        """The learner's state every replica must hold equal (its networks, targets and
        optimizer state; not its random streams): rank 0 broadcasts it at the start, so that
        a resumed multi-learner run continues from rank 0's checkpoint on every rank."""
        return [
            *self.actor_optimizer.variables,
            *self.critic_optimizer.variables,
            *self._actor_pairs[0],
            *self._critic_pairs[0],
            self.steps,
        ]

    # --- host API -----------------------------------------------------------------

    # --- graphs -------------------------------------------------------------------

    def _metrics(self, totals: tf.Tensor, steps: tf.Tensor, lr: tf.Tensor) -> tf.Tensor:
        n = tf.cast(tf.maximum(steps, 1), tf.float32)
        critic_loss, actor_loss_sum, q_sum, actor_steps = tf.unstack(totals)
        actor_loss = actor_loss_sum / tf.maximum(actor_steps, 1.0)
        return tf.stack([critic_loss / n, actor_loss, q_sum / n, lr])

    def _train_step(self, batch: tuple[tf.Tensor, ...], lr: tf.Tensor) -> tf.Tensor:
        """One critic step and, every ``policy_delay`` steps, one actor step and the target updates."""
        obs, actions, rewards, next_obs, terminated = batch
        cfg = self.config
        scaled = self.actor.scale(actions)

        next_mu = self.target_actor.mu(next_obs)
        noise = tf.clip_by_value(
            cfg.target_policy_noise * self.generator.normal(tf.shape(next_mu)),
            -cfg.target_noise_clip,
            cfg.target_noise_clip,
        )
        next_action = tf.clip_by_value(next_mu + noise, -1.0, 1.0)
        next_q = tf.reduce_min(self.target_critic.values(next_obs, next_action), axis=0)
        td_target = tf.stop_gradient(rewards + cfg.gamma * (1.0 - terminated) * next_q)
        with tf.GradientTape() as tape:
            q = self.critic.values(obs, scaled)
            critic_loss = tf.reduce_sum(tf.reduce_mean(tf.square(q - td_target[None]), axis=1))
        grads = tape.gradient(critic_loss, self.critic_params, unconnected_gradients="zero")
        self.critic_optimizer.apply(self._reduced(grads), lr)

        count = self.steps.assign_add(1)
        due = tf.equal(count % int(cfg.policy_delay), 0)

        def actor_step() -> tf.Tensor:
            with tf.GradientTape() as tape:
                actor_loss = -tf.reduce_mean(self.critic.values(obs, self.actor.mu(obs))[0])
            grads = tape.gradient(actor_loss, self.actor_params, unconnected_gradients="zero")
            self.actor_optimizer.apply(self._reduced(grads), lr)
            polyak(*self._critic_pairs, float(cfg.tau))
            polyak(*self._actor_pairs, float(cfg.tau))
            return actor_loss

        actor_loss = tf.cond(due, actor_step, lambda: tf.constant(0.0))
        return tf.stack([critic_loss, actor_loss, tf.reduce_mean(q), tf.cast(due, tf.float32)])
