"""MAPPO / IPPO: PPO's compiled update (:mod:`rlgen.algorithms.ppo.learner`) with the
reference MAPPO's critic (marlbenchmark/on-policy, Yu et al. 2022).

Agents are folded into the batch (row ``b*N + i`` is agent ``i`` of env copy ``b``), so
the learner sees a single-agent rollout of ``[T, B*N]`` rows. Beyond PPO:

* With ``state_shape`` (MAPPO) the value function reads the global state (``states``
  ``[T, B, *S]`` from the buffer and ``last_state`` after the last step), a centralised
  critic; without it (IPPO) it reads each agent's observation, as PPO's.
* ``value_norm``: the value function predicts returns normalised by :class:`ValueNorm`
  (the reference's running, debiased mean and variance, decay 0.99999). Its outputs (the
  buffer's ``values``) are denormalised for GAE; the statistics are updated once per
  rollout with the rollout's returns (valid rows), before the epochs, and the targets
  are the returns normalised by the updated statistics. (The reference updates them per
  minibatch; with its default of one minibatch it sees the same returns each epoch.)
* The value loss is the Huber loss (``huber_delta``; null: half the squared error, as
  the reference) and, with ``clip_value``, the larger of the clipped and the unclipped
  losses per sample, all in the normalised space.
* The policy and the value function have separate optimizers with their own learning
  rates (``critic_lr``) and gradient clipping (``max_grad_norm`` each), as the reference;
  the value's loss is weighted by ``vf_coef``. A policy and a value sharing a network
  are trained as PPO's, by one optimizer on the summed loss (``critic_lr`` must be null).
* ``agent_block=N``: minibatches of whole env copies, for networks with one member per
  agent (see :class:`~rlgen.algorithms.ppo.learner.PPOLearner`).
* ``time_limit: terminal`` treats truncation as termination (no bootstrap from the final
  observation), the reference's behaviour; ``bootstrap`` is PPO's.

The metrics vector is PPO's (``grad_norm``: of all gradients together, before clipping).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig
from rlgen.algorithms.ppo.config import STEP_METRICS
from rlgen.algorithms.ppo.learner import (
    GradientReducer,
    PPOLearner,
    _masked_mean,
    check_agent_block,
    compile_update,
    gae,
    vtrace,
)
from rlgen.runtime.buffers import Rollout, RolloutBuffer, StateRollout
from rlgen.runtime.optim import as_schedule, build_optimizer, clip_by_global_norm
from rlgen.runtime.policies import Policy, Value, distribution_and_value
from rlgen.runtime.tfutil import flat_caller, to_tensor


class ValueNorm(tf.Module):
    """Running mean and variance of value targets (the reference MAPPO's ``ValueNorm``,
    scalar, ``per_element_update=False``): exponential averages of the batch mean and of
    the batch mean square with decay ``beta``, debiased by the average of ones, the
    variance floored at 0.01."""

    def __init__(self, beta: float = 0.99999, epsilon: float = 1e-5, name: str | None = "value_norm") -> None:
        super().__init__(name=name)
        self.beta, self.epsilon = float(beta), float(epsilon)
        self.running_mean = tf.Variable(0.0, trainable=False, name="running_mean")
        self.running_mean_sq = tf.Variable(0.0, trainable=False, name="running_mean_sq")
        self.debiasing_term = tf.Variable(0.0, trainable=False, name="debiasing_term")

    def mean_var(self) -> tuple[tf.Tensor, tf.Tensor]:
        debias = tf.maximum(self.debiasing_term, self.epsilon)
        mean = self.running_mean / debias
        var = tf.maximum(self.running_mean_sq / debias - tf.square(mean), 1e-2)
        return mean, var

    def update(self, x: tf.Tensor, weights: tf.Tensor | None = None) -> None:
        """Fold in a batch ``x`` (rows with ``weights`` 0 left out)."""
        x = tf.reshape(tf.cast(x, tf.float32), [-1])
        w = tf.ones_like(x) if weights is None else tf.reshape(tf.cast(weights, tf.float32), [-1])
        count = tf.maximum(tf.reduce_sum(w), 1.0)
        batch_mean = tf.reduce_sum(w * x) / count
        batch_sq_mean = tf.reduce_sum(w * tf.square(x)) / count
        b = self.beta
        self.running_mean.assign(self.running_mean * b + batch_mean * (1.0 - b))
        self.running_mean_sq.assign(self.running_mean_sq * b + batch_sq_mean * (1.0 - b))
        self.debiasing_term.assign(self.debiasing_term * b + (1.0 - b))

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        mean, var = self.mean_var()
        return (x - mean) / tf.sqrt(var)

    def denormalize(self, x: tf.Tensor) -> tf.Tensor:
        mean, var = self.mean_var()
        return x * tf.sqrt(var) + mean


def value_loss(
    values: tf.Tensor,
    old_values: tf.Tensor,
    targets: tf.Tensor,
    clip_value: float | None,
    huber_delta: float | None,
) -> tf.Tensor:
    """Per-sample value loss (the reference MAPPO's): Huber (or half squared) error of
    ``targets - values``; with ``clip_value`` the larger of it and the error of
    ``old_values + clip(values - old_values, ±clip_value)``."""

    def err(e: tf.Tensor) -> tf.Tensor:
        if huber_delta is None:
            return 0.5 * tf.square(e)
        a = tf.abs(e)
        return tf.where(a <= huber_delta, 0.5 * tf.square(e), huber_delta * (a - 0.5 * huber_delta))

    loss = err(targets - values)
    if clip_value is not None:
        clipped = old_values + tf.clip_by_value(values - old_values, -clip_value, clip_value)
        loss = tf.maximum(loss, err(targets - clipped))
    return loss


def bootstrap_ends(terminated: tf.Tensor, truncated: tf.Tensor, time_limit: str) -> tf.Tensor:
    """Where the next observation's value is not bootstrapped from: terminations, and with
    ``time_limit: terminal`` truncations too."""
    return tf.maximum(terminated, truncated) if time_limit == "terminal" else terminated


def _schedule(rate: Any) -> Any:
    if isinstance(rate, Mapping):  # a spec mapping may leave out its end (0, as the language says)
        rate = {"end": 0.0, **rate}
    return as_schedule(rate)


class MAPPOLearner(tf.Module):
    """Learns a :class:`Policy` and a :class:`Value` (reading ``states`` when built with
    ``state_shape``) from rollouts of ``[T, B]`` rows; ``update_fn`` takes PPO's arguments
    with ``states [T, B, *S]`` after ``values`` and ``last_state [B, *S]`` after ``last_obs``."""

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"params", "actor_params", "critic_params", "update_fn", "_call"})

    # PPO's helpers (the same minibatch draws).
    _minibatch_indices = PPOLearner._minibatch_indices

    def __init__(
        self,
        policy: Policy,
        value: Value,
        config: MAPPOConfig,
        num_steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        seed: int = 0,
        reduce_gradients: GradientReducer | None = None,
        name: str | None = "mappo",
        state_shape: Sequence[int] | None = None,
        agent_block: int = 1,
        obs_dtype: tf.DType | str = tf.float32,
    ) -> None:
        super().__init__(name=name)
        self.num_steps, self.num_envs = int(num_steps), int(num_envs)
        n = self.num_steps * self.num_envs
        if config.minibatch is None:
            config = dataclasses.replace(config, minibatch=n)
        if config.time_limit not in ("bootstrap", "terminal"):
            raise ValueError(f"time_limit must be bootstrap or terminal, got {config.time_limit!r}")
        self.policy, self.value, self.config = policy, value, config
        self.agent_block = check_agent_block(agent_block, n, config.minibatch)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.obs_dtype = tf.as_dtype(obs_dtype)  # uint8 images: the networks scale them in the graph
        self.state_shape = None if state_shape is None else tuple(int(d) for d in state_shape)
        self.actor_params = list({id(v): v for v in policy.trainable_variables}.values())
        actor_ids = {id(v) for v in self.actor_params}
        self.critic_params = [v for v in {id(v): v for v in value.trainable_variables}.values()]
        self.separate = not any(id(v) in actor_ids for v in self.critic_params)
        self.params = self.actor_params + [v for v in self.critic_params if id(v) not in actor_ids]
        if self.separate:
            self.optimizer = build_optimizer(config.optimizer, self.actor_params)
            self.critic_optimizer = build_optimizer(config.optimizer, self.critic_params)
        else:
            if config.critic_lr is not None:
                raise ValueError(
                    "critic_lr needs a value function with its own network: the policy and the value share one"
                )
            self.optimizer = build_optimizer(config.optimizer, self.params)
        self.value_norm = ValueNorm() if config.value_norm else None
        self.generator = tf.random.Generator.from_seed(seed)
        self._lr, self._clip = _schedule(config.lr), _schedule(config.clip)
        self._critic_lr = self._lr if config.critic_lr is None else _schedule(config.critic_lr)
        self._reduce = reduce_gradients
        self.minibatch = min(int(config.minibatch), n)
        self.minibatches_per_epoch = -(-n // self.minibatch)
        self.update_fn = compile_update(self, reduce_gradients, self.state_shape)
        self._call = flat_caller(self.update_fn)

    def replicated_variables(self) -> list[tf.Variable]:
        """As :meth:`PPOLearner.replicated_variables`: both optimizers' state and the value
        normalisation's statistics."""
        out = list(self.optimizer.variables)
        if self.separate:
            out += list(self.critic_optimizer.variables)
        if self.value_norm is not None:
            out += list(self.value_norm.variables)
        return out

    def update(
        self,
        rollout: RolloutBuffer | Rollout | StateRollout,
        last_obs: np.ndarray,
        last_state: np.ndarray | None = None,
        progress: float = 0.0,
    ) -> dict[str, float]:
        """Learn from a full rollout (with ``states`` when the learner has a state shape);
        ``last_obs[B, ...]`` and ``last_state[B, ...]`` follow its last step. Returns the
        mean metrics over all gradient steps and rollout statistics, as PPO's."""
        data = rollout.rollout() if isinstance(rollout, RolloutBuffer) else rollout
        has_state = self.state_shape is not None
        if has_state != isinstance(data, StateRollout) or has_state != (last_state is not None):
            raise ValueError(
                "a learner with a state shape needs a rollout with states and last_state; one without, neither"
            )
        want = ((self.num_steps, self.num_envs, *self.obs_shape), (self.num_envs, *self.obs_shape))
        if (data.obs.shape, np.shape(last_obs)) != want:
            raise ValueError(f"obs and last_obs shapes {data.obs.shape}, {np.shape(last_obs)}; expected {want}")
        args = [tf.constant(x) for x in data]
        args.append(to_tensor(last_obs, self.obs_dtype))
        if last_state is not None:
            args.append(to_tensor(last_state))
        args.append(tf.constant(progress, tf.float32))
        (out,) = self._call(*args)
        return dict(zip(METRICS, out.numpy().tolist(), strict=True))

    def _update(self, *args: tf.Tensor) -> tf.Tensor:
        obs, actions, rewards, terminated, truncated, valid, logp, values = args[:8]
        if self.state_shape is not None:
            states, last_obs, last_state, progress = args[8:]
        else:
            last_obs, progress = args[8:]
            states, last_state = obs, last_obs
        cfg = self.config
        n = self.num_steps * self.num_envs

        def flat(x: tf.Tensor) -> tf.Tensor:
            return tf.reshape(x, [n, *x.shape[2:]])

        norm = self.value_norm

        def denormalize(v: tf.Tensor) -> tf.Tensor:
            return v if norm is None else norm.denormalize(v)

        dones = tf.maximum(terminated, truncated)
        ends = bootstrap_ends(terminated, truncated, cfg.time_limit)
        shape = tf.shape(rewards)
        if cfg.correction == "vtrace":  # targets from the current networks, corrected towards them
            dist, values = self._distribution_and_value(flat(obs), flat(states))
            values = tf.reshape(values, shape)
            target_logp = tf.reshape(dist.log_prob(flat(actions)), shape)
            log_rhos = (target_logp - logp) * valid  # reset rows carry no action
        raw_last = self.value.value(last_state)
        values_d = denormalize(values)
        next_values = tf.concat([values_d[1:], denormalize(raw_last)[None]], axis=0)
        if cfg.correction == "vtrace":
            returns, advantages = vtrace(
                rewards,
                values_d,
                next_values,
                ends,
                dones,
                log_rhos,
                cfg.gamma,
                cfg.gae_lambda,
                cfg.rho_clip,
                cfg.c_clip,
            )
        else:
            advantages = gae(rewards, values_d, next_values, ends, dones, cfg.gamma, cfg.gae_lambda)
            returns = advantages + values_d
        if norm is not None:
            norm.update(returns, valid)
            targets = norm.normalize(returns)
        else:
            targets = returns

        batch = [flat(x) for x in (obs, states, actions, logp, values, advantages, targets, valid)]
        lr, clip, critic_lr = self._lr(progress), self._clip(progress), self._critic_lr(progress)
        steps = cfg.epochs * self.minibatches_per_epoch
        if self.minibatches_per_epoch == 1:  # whole-batch steps: shuffling changes nothing

            def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                return k + 1, totals + self._train_step(batch, tf.ones([n]), lr, critic_lr, clip)

        else:
            index, pad_weight = self._minibatch_indices(n)

            def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                minibatch = [tf.gather(x, index[k]) for x in batch]
                return k + 1, totals + self._train_step(minibatch, pad_weight[k], lr, critic_lr, clip)

        _, totals = tf.while_loop(lambda k, _: k < steps, step, (tf.constant(0), tf.zeros([len(STEP_METRICS) + 1])))
        means = totals / float(steps)
        w = flat(valid)
        n_valid = tf.maximum(tf.reduce_sum(w), 1.0)
        ret, val = flat(returns), flat(values_d)
        ret_mean = _masked_mean(ret, w, n_valid)
        var_ret = _masked_mean(tf.square(ret - ret_mean), w, n_valid)
        err = ret - val
        var_err = _masked_mean(tf.square(err - _masked_mean(err, w, n_valid)), w, n_valid)
        explained = tf.where(var_ret > 0.0, 1.0 - var_err / var_ret, np.nan)
        return tf.concat([means, tf.stack([explained, lr, clip])], axis=0)

    def _distribution_and_value(self, obs: tf.Tensor, states: tf.Tensor) -> tuple[Any, tf.Tensor]:
        """The policy at ``obs`` and the value at ``states``; without a state shape (IPPO) the
        value reads ``obs``, and a network the two share runs once."""
        if self.state_shape is None:
            return distribution_and_value(self.policy, self.value, obs)
        return self.policy.distribution(obs), self.value.value(states)

    def _train_step(
        self,
        minibatch: list[tf.Tensor],
        pad_weight: tf.Tensor,
        lr: tf.Tensor,
        critic_lr: tf.Tensor,
        clip: tf.Tensor,
    ) -> tf.Tensor:
        """One gradient step of the policy and one of the value function; returns
        ``[*STEP_METRICS, loss]`` of this minibatch."""
        cfg = self.config
        obs, states, actions, old_logp, old_values, advantages, targets, valid = minibatch
        w = valid * pad_weight
        n = tf.maximum(tf.reduce_sum(w), 1.0)
        if cfg.normalize_advantage:
            mean = _masked_mean(advantages, w, n)
            var = tf.reduce_sum(w * tf.square(advantages - mean)) / tf.maximum(n - 1.0, 1.0)
            advantages = (advantages - mean) / (tf.sqrt(var) + 1e-8)
        with tf.GradientTape(persistent=self.separate) as tape:
            dist, values = self._distribution_and_value(obs, states)
            log_ratio = dist.log_prob(actions) - old_logp
            ratio = tf.exp(log_ratio)
            surrogate = tf.minimum(ratio * advantages, tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip) * advantages)
            policy_loss = -_masked_mean(surrogate, w, n)
            entropy = _masked_mean(dist.entropy(), w, n)
            v_loss = _masked_mean(value_loss(values, old_values, targets, cfg.clip_value, cfg.huber_delta), w, n)
            actor_loss = policy_loss - cfg.ent_coef * entropy
            critic_loss = cfg.vf_coef * v_loss
            loss = actor_loss + critic_loss
        if self.separate:
            actor_grads = list(tape.gradient(actor_loss, self.actor_params, unconnected_gradients="zero"))
            critic_grads = list(tape.gradient(critic_loss, self.critic_params, unconnected_gradients="zero"))
            del tape
            if self._reduce is not None:
                reduced = self._reduce(actor_grads + critic_grads)
                actor_grads, critic_grads = list(reduced[: len(actor_grads)]), list(reduced[len(actor_grads) :])
            grad_norm = tf.linalg.global_norm(actor_grads + critic_grads)
            if cfg.max_grad_norm is not None:
                actor_grads, _ = clip_by_global_norm(actor_grads, cfg.max_grad_norm)
                critic_grads, _ = clip_by_global_norm(critic_grads, cfg.max_grad_norm)
            self.optimizer.apply(actor_grads, lr)
            self.critic_optimizer.apply(critic_grads, critic_lr)
        else:
            grads = list(tape.gradient(loss, self.params, unconnected_gradients="zero"))
            if self._reduce is not None:
                grads = list(self._reduce(grads))
            if cfg.max_grad_norm is not None:
                grads, grad_norm = clip_by_global_norm(grads, cfg.max_grad_norm)
            else:
                grad_norm = tf.linalg.global_norm(grads)
            self.optimizer.apply(grads, lr)
        approx_kl = _masked_mean(ratio - 1.0 - log_ratio, w, n)
        clipped = tf.cast(tf.abs(ratio - 1.0) > clip, tf.float32)
        clip_fraction = _masked_mean(clipped, w, n)
        return tf.stack([policy_loss, v_loss, entropy, approx_kl, clip_fraction, grad_norm, loss])


__all__ = ["MAPPOConfig", "MAPPOLearner", "ValueNorm", "bootstrap_ends", "value_loss"]
