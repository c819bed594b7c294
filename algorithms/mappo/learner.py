"""MAPPO / IPPO: PPO's compiled update (:mod:`rlgen.algorithms.ppo.learner`) with the
reference MAPPO's critic (marlbenchmark/on-policy, Yu et al. 2022).

Agents are folded into the batch (row ``b*N + i`` is agent ``i`` of env copy ``b``), so
the learner sees a single-agent rollout of ``[T, B*N]`` rows. Beyond PPO:

* With ``state_shape`` (MAPPO) the value function reads the global state (``states``
  ``[T, B, *S]`` from the buffer and ``last_state`` after the last step), a centralised
  critic; without it (IPPO) it reads each agent's observation, as PPO's.
* ``value_norm``: the value function predicts returns normalised by :class:`ValueNorm`
  (the reference's running, debiased mean and variance, decay 0.99999). Its outputs (the
  buffer's ``values``) are denormalised for GAE with the statistics the rollout was
  collected under; then, as the reference, every gradient step first folds its
  minibatch's returns (valid rows) into the statistics and then normalises them into the
  step's targets. With one minibatch the statistics take in the same returns once per
  epoch: the debiased average weighs each update alike, so within an update the
  rollout's share grows epoch by epoch (from 1/(10k - 9) to 1/k at update k with 10
  epochs), which updating once per rollout (1/k throughout) does not reproduce.
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
* Recurrent networks (runtime/recurrent.py; the reference's ``rmappo``): the update also
  takes the rollout's :class:`~rlgen.runtime.buffers.Memory` and trains on chunks of ``chunk``
  steps cut from its rows laid end to end (:mod:`rlgen.runtime.sequences`), each unrolled
  from the state stored while acting (no burn-in, as the reference), minibatches of whole
  chunks.

The metrics vector is PPO's (``grad_norm``: of all gradients together, before clipping).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
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
    update_metrics,
    vtrace,
)
from rlgen.runtime.buffers import Memory, Rollout, RolloutBuffer, StateRollout
from rlgen.runtime.optim import as_schedule, build_optimizer, clip_by_global_norm
from rlgen.runtime.policies import Policy, Value, distribution_and_value
from rlgen.runtime.sequences import chunks, restarts, sequence_minibatches, to_sequences
from rlgen.runtime.tfutil import flat_caller, to_tensor
from rlgen.runtime.valuenorm import ValueNorm


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
        whole = config.minibatch is None
        if whole:
            config = dataclasses.replace(config, minibatch=n)
        if config.time_limit not in ("bootstrap", "terminal"):
            raise ValueError(f"time_limit must be bootstrap or terminal, got {config.time_limit!r}")
        self.recurrent = policy.recurrent or value.recurrent
        self.chunk = int(config.chunk)
        self.memory_sizes = None
        if self.recurrent:
            self.memory_sizes = tuple(c.network.state_size if c.recurrent else 0 for c in (policy, value))
            self.sequences = chunks(self.num_steps, self.num_envs, self.chunk)
            self.sequences_per_minibatch = _sequences_per_minibatch(
                self.chunk, None if whole else config.minibatch, self.sequences, config.correction, agent_block
            )
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
        if self.recurrent:
            self.minibatches_per_epoch = -(-self.sequences // self.sequences_per_minibatch)
        else:
            self.minibatches_per_epoch = -(-n // self.minibatch)
        self.update_fn = compile_update(self, reduce_gradients, self.state_shape, self.memory_sizes)
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
        memory: Memory | None = None,
        last_memory: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> dict[str, float]:
        """Learn from a full rollout (with ``states`` when the learner has a state shape);
        ``last_obs[B, ...]`` and ``last_state[B, ...]`` follow its last step. A recurrent
        learner also takes the rollout's ``memory`` (a buffer's own when not given) and
        ``last_memory = (first, value_state)`` after the last step. Returns the mean metrics
        over all gradient steps and rollout statistics, as PPO's."""
        if self.recurrent and memory is None and isinstance(rollout, RolloutBuffer):
            memory = rollout.memory()
        if self.recurrent != (memory is not None) or self.recurrent != (last_memory is not None):
            raise ValueError("a recurrent learner needs memory and last_memory; one that is not, neither")
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
        args += [] if memory is None else [to_tensor(x) for x in memory]
        args.append(to_tensor(last_obs, self.obs_dtype))
        if last_state is not None:
            args.append(to_tensor(last_state))
        args += [] if last_memory is None else [to_tensor(x) for x in last_memory]
        args.append(tf.constant(progress, tf.float32))
        (out,) = self._call(*args)
        return dict(zip(METRICS, out.numpy().tolist(), strict=True))

    def _update(self, *args: tf.Tensor) -> tf.Tensor:
        obs, actions, rewards, terminated, truncated, valid, logp, values = args[:8]
        rest, has_state = list(args[8:]), self.state_shape is not None
        states = rest.pop(0) if has_state else obs
        memory = [rest.pop(0) for _ in range(3)] if self.recurrent else None
        last_obs = rest.pop(0)
        last_state = rest.pop(0) if has_state else last_obs
        last_first, last_value_state = (rest.pop(0), rest.pop(0)) if self.recurrent else (None, None)
        (progress,) = rest
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
        if self.value.recurrent:
            raw_last, _ = self.value.value_recurrent(last_state, last_value_state, last_first)
        else:
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
        lr, clip, critic_lr = self._lr(progress), self._clip(progress), self._critic_lr(progress)
        steps = cfg.epochs * self.minibatches_per_epoch
        fields = (obs, states, actions, logp, values, advantages, returns, valid)
        if self.recurrent:
            step = _sequence_steps(self, fields, memory, lr, critic_lr, clip)
        else:
            batch = [flat(x) for x in fields]
            whole = self.minibatches_per_epoch == 1  # whole-batch steps: shuffling changes nothing
            if not whole:
                index, pad_weight = self._minibatch_indices(n)

            def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                mb, weight = (
                    (batch, tf.ones([n])) if whole else ([tf.gather(x, index[k]) for x in batch], pad_weight[k])
                )

                def forward() -> tuple[Any, tf.Tensor]:
                    return self._distribution_and_value(mb[0], mb[1])

                return k + 1, totals + self._train_step(forward, mb[2:], weight, lr, critic_lr, clip)

        _, totals = tf.while_loop(lambda k, _: k < steps, step, (tf.constant(0), tf.zeros([len(STEP_METRICS) + 1])))
        return update_metrics(totals, steps, flat(returns), flat(values_d), flat(valid), lr, clip)

    def _distribution_and_value(self, obs: tf.Tensor, states: tf.Tensor) -> tuple[Any, tf.Tensor]:
        """The policy at ``obs`` and the value at ``states``; without a state shape (IPPO) the
        value reads ``obs``, and a network the two share runs once."""
        if self.state_shape is None:
            return distribution_and_value(self.policy, self.value, obs)
        return self.policy.distribution(obs), self.value.value(states)

    def _train_step(
        self,
        forward: Callable[[], tuple[Any, tf.Tensor]],
        rows: list[tf.Tensor],
        pad_weight: tf.Tensor,
        lr: tf.Tensor,
        critic_lr: tf.Tensor,
        clip: tf.Tensor,
    ) -> tf.Tensor:
        """One gradient step of the policy and one of the value function; returns
        ``[*STEP_METRICS, loss]`` of this minibatch. ``forward()`` gives the distribution and
        the values at its rows; ``rows`` are their actions, old log-probabilities and values,
        advantages, targets and valid flags."""
        cfg = self.config
        actions, old_logp, old_values, advantages, targets, valid = rows
        w = valid * pad_weight
        n = tf.maximum(tf.reduce_sum(w), 1.0)
        if self.value_norm is not None:  # the reference's order: fold the returns in, then normalise them
            self.value_norm.update(targets, w)
            targets = self.value_norm.normalize(targets)
        if cfg.normalize_advantage:
            mean = _masked_mean(advantages, w, n)
            var = tf.reduce_sum(w * tf.square(advantages - mean)) / tf.maximum(n - 1.0, 1.0)
            advantages = (advantages - mean) / (tf.sqrt(var) + 1e-8)
        with tf.GradientTape(persistent=self.separate) as tape:
            dist, values = forward()
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


def _sequence_steps(
    learner: MAPPOLearner, batch: tuple, memory: list, lr: tf.Tensor, critic_lr: tf.Tensor, clip: tf.Tensor
) -> Any:
    """A recurrent learner's training-loop step over chunks: each minibatch of whole sequences is unrolled
    from its stored states, then trained on as ``L*S`` rows (padding rows weigh 0)."""
    first, policy_states, value_states = memory
    seqs = [to_sequences(x, learner.chunk) for x in (*batch, first, policy_states, value_states)]
    where = tf.constant(restarts(learner.num_steps, learner.num_envs, learner.chunk))
    whole = learner.minibatches_per_epoch == 1
    if not whole:
        index, pad_weight = sequence_minibatches(
            learner.generator, learner.config.epochs, learner.sequences, learner.sequences_per_minibatch
        )

    def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if whole:
            mb, at, weight = seqs, where, tf.ones([learner.sequences])
        else:
            mb = [tf.gather(x, index[k], axis=1) for x in seqs]
            at, weight = tf.gather(where, index[k], axis=1), pad_weight[k]
        obs, states, *rows, first_s, h_policy, h_value = mb
        rows = [tf.reshape(x, [-1, *x.shape[2:]]) for x in rows]  # actions .. valid, L*S rows
        weight = tf.reshape(tf.broadcast_to(weight[None], tf.shape(first_s)), [-1])

        def forward() -> tuple[Any, tf.Tensor]:
            policy, value = learner.policy, learner.value
            if policy.recurrent:  # each sequence from its stored states (and the rows it runs on into)
                dist = policy.distribution_seq(obs, h_policy[0], first_s, (at, h_policy))
            else:
                dist = policy.distribution(tf.reshape(obs, [-1, *obs.shape[2:]]))
            if value.recurrent:
                return dist, value.value_seq(states, h_value[0], first_s, (at, h_value))
            return dist, value.value(tf.reshape(states, [-1, *states.shape[2:]]))

        return k + 1, totals + learner._train_step(forward, rows, weight, lr, critic_lr, clip)

    return step


def _sequences_per_minibatch(chunk: int, minibatch: int | None, sequences: int, correction: Any, block: int) -> int:
    """Chunks per minibatch: all (``minibatch`` null) or ``minibatch / chunk``."""
    if chunk < 1:
        raise ValueError(f"chunk must be at least one step, got {chunk}")
    if correction == "vtrace" or block != 1:
        raise ValueError("recurrent networks train without vtrace and with one network for all agents (for now)")
    if minibatch is None:
        return sequences
    if minibatch % chunk:
        raise ValueError(f"minibatch {minibatch} is not a whole number of chunks of {chunk} steps")
    return min(minibatch // chunk, sequences)


__all__ = ["MAPPOConfig", "MAPPOLearner", "ValueNorm", "bootstrap_ends", "value_loss"]
