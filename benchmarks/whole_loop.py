"""Whole-loop PPO on the in-graph CartPole: where the time goes, and what it buys end to end.

The design under test: under ``single`` with ``env: {backend: tensorflow}``, one PPO
iteration (a rollout of T steps over all envs as a ``tf.while_loop`` -- act, value,
env.step, rows stored in TensorArrays -- then GAE and every update epoch) is one
``tf.function`` call, XLA-compiled where that helps.

Part A, hand-wired from the runtime's pieces (no code generation), with the spec's
networks and PPO hyper-parameters (``--spec``, default examples/ppo-cartpole.rl.yaml:
the RL Zoo's CartPole-v1 settings). For each number of envs N and each mode of the
*outer* function (``xla``: ``jit_compile=True``; ``graph``: ``jit_compile=False``, the
learner's own ``update_fn`` keeping its default XLA; ``graph-noxla``: no XLA anywhere)
it times three compiled functions, warm-up excluded, median of several calls:

* ``rollout``: the T-step while loop alone,
* ``update``: ``learner.update_fn`` on one fixed rollout,
* ``fused``: rollout + update (+ the env's mean return of the last 100 episodes) in one call,

and, as the reference, the host-driven paths at the same N: gymnasium's
``rlgen.runtime.envs.VectorEnv`` (and the host-driven in-graph env, ``HostTFEnv``,
which is what ``backend: tensorflow`` runs today) with one compiled act+value call
per step, a NumPy rollout buffer and ``learner.update``. The update's arithmetic is
counted as multiply-adds of every dense layer of both networks per sample, times 2
FLOP, times 3 (forward + backward), times epochs x samples (minibatch padding
included); a plain XLA matmul chain of the same widths gives the attainable rate.

Part B, end to end: variants of the spec (gymnasium env with its own num_envs;
``backend: tensorflow`` with the same; the same with ``--big-envs`` envs, once per
``--big-minibatch`` choice, and ``train.total_steps`` raised to ``--big-total-steps``),
each trained by ``python -m rlgen run COPY --quiet --run-dir D --build-dir D2`` in a
fresh process, one after the other, periodic evaluation disabled in the copy (as
benchmarks/ppo_policies.py does). Figures come from the run's metrics.jsonl through
``rlgen.app.bench.read_run`` (first iteration left out of rates and per-part
times); "time to R" is the run's clock when the mean return of the last 100 training
episodes first reaches the target. The script does not care how ``rlgen run``
executes the loop (host-driven, or one fused call per iteration since commit 50ad021);
to measure another checkout, put a copy named ``rlgen`` first on PYTHONPATH
(``git archive REV | tar -x -C DIR/rlgen; PYTHONPATH=DIR ...``): the runs inherit it.

    .venv/bin/python benchmarks/whole_loop.py                 # Part A then Part B
    .venv/bin/python benchmarks/whole_loop.py --part a --envs 8 1024 --modes xla graph
    .venv/bin/python benchmarks/whole_loop.py --part b --seeds 0,1,2 --big-minibatch 256,whole

The machine is shared: compare figures within one run of this script.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = ROOT / "examples" / "ppo-cartpole.rl.yaml"
MODES = ("xla", "graph", "graph-noxla")


# ======================================================================= helpers


def load_spec(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def interleaved_times(
    calls: dict[str, Callable[[], Any]], min_reps: int, seconds: float, max_reps: int = 50
) -> dict[str, list[float]]:
    """Seconds per call of each function, called in turn (round robin) at least ``min_reps``
    times each and for about ``seconds`` in all, so that load from other work on the
    machine spreads over all of them alike."""
    times: dict[str, list[float]] = {k: [] for k in calls}
    start = time.perf_counter()
    reps = 0
    while reps < min_reps or (time.perf_counter() - start < seconds and reps < max_reps):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
        reps += 1
    return times


def median_time(
    call: Callable[[], Any], min_reps: int, seconds: float, max_reps: int = 50
) -> tuple[float, list[float]]:
    """Median seconds per call over at least ``min_reps`` calls (and about ``seconds`` of calls)."""
    times = interleaved_times({"call": call}, min_reps, seconds, max_reps)["call"]
    return statistics.median(times), times


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    return f"{x:,.0f}"


def load() -> str:
    """The 1-minute load average (other work on this shared machine shows up here)."""
    return f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def wait_for_quiet(max_load: float | None, max_wait: float) -> None:
    """Sleep (up to ``max_wait`` s) until the 1-minute load average is below ``max_load``."""
    if max_load is None:
        return
    t0 = time.perf_counter()
    while os.getloadavg()[0] >= max_load and time.perf_counter() - t0 < max_wait:
        time.sleep(5)
    waited = time.perf_counter() - t0
    if waited >= 5:
        print(f"  (waited {waited:.0f} s for the load to drop below {max_load:g}: {load()})", flush=True)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


# ======================================================================= Part A


@dataclass
class Row:
    n: int
    minibatch: int | None  # None: not applicable (rollout)
    mode: str
    part: str  # rollout | update | fused | gym rollout | gym iteration | ...
    first_s: float
    ms: float  # median
    ms_min: float
    steps: int  # env steps per call
    gflop: float | None = None  # update arithmetic per call

    @property
    def steps_per_s(self) -> float:
        return self.steps / (self.ms / 1000)

    @property
    def gflops(self) -> float | None:
        return None if self.gflop is None else self.gflop / (self.ms / 1000)


class Agent:
    """One CartPole PPO agent from the runtime's pieces, as the generated fragment builds it."""

    def __init__(self, spec: dict[str, Any], n: int, minibatch: int, learner_jit: bool, seed: int = 0) -> None:
        import tensorflow as tf

        from rlgen.algorithms.base import from_settings
        from rlgen.algorithms.ppo.config import PPOConfig
        from rlgen.algorithms.ppo.learner import PPOLearner
        from rlgen.runtime.networks import build_network
        from rlgen.runtime.policies import ActionSpec, Policy, Value
        from rlgen.runtime.tfenvs import make_tf_env

        comps = spec["components"]
        actor = next(c for c in comps.values() if c["kind"] == "policy")
        critic = next(c for c in comps.values() if c["kind"] == "value")
        learner_spec = dict(next(c for c in comps.values() if c["kind"] == "ppo"))
        learner_spec["minibatch"] = minibatch
        self.T = int(spec["loop"]["rollout"]["repeat"])
        self.n = n
        self.env = make_tf_env(spec["env"]["id"], num_envs=n, seed=seed)
        obs_shape = (self.env.obs_size,)
        action_spec = ActionSpec.from_space(self.env.single_action_space)
        pi_cfg, v_cfg = spec["networks"][actor["network"]], spec["networks"][critic["network"]]
        self.pi = build_network(pi_cfg, obs_shape, action_spec.num_outputs, output_gain=0.01, seed=seed + 1, name="pi")
        self.v = build_network(v_cfg, obs_shape, 1, output_gain=1.0, seed=seed + 2, name="v")
        self.policy = Policy(self.pi, action_spec, seed=seed + 100, name="actor")
        self.value = Value(self.v, name="critic")
        self.config = from_settings(PPOConfig, {**learner_spec, "jit_compile": learner_jit})
        self.learner = PPOLearner(self.policy, self.value, self.config, self.T, n, obs_shape, seed=seed + 103)
        self.obs_shape, self.action_spec = obs_shape, action_spec
        self.env.reset()
        self._tf = tf

    # --- arithmetic -----------------------------------------------------------------
    def macs_per_sample(self) -> int:
        """Multiply-adds of one forward pass of both networks for one observation."""
        return sum(
            int(np.prod(v.shape)) for net in (self.pi, self.v) for v in net.trainable_variables if len(v.shape) == 2
        )

    def update_gflop(self) -> float:
        """Forward + backward (~3x forward) of both networks over every epoch's (padded) samples."""
        samples = self.config.epochs * self.learner.minibatches_per_epoch * self.learner.minibatch
        return 3 * 2 * self.macs_per_sample() * samples / 1e9

    # --- the in-graph rollout ---------------------------------------------------------
    def rollout_graph(self) -> tuple[list[Any], Any]:
        """Trace the T-step rollout; returns the stacked rows ``[T, N, ...]`` in the
        learner's argument order (obs, actions, rewards, terminated, truncated, valid,
        logp, values) and the observation after the last step."""
        tf, env, T, n = self._tf, self.env, self.T, self.n
        f32 = tf.float32
        specs = [
            (f32, [n, *self.obs_shape]),  # obs (the one the action was taken in)
            (self.action_spec.dtype, [n]),  # action
            (f32, [n]),  # reward
            (f32, [n]),  # terminated
            (f32, [n]),  # truncated
            (f32, [n]),  # valid: not a reset step
            (f32, [n]),  # logp
            (f32, [n]),  # value
        ]
        arrays = [tf.TensorArray(d, size=T, element_shape=s) for d, s in specs]

        def body(t: Any, obs: Any, *arrays: Any) -> tuple[Any, ...]:
            action, logp = self.policy.act(obs)
            value = self.value.value(obs)
            next_obs, reward, terminated, truncated = env.step(action)
            valid = env.valid.read_value()  # False on the reset step after an episode's end
            row = (
                obs,
                action,
                reward,
                tf.cast(terminated, f32),
                tf.cast(truncated, f32),
                tf.cast(valid, f32),
                logp,
                value,
            )
            return (t + 1, next_obs, *(a.write(t, x) for a, x in zip(arrays, row, strict=True)))

        out = tf.while_loop(lambda t, *_: t < T, body, (tf.constant(0), env.observe(), *arrays))
        return [a.stack() for a in out[2:]], out[1]

    def functions(self, outer_jit: bool) -> dict[str, Any]:
        tf = self._tf
        learner = self.learner

        @tf.function(jit_compile=outer_jit, autograph=False)
        def rollout() -> Any:
            rows, last_obs = self.rollout_graph()
            return (*rows, last_obs)

        @tf.function(input_signature=learner.update_fn.input_signature, jit_compile=outer_jit, autograph=False)
        def update(*args: Any) -> Any:
            return learner.update_fn(*args)

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)], jit_compile=outer_jit, autograph=False)
        def fused(progress: Any) -> Any:
            rows, last_obs = self.rollout_graph()
            metrics = learner.update_fn(*rows, last_obs, progress)
            return metrics, self.env.recent_mean_return(100), self.env.env_steps.read_value()

        return {"rollout": rollout, "update": update, "fused": fused}


def check_rollout(rows: Sequence[Any]) -> None:
    """Sanity of the stored rows: CartPole pays 1 per real transition and 0 on reset steps,
    and a row is a reset step exactly when the previous row ended an episode."""
    rewards, terminated, truncated, valid = (np.asarray(r) for r in rows[2:6])
    assert np.array_equal(rewards, valid), "reward != valid: rows are misaligned"
    done = np.maximum(terminated, truncated)
    assert np.array_equal(valid[1:], 1.0 - done[:-1]), "valid[t] != not done[t-1]"


def time_tf_functions(
    spec: dict[str, Any], n: int, minibatch: int, mode: str, reps: int, seconds: float, with_rollout: bool
) -> list[Row]:
    import tensorflow as tf

    outer_jit, learner_jit = mode == "xla", mode != "graph-noxla"
    agent = Agent(spec, n, minibatch, learner_jit)
    fns = agent.functions(outer_jit)
    steps = agent.T * n
    label = f"N={n} mb={agent.learner.minibatch} {mode}"
    progress = tf.constant(0.0)
    first = {}

    # Warm-up calls (trace, compile), the fused one first so that its first call pays every
    # compile it needs (in graph mode the update-only function then reuses the learner's
    # compiled update_fn). The first rollout is the fixed one the update-only function learns from.
    t0 = time.perf_counter()
    metrics, _, _ = fns["fused"](progress)
    metrics = metrics.numpy()
    first["fused"] = time.perf_counter() - t0
    if not np.all(np.isfinite(metrics[:7])):
        print(f"  warning: {label} fused metrics not finite: {metrics}", flush=True)
    t0 = time.perf_counter()
    data = fns["rollout"]()
    data[-1].numpy()
    first["rollout"] = time.perf_counter() - t0
    check_rollout(data)
    fixed = [tf.identity(x) for x in data]
    t0 = time.perf_counter()
    fns["update"](*fixed, progress).numpy()
    first["update"] = time.perf_counter() - t0

    calls = {
        "rollout": lambda: fns["rollout"]()[-1].numpy(),
        "update": lambda: fns["update"](*fixed, progress).numpy(),
        "fused": lambda: fns["fused"](progress)[0].numpy(),
    }
    if not with_rollout:
        del calls["rollout"]
    times = interleaved_times(calls, reps, seconds)
    out = []
    for part, ts in times.items():
        gflop = None if part == "rollout" else agent.update_gflop()
        mb = None if part == "rollout" else agent.learner.minibatch
        ms, ms_min = 1000 * statistics.median(ts), 1000 * min(ts)
        out.append(Row(n, mb, mode, part, first[part], ms, ms_min, steps, gflop))
        print(f"  {label} {part}: first call {first[part]:.2f} s, median {ms:.2f} ms, min {ms_min:.2f} ms "
              f"({len(ts)} calls)", flush=True)  # fmt: skip
    return out


def time_host_path(spec: dict[str, Any], n: int, minibatch: int, backend: str, reps: int, seconds: float) -> list[Row]:
    """The host-driven loop: one compiled act+value call, one env step and one buffer insert
    per step (gymnasium ``VectorEnv``, or ``HostTFEnv`` for backend tensorflow), then
    ``learner.update`` from the NumPy rollout, as the generated ``single`` loop does."""
    from rlgen.runtime.buffers import RolloutBuffer
    from rlgen.runtime.envs import VectorEnv
    from rlgen.runtime.policies import make_act_and_value
    from rlgen.runtime.tfenvs.host import HostTFEnv

    agent = Agent(spec, n, minibatch, learner_jit=True)  # its TF env goes unused
    env = VectorEnv(spec["env"]["id"], n, seed=0) if backend == "gymnasium" else HostTFEnv(spec["env"]["id"], n, seed=0)
    act = make_act_and_value(agent.policy, agent.value, agent.obs_shape, jit_compile=True)
    buffer = RolloutBuffer(agent.T, n, agent.obs_shape, (), agent.action_spec.np_dtype)
    state = {"obs": env.reset()}

    def rollout() -> None:
        obs = state["obs"]
        for _ in range(agent.T):
            action, logp, value = act(obs)
            next_obs, reward, terminated, truncated = env.step(action)
            buffer.insert(obs, action, reward, terminated, truncated, logp, value)
            obs = next_obs
        state["obs"] = obs

    def iteration() -> None:
        rollout()
        agent.learner.update(buffer, state["obs"], 0.0)

    name = "gym" if backend == "gymnasium" else "host-tf"
    steps = agent.T * n
    t0 = time.perf_counter()
    rollout()
    first_r = time.perf_counter() - t0
    t0 = time.perf_counter()
    iteration()
    first_i = time.perf_counter() - t0
    times = interleaved_times({"rollout": rollout, "iteration": iteration}, reps, seconds)
    (ms_r, min_r), (ms_i, min_i) = ((1000 * statistics.median(t), 1000 * min(t)) for t in times.values())
    mb = agent.learner.minibatch
    print(f"  N={n} {name}: rollout {ms_r:.2f} ms (min {min_r:.2f}), iteration (mb={mb}) {ms_i:.2f} ms "
          f"(min {min_i:.2f})", flush=True)  # fmt: skip
    return [
        Row(n, None, "host", f"{name} rollout", first_r, ms_r, min_r, steps),
        Row(n, mb, "host", f"{name} iteration", first_i, ms_i, min_i, steps, agent.update_gflop()),
    ]


def matmul_reference(
    widths: Sequence[int], batches: Sequence[int], reps: int, seconds: float
) -> list[tuple[int, float]]:
    """GFLOP/s of an XLA-compiled forward + backward pass through dense tanh layers of the
    networks' widths (one network, plain loss), at each batch size: what the update's
    matmuls can attain on this machine with the same thread settings."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    ws = [tf.Variable(rng.standard_normal((a, b)).astype(np.float32) * 0.1) for a, b in pairs]
    macs = sum(a * b for a, b in pairs)

    def make_run(loops: int) -> Any:
        @tf.function(jit_compile=True, autograph=False)
        def run(x: Any) -> Any:
            def body(i: Any, acc: Any) -> Any:
                with tf.GradientTape() as tape:
                    h = x
                    for w in ws:
                        h = tf.tanh(h @ w)
                    loss = tf.reduce_mean(tf.square(h))
                grads = tape.gradient(loss, ws)
                for w, g in zip(ws, grads, strict=True):
                    w.assign_sub(1e-6 * g)
                return i + 1, acc + loss

            return tf.while_loop(lambda i, _: i < loops, body, (tf.constant(0), tf.constant(0.0)))[1]

        return run

    out = []
    for batch in batches:
        x = tf.constant(rng.standard_normal((batch, widths[0])).astype(np.float32))
        loops = max(1, 20 * 32768 // batch // 8)
        run = make_run(loops)
        run(x).numpy()
        s, _ = median_time(lambda run=run, x=x: run(x).numpy(), reps, seconds)
        out.append((batch, 3 * 2 * macs * batch * loops / s / 1e9))
    return out


def part_a(args: argparse.Namespace, spec: dict[str, Any]) -> None:
    from rlgen.runtime.tfutil import configure_threads

    configure_threads(*args.threads)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    rows: list[Row] = []
    errors: list[str] = []
    probe = Agent(spec, 8, 256, True)
    widths = [probe.obs_shape[0], *(int(layer.w.shape[1]) for layer in probe.v.hidden)]  # the hidden layers
    print(
        f"Part A: {spec['env']['id']}, T={probe.T}, epochs={probe.config.epochs}, "
        f"{probe.macs_per_sample()} multiply-adds per sample (both networks, forward), "
        f"threads inter/intra={args.threads[0]}/{args.threads[1]}, {load()}",
        flush=True,
    )
    for n in args.envs:
        default_mb = int(next(c for c in spec["components"].values() if c["kind"] == "ppo")["minibatch"])
        minibatches = [default_mb] if n * probe.T <= default_mb else [default_mb, n * probe.T]
        if n * probe.T > default_mb and args.no_whole_batch:
            minibatches = [default_mb]
        for mode in args.modes:
            for i, mb in enumerate(minibatches):
                wait_for_quiet(args.wait_load, args.max_wait)
                try:
                    rows += time_tf_functions(spec, n, mb, mode, args.reps, args.seconds, with_rollout=i == 0)
                except Exception as error:  # keep going: an XLA failure is a finding
                    msg = f"N={n} mb={mb} {mode}: {type(error).__name__}: {error}"
                    errors.append(msg)
                    print("  ERROR " + msg.splitlines()[0], flush=True)
        for backend in args.host_backends:
            mbs = minibatches if backend == "gymnasium" else minibatches[:1]
            for mb in mbs:
                wait_for_quiet(args.wait_load, args.max_wait)
                got = time_host_path(spec, n, mb, backend, args.reps, args.seconds)
                rows += got if mb == mbs[0] else got[1:]

    ref = {}
    if args.matmul_reference:
        batches = sorted({256, *(n * probe.T for n in args.envs)})
        for batch, g in matmul_reference(widths, batches, args.reps, args.seconds):
            ref[batch] = g
        print(
            "attainable (XLA dense tanh chain "
            + "x".join(map(str, widths))
            + ", fwd+bwd): "
            + ", ".join(f"batch {b}: {g:.1f} GFLOP/s" for b, g in ref.items()),
            flush=True,
        )

    def baseline(row: Row) -> Row | None:
        kind = "rollout" if row.part.endswith("rollout") else "iteration"
        if row.part == "update":
            return None
        return next((r for r in rows if r.n == args.baseline_envs and r.part == f"gym {kind}"), None)

    header = ["N", "minibatch", "outer", "function", "first call s", "ms/iter", "min ms", "env steps/s",
              f"x gym-{args.baseline_envs}", "update GFLOP", "GFLOP/s"]  # fmt: skip
    out_rows = []
    for r in rows:
        base = baseline(r)
        ratio = f"{r.steps_per_s / base.steps_per_s:.2f}" if base else "-"
        gflops = f"{r.gflops:.1f}" if r.gflops is not None and r.part == "update" else "-"
        out_rows.append(
            [
                str(r.n),
                "-" if r.minibatch is None else str(r.minibatch),
                r.mode,
                r.part,
                f"{r.first_s:.2f}",
                f"{r.ms:.2f}",
                f"{r.ms_min:.2f}",
                fmt_rate(r.steps_per_s),
                ratio,
                "-" if r.gflop is None else f"{r.gflop:.2f}",
                gflops,
            ]
        )
    print(f"(end of Part A measurements: {load()})")
    print(
        f"\nPart A: one PPO iteration = {probe.T} steps x N envs; "
        f"medians of >= {args.reps} calls after a warm-up call; "
        f"'x gym-{args.baseline_envs}': env steps/s over gymnasium VectorEnv at {args.baseline_envs} envs "
        "(rollout rows against its rollout, the others against its whole iteration); "
        "first call: trace + compile, fused first (rollout and update first calls come after it); "
        "GFLOP/s: update arithmetic (fwd+bwd = 3x fwd) / update time"
    )
    print(table(header, out_rows))
    # the fused call against its parts
    print("\nfused vs rollout + update (same N, minibatch, outer mode):")
    for r in rows:
        if r.part != "fused":
            continue
        ro = next((x for x in rows if (x.n, x.mode, x.part) == (r.n, r.mode, "rollout")), None)
        up = next((x for x in rows if (x.n, x.mode, x.minibatch, x.part) == (r.n, r.mode, r.minibatch, "update")), None)
        if ro and up:
            share = 100 * up.ms / r.ms
            print(
                f"  N={r.n} mb={r.minibatch} {r.mode}: fused {r.ms:.2f} ms vs {ro.ms:.2f} + {up.ms:.2f} = "
                f"{ro.ms + up.ms:.2f} ms (min: {r.ms_min:.2f} vs {ro.ms_min + up.ms_min:.2f}); "
                f"update is {share:.0f}% of the fused call"
            )
    if errors:
        print("\nerrors:")
        for e in errors:
            print("  " + e)


# ======================================================================= Part B


@dataclass
class Variant:
    name: str
    backend: str  # gymnasium | tensorflow
    num_envs: int
    minibatch: int | None  # None: the spec's
    total_steps: int | None  # None: the spec's


def variant_spec(base: dict[str, Any], v: Variant, seed: int) -> dict[str, Any]:
    spec = copy.deepcopy(base)
    env = spec["env"]
    env["num_envs"] = v.num_envs
    if v.backend == "tensorflow":
        env["backend"] = "tensorflow"
    else:
        env.pop("backend", None)
    learner = next(c for c in spec["components"].values() if c["kind"] in ("ppo", "a2c"))
    if v.minibatch is not None:
        learner["minibatch"] = v.minibatch
    train = spec.setdefault("train", {})
    train["seed"] = seed
    if v.total_steps is not None:
        train["total_steps"] = v.total_steps
    if isinstance(train.get("eval"), dict):  # time to target measures training alone
        train["eval"]["every"] = 0
    return spec


def run_variant(spec: dict[str, Any], workdir: Path, tag: str, target: float, timeout: float) -> Any:
    """Train ``spec`` with ``rlgen run`` (rlgen.app.bench.run_policy); returns the run's
    summary, the whole subprocess's seconds, and the run clock when the first iteration ended."""
    from rlgen.app.bench import run_policy

    spec_path = workdir / f"{tag}.rl.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    run_dir = workdir / f"run-{tag}"
    t0 = time.perf_counter()
    result = run_policy(spec_path, "single", 1, None, run_dir, target, timeout)
    process_s = time.perf_counter() - t0
    if not result.ok:
        return result, process_s, None
    # the run clock at the end of the first iteration: set-up, tracing, compiling and one iteration
    first_line = (run_dir / "metrics.jsonl").read_text().splitlines()[:1]
    first_s = float(json.loads(first_line[0])["time"]) if first_line else None
    return result, process_s, first_s


def median_or_none(xs: Sequence[float | None], need_majority: bool = True) -> float | None:
    got = [x for x in xs if x is not None]
    if not got or (need_majority and 2 * len(got) <= len(xs)):
        return None
    return statistics.median(got)


def part_b(args: argparse.Namespace, spec: dict[str, Any]) -> None:
    from rlgen.runtime.clock import CATEGORIES as PARTS

    seeds = [int(s) for s in args.seeds.split(",")]
    n_small = int(spec["env"].get("num_envs", 1))
    T = int(spec["loop"]["rollout"]["repeat"])
    variants = [
        Variant(f"gymnasium {n_small}", "gymnasium", n_small, None, None),
        Variant(f"tensorflow {n_small}", "tensorflow", n_small, None, None),
    ]
    for mb in args.big_minibatch.split(","):
        size = args.big_envs * T if mb == "whole" else int(mb)
        variants.append(
            Variant(f"tensorflow {args.big_envs} mb {size}", "tensorflow", args.big_envs, size, args.big_total_steps)
        )
    if args.variants:
        keep = set(args.variants.split(","))
        variants = [v for i, v in enumerate(variants) if str(i) in keep or v.name in keep]
    print(f"\nPart B: {len(variants)} variants x seeds {seeds}, target mean return {args.target:g}", flush=True)
    summary = []
    with tempfile.TemporaryDirectory(prefix="rlgen-whole-loop-") as tmp:
        for i, v in enumerate(variants):
            results = []
            for seed in seeds:
                tag = f"v{i}-s{seed}"
                wait_for_quiet(args.wait_load, args.max_wait)
                print(f"  {v.name} seed {seed}: starting ({load()})", flush=True)
                result, process_s, first_s = run_variant(
                    variant_spec(spec, v, seed), Path(tmp), tag, args.target, args.timeout
                )
                results.append((result, first_s))
                if result.ok:
                    parts = ", ".join(f"{p} {result.ms_per_iteration[p]:.1f}" for p in PARTS)
                    print(
                        f"  {v.name} seed {seed}: {result.steps_per_s:,.0f} steps/s, to {args.target:g}: "
                        f"{result.time_to_target} s / {result.steps_to_target} steps, final {result.final_return}, "
                        f"{result.env_steps:,} steps in {result.wall:.1f} s (first iteration done at {first_s:.2f} s, "
                        f"process {process_s:.1f} s); ms/iter {parts}",
                        flush=True,
                    )
                else:
                    print(f"  {v.name} seed {seed}: FAILED {result.error}", flush=True)
            summary.append((v, results))

    rows = []
    base = summary[0][1] if summary and summary[0][0].backend == "gymnasium" else None

    def agg(results: list[Any]) -> dict[str, Any]:
        ok = [r for r, _ in results if r.ok]
        if not ok:
            return {}
        return {
            "steps_per_s": statistics.median(r.steps_per_s for r in ok),
            "time_to_target": median_or_none([r.time_to_target for r in ok]),
            "steps_to_target": median_or_none([r.steps_to_target for r in ok]),
            "reached": sum(r.time_to_target is not None for r in ok),
            "runs": len(results),
            "wall": statistics.median(r.wall for r in ok),
            "env_steps": statistics.median(r.env_steps for r in ok),
            "parts": {p: statistics.median(r.ms_per_iteration.get(p, 0.0) for r in ok) for p in PARTS},
            "iterations": statistics.median(r.iterations for r in ok),
            "first": median_or_none([f for r, f in results if r.ok], need_majority=False),
        }

    b = agg(base) if base else {}
    for v, results in summary:
        a = agg(results)
        if not a:
            rows.append([v.name, "failed", *["-"] * (8 + len(PARTS))])
            continue
        sps_ratio = f"{a['steps_per_s'] / b['steps_per_s']:.2f}" if b else "-"
        ttt = a["time_to_target"]
        ttt_ratio = f"{b['time_to_target'] / ttt:.2f}" if b and b.get("time_to_target") and ttt else "-"
        rows.append(
            [
                v.name,
                fmt_rate(a["steps_per_s"]),
                sps_ratio,
                "-" if ttt is None else f"{ttt:.1f}",
                ttt_ratio,
                "-" if a["steps_to_target"] is None else f"{a['steps_to_target']:,.0f}",
                f"{a['reached']}/{a['runs']}",
                f"{a['wall']:.1f}",
                f"{a['iterations']:.0f}",
                "-" if a["first"] is None else f"{a['first']:.2f}",
                *(f"{a['parts'][p]:.1f}" for p in PARTS),
            ]
        )
    header = ["variant", "steps/s", "x gym", f"s to {args.target:g}", "x gym (speed-up)", f"steps to {args.target:g}",
              "reached", "wall s", "iterations", "1st it done s", *(f"ms/it {p}" for p in PARTS)]  # fmt: skip
    print(
        f"\nPart B: `rlgen run` of {args.spec.name} variants, medians over seeds {seeds}; steps/s and ms/it leave out "
        f"the first iteration; 'x gym' = steps/s ratio, 'x gym (speed-up)' = gym time to {args.target:g} / this one's; "
        "'1st it done s': the run clock after the first iteration (set-up, tracing, XLA compiles, one iteration)"
    )
    print(table(header, rows))
    for v, results in summary:
        for r, _ in results:
            if not r.ok:
                print(f"  {v.name} ({r.policy}): {r.error}")


# ======================================================================= main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["a", "b", "both"], default="both")
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    # Part A
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 1024], help="Part A: numbers of envs")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["xla", "graph"], help="Part A: outer modes")
    parser.add_argument("--no-whole-batch", action="store_true", help="Part A: skip minibatch = whole rollout")
    parser.add_argument("--host-backends", nargs="*", default=["gymnasium", "tensorflow"],
                        choices=["gymnasium", "tensorflow"], help="Part A: host-driven reference loops")  # fmt: skip
    parser.add_argument("--baseline-envs", type=int, default=8, help="Part A: gymnasium row the ratios use")
    parser.add_argument("--reps", type=int, default=5, help="Part A: at least this many timed calls")
    parser.add_argument("--seconds", type=float, default=2.0, help="Part A: and about this long per cell")
    parser.add_argument("--threads", type=int, nargs=2, default=(1, 1), metavar=("INTER", "INTRA"),
                        help="Part A: TF thread pools (rlgen run uses 1 1)")  # fmt: skip
    parser.add_argument("--no-matmul-reference", dest="matmul_reference", action="store_false")
    # Part B
    parser.add_argument("--seeds", default="0", help="Part B: comma-separated seeds (train.seed); medians")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--big-envs", type=int, default=1024)
    parser.add_argument("--big-minibatch", default="256,whole", help="Part B: minibatches at --big-envs ('whole': T*N)")
    parser.add_argument("--big-total-steps", type=int, default=3_000_000)
    parser.add_argument("--variants", default="", help="Part B: only these variant indices or names (comma-separated)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="Part B: seconds per run")
    parser.add_argument(
        "--wait-load",
        type=float,
        default=None,
        metavar="LOAD",
        help="before each cell or run, wait until the 1-minute load average is below LOAD",
    )
    parser.add_argument("--max-wait", type=float, default=300.0, help="longest such wait, seconds")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    if args.part in ("a", "both"):
        part_a(args, spec)
    if args.part in ("b", "both"):
        part_b(args, spec)


if __name__ == "__main__":
    main()
