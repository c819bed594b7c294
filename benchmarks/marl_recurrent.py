"""Recurrent MAPPO (the reference's ``rmappo``) on the reference's simple_spread, trained through
rlgen's runtime from Python: what the language will generate once it expresses recurrent
networks (issue 31), measured before it does.

    .venv/bin/python benchmarks/marl_recurrent.py --seed 1 --steps 2080000 --rollout 26 --out runs/rmappo/seed-1

The env is rlgen's in-graph simple_spread with the reference's reward and landmark placement
(``reward: reference``, ``physics: mpe``, ``local_ratio: 0``; 3 agents, 25-step episodes, the
limit treated as terminal), 128 env copies, as ``examples/mappo-simple-spread.rl.yaml`` with
those ``--set`` s. The networks are the reference's: input LayerNorm, two tanh layers of 64 each
followed by a LayerNorm, a GRU of 64, a LayerNorm, the head (policy gain 0.01); the policy reads
each agent's observation, the critic the 54 concatenated ones. MAPPO's settings are the
example's (the reference's), trained on chunks of 10 steps from the states stored while acting.

A whole iteration (25 steps of acting, stepping and storing, then the update) is one compiled
graph, as ``single`` compiles the example.

``--rollout`` is the rollout's length in rows. rlgen's envs spend one row after each episode's
end on the reset (gymnasium's NEXT_STEP autoreset: the action of that row is ignored), so a
25-step episode takes 26 rows. With ``--rollout 26`` every rollout is one whole episode and its
reset row, as every 25-step rollout of the reference is one episode (its envs reset within the
last step): no return is cut by the rollout's end and every rollout starts from zero states.
With 25 (the MLP example's length) the cut moves by a row each iteration.

``OUT/metrics.jsonl`` gets a row per iteration in the format of an rlgen run's (``env_steps``
counting reset rows, as rlgen does; ``mean_return``: the mean of the last 100 episodes' per-agent
mean return, which under ``reward: reference`` is the team reward), so that
``benchmarks/marl_reference_curves.py --rlgen OUT`` compares it with the reference trainer's logs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from rlgen.algorithms.mappo.config import METRICS, MAPPOConfig  # noqa: E402
from rlgen.algorithms.mappo.learner import MAPPOLearner  # noqa: E402
from rlgen.runtime.envs import env_seed, replica_seed  # noqa: E402
from rlgen.runtime.graphbuffers import GraphRolloutBuffer  # noqa: E402
from rlgen.runtime.mpe.agent_env import make_tf_agent_env  # noqa: E402
from rlgen.runtime.policies import ActionSpec, Policy, Value  # noqa: E402
from rlgen.runtime.recurrent import RecurrentMLP  # noqa: E402

COPIES, AGENTS, SIZE = 128, 3, 64
ROWS = COPIES * AGENTS
ENV_KWARGS = {
    "N": 3,
    "local_ratio": 0.0,
    "max_cycles": 25,
    "continuous_actions": False,
    "reward": "reference",
    "physics": "mpe",
}


class Agent(tf.Module):
    def __init__(self, seed: int, chunk: int, steps: int) -> None:
        super().__init__(name="agent")
        self.steps = steps
        stream = replica_seed(seed, 0)
        self.env = make_tf_agent_env("mpe2.simple_spread_v3", COPIES, env_seed(seed, 0), ENV_KWARGS, "concat", 3200)
        net = {"hidden": [64, 64], "size": SIZE, "activation": "tanh", "layer_norm": True}
        pi = RecurrentMLP((18,), output_size=5, output_gain=0.01, seed=seed + 1, **net)
        self.actor = Policy(pi, ActionSpec(n=5), seed=stream + 100)  # the run's own sampling stream
        self.critic = Value(RecurrentMLP((54,), output_size=1, seed=seed + 2, **net))
        self.buffer = GraphRolloutBuffer(steps, ROWS, (18,), (), tf.int32, state_shape=(54,), memory=(SIZE, SIZE))
        self.learner = MAPPOLearner(
            self.actor,
            self.critic,
            MAPPOConfig(time_limit="terminal", chunk=chunk),
            steps,
            ROWS,
            (18,),
            seed=stream + 103,
            state_shape=(54,),
        )
        zeros = tf.zeros([ROWS, SIZE])
        self.carried = {
            "obs": tf.Variable(tf.zeros([ROWS, 18]), trainable=False),
            "state": tf.Variable(tf.zeros([ROWS, 54]), trainable=False),
            "first": tf.Variable(tf.ones([ROWS], tf.bool), trainable=False),  # rows beginning an episode
            "h": tf.Variable(zeros, trainable=False),
            "hv": tf.Variable(zeros, trainable=False),
        }

    @tf.function(jit_compile=True, autograph=False)
    def reset(self) -> None:
        obs, state = self.env.reset()
        self.carried["obs"].assign(obs)
        self.carried["state"].assign(state)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)], jit_compile=True, autograph=False)
    def iteration(self, progress: tf.Tensor) -> tf.Tensor:
        c = {k: v.read_value() for k, v in self.carried.items()}
        rows = self.buffer.begin()

        def body(t, obs, state, first, h, hv, rows):
            action, logp, next_h = self.actor.act_recurrent(obs, h, first)
            value, next_hv = self.critic.value_recurrent(state, hv, first)
            next_obs, reward, terminated, truncated, next_state = self.env.step(action)
            # this row is a reset row (the step after an episode's end) exactly when the buffer's
            # previous row ended one; the row after a reset row begins an episode
            next_first = rows.prev_done
            rows = self.buffer.insert(
                rows, t, obs, action, reward, terminated, truncated, logp, value, state, (first, h, hv)
            )
            return t + 1, next_obs, next_state, next_first, next_h, next_hv, rows

        loop = (tf.constant(0), c["obs"], c["state"], c["first"], c["h"], c["hv"], rows)
        _, obs, state, first, h, hv, rows = tf.while_loop(lambda t, *_: t < self.steps, body, loop)
        memory = self.buffer.memory(rows)
        rollout = self.buffer.end(rows)
        metrics = self.learner.update_fn(*rollout, *memory, obs, state, tf.cast(first, tf.float32), hv, progress)
        for k, v in zip(("obs", "state", "first", "h", "hv"), (obs, state, first, h, hv), strict=True):
            self.carried[k].assign(v)
        return metrics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2_000_000, help="joint env steps, counting reset rows (rlgen's count)")
    ap.add_argument("--chunk", type=int, default=10, help="steps per training chunk (the reference's 10)")
    ap.add_argument("--rollout", type=int, default=25, help="rows per rollout (26: one episode and its reset row)")
    ap.add_argument("--out", required=True, help="a directory for metrics.jsonl")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tf.random.set_seed(args.seed)
    agent = Agent(args.seed, args.chunk, args.rollout)
    agent.reset()
    iterations = args.steps // (args.rollout * COPIES)
    window: collections.deque[float] = collections.deque(maxlen=100)
    start = time.perf_counter()
    with (out / "metrics.jsonl").open("w") as f:
        for i in range(iterations):
            metrics = agent.iteration(tf.constant(i / iterations, tf.float32)).numpy()
            window.extend(r for r, _ in agent.env.drain_episodes())
            row = {
                "iteration": i + 1,
                "env_steps": (i + 1) * args.rollout * COPIES,
                "time": round(time.perf_counter() - start, 2),
                "mean_return": round(sum(window) / len(window), 3) if window else None,
                **{k: float(v) for k, v in zip(METRICS, metrics, strict=True)},
            }
            f.write(json.dumps(row) + "\n")
            if (i + 1) % 50 == 0 or i + 1 == iterations:
                f.flush()
                print(
                    f"{row['env_steps']:>9,} steps {row['time']:8.1f} s  mean return {row['mean_return']}", flush=True
                )


if __name__ == "__main__":
    main()
