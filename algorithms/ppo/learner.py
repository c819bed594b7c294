"""PPO (clipped surrogate) with all epochs and minibatches in one compiled call.

One :meth:`PPOLearner.update` is one TensorFlow call: it computes GAE, then runs
``epochs`` passes of shuffled minibatches (an in-graph loop over precomputed
permutations) and returns the metrics. Semantics follow Stable-Baselines3's PPO
(and its defaults) except where noted:

* Advantages use the actor's values. With :mod:`rlgen.runtime.envs`'s step
  convention the row after an episode end holds the value of the episode's final
  observation, so a *truncated* episode bootstraps from ``V(final obs)`` and a
  *terminated* one from 0 (SB3 does the same via ``terminal_observation``; CleanRL
  treats truncation as termination). Reset rows (``valid == 0``) carry no
  transition: they are excluded from every loss and statistic.
* A minibatch is ``minibatch`` consecutive entries of a fresh permutation per epoch;
  when ``T * B`` is not a multiple, the last minibatch of an epoch is shorter (as in
  SB3), implemented with zero-weight padding so shapes stay static. When one
  minibatch holds the whole rollout (the RL Zoo's CartPole setting) every step uses
  the whole batch in order: a permutation would change nothing but rounding.
* ``agent_block=N`` (networks with one member per agent, rows env-major): the
  permutation moves blocks of ``N`` consecutive rows (one env copy's agents at one
  step) and keeps each block whole and in order, so every minibatch holds whole
  blocks that a per-agent ensemble can apply to. ``minibatch`` and ``T * B`` must be
  multiples of ``N``. The default 1 shuffles rows, as PPO always did.
* ``reduce_gradients`` (e.g. a Horovod allreduce for the multi-learner policy) is
  applied inside the graph to the list of gradients, before clipping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from rlgen.algorithms.ppo.config import METRICS, STEP_METRICS, PPOConfig
from rlgen.runtime.buffers import Rollout, RolloutBuffer
from rlgen.runtime.convnets import has_convolutions
from rlgen.runtime.optim import as_schedule, build_optimizer, clip_by_global_norm
from rlgen.runtime.policies import Policy, Value, distribution_and_value
from rlgen.runtime.tfutil import flat_caller, to_tensor

GradientReducer = Callable[[list[tf.Tensor]], list[tf.Tensor]]


def gae(
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    terminated: tf.Tensor,
    dones: tf.Tensor,
    gamma: float,
    lam: float,
) -> tf.Tensor:
    """Generalised advantage estimates, all arguments ``[T, B]`` float32.

    ``next_values[t]`` is the value of the observation after step ``t``;
    ``terminated`` zeroes it; ``dones`` (terminated or truncated) stops the
    recursion ``A[t] = delta[t] + gamma * lam * (1 - dones[t]) * A[t + 1]``.
    """
    deltas = rewards + gamma * next_values * (1.0 - terminated) - values
    decay = gamma * lam * (1.0 - dones)

    def backward(carry: tf.Tensor, x: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        delta, k = x
        return delta + k * carry

    return tf.scan(backward, (deltas, decay), initializer=tf.zeros_like(deltas[0]), reverse=True)


def vtrace(
    rewards: tf.Tensor,
    values: tf.Tensor,
    next_values: tf.Tensor,
    terminated: tf.Tensor,
    dones: tf.Tensor,
    log_rhos: tf.Tensor,
    gamma: float,
    lam: float,
    rho_clip: float,
    c_clip: float,
) -> tuple[tf.Tensor, tf.Tensor]:
    """V-trace value targets ``vs`` and policy-gradient advantages (Espeholt et al. 2018),
    all ``[T, B]``; ``log_rhos`` are log(target / behaviour) probabilities of the actions.

    With ``rho = min(rho_clip, e^log_rhos)`` and ``c = lam * min(c_clip, e^log_rhos)``:
    ``vs[t] - V[t] = rho[t] delta[t] + gamma c[t] (1 - dones[t]) (vs[t+1] - V[t+1])``, where
    ``delta[t] = r[t] + gamma next_V[t] (1 - terminated[t]) - V[t]``; the advantage is
    ``rho[t] (r[t] + gamma next_vs[t] (1 - terminated[t]) - V[t])``, ``next_vs`` being
    ``vs[t+1]`` within an episode and ``next_V[t]`` at its end (the value of the final
    observation, for a truncated one). On-policy (``log_rhos = 0``, clips >= 1) ``vs`` are
    GAE(lam)'s returns.
    """
    ratio = tf.exp(log_rhos)
    rho = tf.minimum(rho_clip, ratio)
    c = lam * tf.minimum(c_clip, ratio)
    deltas = rho * (rewards + gamma * next_values * (1.0 - terminated) - values)
    decay = gamma * c * (1.0 - dones)

    def backward(carry: tf.Tensor, x: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        delta, k = x
        return delta + k * carry

    vs_minus_v = tf.scan(backward, (deltas, decay), initializer=tf.zeros_like(deltas[0]), reverse=True)
    vs = values + vs_minus_v
    next_vs = tf.where(dones > 0.0, next_values, tf.concat([vs[1:], next_values[-1:]], axis=0))
    advantages = rho * (rewards + gamma * next_vs * (1.0 - terminated) - values)
    return vs, advantages


def check_agent_block(agent_block: int, rows: int, minibatch: int | None) -> int:
    """``agent_block`` as an int, after checking that the rollout's ``rows`` (``T * B``) and the
    ``minibatch`` (None: the whole rollout) hold whole blocks."""
    k = int(agent_block)
    if k < 1:
        raise ValueError(f"agent_block must be at least 1, got {agent_block}")
    mb = rows if minibatch is None else min(int(minibatch), rows)
    if rows % k or mb % k:
        raise ValueError(
            f"with one network per agent ({k} agents) the rollout's {rows} rows and the minibatch of {mb} rows "
            f"must be multiples of {k}: a minibatch holds whole env copies"
        )
    return k


def update_signature(
    learner: tf.Module, state_shape: Sequence[int] | None = None, memory: tuple[int, int] | None = None
) -> list[tf.TensorSpec]:
    """The compiled update's inputs: the rollout's fields ``[T, B, ...]`` (then its ``states``,
    for a centralised critic; then, with ``memory=(policy_size, value_size)``, recurrent
    networks' ``first`` and the states they read), the last observation (then the last state;
    then the last ``first`` and the value's state after the last step) and the progress."""
    t, b, obs, dtype = learner.num_steps, learner.num_envs, learner.obs_shape, learner.obs_dtype
    act = learner.policy.action_spec
    tb = tf.TensorSpec([t, b], tf.float32)
    state = [] if state_shape is None else [tuple(state_shape)]
    sizes = [] if memory is None else [tuple(int(n) for n in memory)]
    return [
        tf.TensorSpec([t, b, *obs], dtype),
        tf.TensorSpec([t, b] if act.discrete else [t, b, *act.shape], act.dtype),
        *([tb] * 6),  # rewards, terminated, truncated, valid, logp, values
        *(tf.TensorSpec([t, b, *s], tf.float32) for s in state),  # states
        *(x for p, v in sizes for x in (tb, tf.TensorSpec([t, b, p]), tf.TensorSpec([t, b, v]))),  # memory
        tf.TensorSpec([b, *obs], dtype),
        *(tf.TensorSpec([b, *s], tf.float32) for s in state),  # last_state
        *(x for _, v in sizes for x in (tf.TensorSpec([b]), tf.TensorSpec([b, v]))),  # last first, value state
        tf.TensorSpec([], tf.float32),
    ]


def compile_update(
    learner: tf.Module,
    reduce_gradients: GradientReducer | None,
    state_shape: Sequence[int] | None = None,
    memory: tuple[int, int] | None = None,
) -> Callable:
    """``learner._update`` as one compiled function of :func:`update_signature`'s inputs: with
    XLA unless the config says otherwise, gradients are reduced (Horovod's ops have no XLA
    kernels) or the networks convolve (XLA compiles those for minutes on CPU)."""
    jit = learner.config.jit_compile
    if jit is None:
        jit = reduce_gradients is None and not has_convolutions(learner)
    signature = update_signature(learner, state_shape, memory)
    return tf.function(learner._update, input_signature=signature, jit_compile=jit, autograph=False)


def _masked_mean(x: tf.Tensor, w: tf.Tensor, n: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(w * x) / n


def update_metrics(
    totals: tf.Tensor,
    steps: int,
    returns: tf.Tensor,
    values: tf.Tensor,
    valid: tf.Tensor,
    lr: tf.Tensor,
    clip: tf.Tensor,
) -> tf.Tensor:
    """An update's metric vector: the means over its ``steps`` gradient steps of their
    ``totals``, then the explained variance of the flat ``values`` towards the ``returns``
    over the ``valid`` rows, the learning rate and the clip range."""
    n = tf.maximum(tf.reduce_sum(valid), 1.0)
    var_ret = _masked_mean(tf.square(returns - _masked_mean(returns, valid, n)), valid, n)
    err = returns - values
    var_err = _masked_mean(tf.square(err - _masked_mean(err, valid, n)), valid, n)
    explained = tf.where(var_ret > 0.0, 1.0 - var_err / var_ret, np.nan)
    return tf.concat([totals / float(steps), tf.stack([explained, lr, clip])], axis=0)


class PPOLearner(tf.Module):
    """Learns a :class:`Policy` and a :class:`Value` from rollouts of ``[T, B]`` steps."""

    _TF_MODULE_IGNORED_PROPERTIES = frozenset({"params", "update_fn", "_call"})

    def __init__(
        self,
        policy: Policy,
        value: Value,
        config: PPOConfig,
        num_steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        seed: int = 0,
        reduce_gradients: GradientReducer | None = None,
        name: str | None = "ppo",
        agent_block: int = 1,
        obs_dtype: tf.DType | str = tf.float32,
        policy_gradient: str = "ratio",
    ) -> None:
        super().__init__(name=name)
        if policy_gradient not in ("ratio", "current"):
            raise ValueError(f"policy_gradient must be ratio or current, got {policy_gradient!r}")
        self.policy_gradient = policy_gradient
        self.policy, self.value, self.config = policy, value, config
        self.num_steps, self.num_envs = int(num_steps), int(num_envs)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.obs_dtype = tf.as_dtype(obs_dtype)  # uint8 images: the networks scale them in the graph
        self.agent_block = check_agent_block(agent_block, self.num_steps * self.num_envs, config.minibatch)
        unique = {id(v): v for v in (*policy.trainable_variables, *value.trainable_variables)}
        self.params = list(unique.values())
        self.optimizer = build_optimizer(config.optimizer, self.params)
        self.generator = tf.random.Generator.from_seed(seed)
        self._lr, self._clip = as_schedule(config.lr), as_schedule(config.clip)
        self._reduce = reduce_gradients
        n = self.num_steps * self.num_envs
        self.minibatch = min(int(config.minibatch), n)
        self.minibatches_per_epoch = -(-n // self.minibatch)
        self.update_fn = compile_update(self, reduce_gradients)
        self._call = flat_caller(self.update_fn)

    def replicated_variables(self) -> list[tf.Variable]:
        """The learner's state every replica must hold equal (its networks, targets and
        optimizer state; not its random streams): rank 0 broadcasts it at the start, so that
        a resumed multi-learner run continues from rank 0's checkpoint on every rank."""
        return list(self.optimizer.variables)

    def update(self, rollout: RolloutBuffer | Rollout, last_obs: np.ndarray, progress: float = 0.0) -> dict[str, float]:
        """Learn from a full rollout; ``last_obs[B, ...]`` follows its last step and
        ``progress`` in [0, 1] drives the schedules. Returns mean metrics over all
        gradient steps (``loss`` etc.) and rollout statistics."""
        data = rollout.rollout() if isinstance(rollout, RolloutBuffer) else rollout
        want = ((self.num_steps, self.num_envs, *self.obs_shape), (self.num_envs, *self.obs_shape))
        if (data.obs.shape, np.shape(last_obs)) != want:
            raise ValueError(f"obs and last_obs shapes {data.obs.shape}, {np.shape(last_obs)}; expected {want}")
        args = [tf.constant(x) for x in data]
        args.append(to_tensor(last_obs, self.obs_dtype))
        args.append(tf.constant(progress, tf.float32))
        (out,) = self._call(*args)
        return dict(zip(METRICS, out.numpy().tolist(), strict=True))

    def _update(
        self,
        obs: tf.Tensor,
        actions: tf.Tensor,
        rewards: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        valid: tf.Tensor,
        logp: tf.Tensor,
        values: tf.Tensor,
        last_obs: tf.Tensor,
        progress: tf.Tensor,
    ) -> tf.Tensor:
        cfg = self.config
        n = self.num_steps * self.num_envs

        def flat(x: tf.Tensor) -> tf.Tensor:
            return tf.reshape(x, [n, *x.shape[2:]])

        dones = tf.maximum(terminated, truncated)
        if cfg.correction == "vtrace":  # targets from the current networks, corrected towards them
            shape = tf.shape(rewards)
            dist, values = distribution_and_value(self.policy, self.value, flat(obs))
            values = tf.reshape(values, shape)
            target_logp = tf.reshape(dist.log_prob(flat(actions)), shape)
            next_values = tf.concat([values[1:], self.value.value(last_obs)[None]], axis=0)
            log_rhos = (target_logp - logp) * valid  # reset rows carry no action
            returns, advantages = vtrace(
                rewards,
                values,
                next_values,
                terminated,
                dones,
                log_rhos,
                cfg.gamma,
                cfg.gae_lambda,
                cfg.rho_clip,
                cfg.c_clip,
            )
        else:
            next_values = tf.concat([values[1:], self.value.value(last_obs)[None]], axis=0)
            advantages = gae(rewards, values, next_values, terminated, dones, cfg.gamma, cfg.gae_lambda)
            returns = advantages + values

        batch = [flat(x) for x in (obs, actions, logp, values, advantages, returns, valid)]
        lr, clip = self._lr(progress), self._clip(progress)
        steps = self.config.epochs * self.minibatches_per_epoch
        if self.minibatches_per_epoch == 1:  # whole-batch steps: shuffling changes nothing

            def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                return k + 1, totals + self._train_step(batch, tf.ones([n]), lr, clip)

        else:
            index, pad_weight = self._minibatch_indices(n)

            def step(k: tf.Tensor, totals: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                minibatch = [tf.gather(x, index[k]) for x in batch]
                return k + 1, totals + self._train_step(minibatch, pad_weight[k], lr, clip)

        _, totals = tf.while_loop(lambda k, _: k < steps, step, (tf.constant(0), tf.zeros([len(STEP_METRICS) + 1])))
        return update_metrics(totals, steps, flat(returns), flat(values), flat(valid), lr, clip)

    def _minibatch_indices(self, n: int) -> tuple[tf.Tensor, tf.Tensor]:
        """``[epochs * M, minibatch]`` sample indices (one permutation per epoch,
        zero-padded to whole minibatches) and the matching 0/1 padding weights. With an
        ``agent_block`` of ``k > 1`` the permutation is of the ``n / k`` blocks of ``k``
        rows, each block's rows kept in order, and the padding is whole copies of block 0."""
        epochs, m, size = self.config.epochs, self.minibatches_per_epoch, self.minibatch
        pad = m * size - n
        k = self.agent_block
        if k == 1:
            perm = tf.argsort(self.generator.uniform([epochs, n]), axis=1, stable=True)
            perm = tf.concat([perm, tf.zeros([epochs, pad], tf.int32)], axis=1)
        else:
            blocks = tf.argsort(self.generator.uniform([epochs, n // k]), axis=1, stable=True)
            perm = tf.reshape(blocks[:, :, None] * k + tf.range(k)[None, None, :], [epochs, n])
            perm = tf.concat([perm, tf.tile(tf.range(k)[None, :], [epochs, pad // k])], axis=1)
        weight = tf.concat([tf.ones([epochs, n]), tf.zeros([epochs, pad])], axis=1)
        return tf.reshape(perm, [epochs * m, size]), tf.reshape(weight, [epochs * m, size])

    def _train_step(
        self, minibatch: list[tf.Tensor], pad_weight: tf.Tensor, lr: tf.Tensor, clip: tf.Tensor
    ) -> tf.Tensor:
        """One gradient step; returns ``[*STEP_METRICS, loss]`` of this minibatch."""
        cfg = self.config
        obs, actions, old_logp, old_values, advantages, returns, valid = minibatch
        w = valid * pad_weight
        n = tf.maximum(tf.reduce_sum(w), 1.0)
        if cfg.normalize_advantage:
            mean = _masked_mean(advantages, w, n)
            var = tf.reduce_sum(w * tf.square(advantages - mean)) / tf.maximum(n - 1.0, 1.0)
            advantages = (advantages - mean) / (tf.sqrt(var) + 1e-8)
        with tf.GradientTape() as tape:
            dist, values = distribution_and_value(self.policy, self.value, obs)
            new_logp = dist.log_prob(actions)
            log_ratio = new_logp - old_logp
            ratio = tf.exp(log_ratio)
            # "current": 1 in value with the gradient of log pi, IMPALA's policy gradient
            current = self.policy_gradient == "current"
            pg_ratio = tf.exp(new_logp - tf.stop_gradient(new_logp)) if current else ratio
            surrogate = tf.minimum(
                pg_ratio * advantages, tf.clip_by_value(pg_ratio, 1.0 - clip, 1.0 + clip) * advantages
            )
            policy_loss = -_masked_mean(surrogate, w, n)
            if cfg.clip_value is not None:
                values = old_values + tf.clip_by_value(values - old_values, -cfg.clip_value, cfg.clip_value)
            value_loss = _masked_mean(tf.square(returns - values), w, n)
            entropy = _masked_mean(dist.entropy(), w, n)
            loss = policy_loss - cfg.ent_coef * entropy + cfg.vf_coef * value_loss
        grads = tape.gradient(loss, self.params, unconnected_gradients="zero")
        if self._reduce is not None:
            grads = self._reduce(list(grads))
        if cfg.max_grad_norm is not None:
            grads, grad_norm = clip_by_global_norm(grads, cfg.max_grad_norm)
        else:
            grad_norm = tf.linalg.global_norm(list(grads))
        self.optimizer.apply(grads, lr)
        approx_kl = _masked_mean(ratio - 1.0 - log_ratio, w, n)
        clipped = tf.cast(tf.abs(ratio - 1.0) > clip, tf.float32)
        clip_fraction = _masked_mean(clipped, w, n)
        return tf.stack([policy_loss, value_loss, entropy, approx_kl, clip_fraction, grad_norm, loss])
