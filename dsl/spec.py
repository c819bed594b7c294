"""The typed Spec: small frozen dataclasses, one per spec section, built once from a schema-valid
document (:mod:`rlgen.dsl.specbuild`) and written back with every default explicit
(:mod:`rlgen.dsl.resolved`).

Defaults live here, and a learner's in its home's settings dataclass
(:mod:`rlgen.algorithms`); ``schemas/rlgen.schema.json`` states the same ones (a test
keeps them equal). Every field's meaning is documented in ``docs/language.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.algorithms.base import Algorithm
from rlgen.dsl.calls import Call
from rlgen.dsl.methods import Method
from rlgen.dsl.wrappers import Wrapper

PathT = tuple[str | int, ...]


# --- rates and optimizers ---------------------------------------------------
@dataclass(frozen=True)
class LinearSchedule:
    """A value that moves linearly from ``start`` to ``end`` over training progress."""

    start: float
    end: float = 0.0
    schedule: str = "linear"


Rate = float | LinearSchedule


def rate_of(value: Any) -> Rate:
    if isinstance(value, dict):
        return LinearSchedule(float(value["start"]), float(value.get("end", 0.0)))
    return float(value)


@dataclass(frozen=True)
class Optimizer:
    """``adam`` (uses ``eps``) or ``rmsprop`` (uses ``alpha``, ``eps`` and ``tf_like``)."""

    kind: str = "adam"
    eps: float = 1.0e-5
    alpha: float = 0.99
    tf_like: bool = False


def optimizer_of(value: dict[str, Any] | None, default: Optimizer) -> Optimizer:
    if value is None:
        return default
    kind = value.get("kind", default.kind)
    base = default if kind == default.kind else Optimizer(kind, eps=1.0e-5 if kind == "rmsprop" else 1.0e-8)
    return Optimizer(
        kind,
        float(value.get("eps", base.eps)),
        float(value.get("alpha", base.alpha)),
        bool(value.get("tf_like", base.tf_like)),
    )


# --- env ----------------------------------------------------------------------
@dataclass(frozen=True)
class SpaceDecl:
    """A declared space: ``{n: 2}`` (discrete) or ``{shape: [1], low, high}`` (box)."""

    n: int | None = None
    shape: tuple[int, ...] | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Normalize:
    """Observation and reward normalisation, as Stable-Baselines3's ``VecNormalize`` (the RL
    Zoo's ``normalize: true``): running statistics, clipping, and the discount of the return
    whose running std scales rewards (``gamma``: None takes the learner's)."""

    obs: bool = True
    reward: bool = True
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    epsilon: float = 1.0e-8
    gamma: float | None = None


@dataclass(frozen=True)
class EnvSpec:
    """The environment: a gymnasium id, an in-graph TF env, envpool's Atari envs, or a custom factory."""

    id: str | None = None
    backend: str = "gymnasium"
    factory: str | None = None
    num_envs: int = 1
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    observation: SpaceDecl | None = None
    action: SpaceDecl | None = None
    normalize: Normalize | None = None
    wrappers: tuple[Wrapper, ...] = ()
    #: A multi-agent PettingZoo ParallelEnv (module or "pkg.module:callable"), its global
    #: state (``env`` | ``concat`` | None) and whether its agents share one network.
    pettingzoo: str | None = None
    state: str | None = None
    share: bool = True
    #: A named wrapping of a gymnasium id (``atari``: the RL Zoo's Atari wrapper, rlgen.dsl.atari;
    #: implied by ``backend: envpool``, which runs it on envpool's envs: rlgen.dsl.atari_envpool).
    preset: str | None = None
    #: Agent groups (``env.groups``), in the document's order: ``(name, agents)`` each. Empty:
    #: one group of every agent (all agents in one batch, one value of each kind).
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def grouped(self) -> bool:
        """Several agent groups: the loop takes one value of each kind per group."""
        return len(self.groups) > 1

    @property
    def multi_agent(self) -> bool:
        return self.pettingzoo is not None


# --- networks -----------------------------------------------------------------
@dataclass(frozen=True)
class Network:
    """An MLP (``hidden``, ``activation``, ``init``, ``layer_norm``), an image network (``cnn``:
    ``layers`` of ``{filters, kernel, stride}`` then dense ``hidden``; ``impala``: ``channels``
    of its residual stacks then dense ``hidden``; both ``precision``) or a custom network
    (``impl``, ``args``)."""

    name: str
    kind: str = "mlp"
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    init: str = "orthogonal"
    layer_norm: bool = False
    impl: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    layers: tuple[dict[str, int], ...] = ()
    channels: tuple[int, ...] = ()
    #: An image network's compute dtype: ``float32`` or ``bfloat16`` (mixed precision, float32
    #: weights and heads; :mod:`rlgen.runtime.convnets`).
    precision: str = "float32"
    #: ``{size, layer_norm}``: a GRU of ``size`` units between the hidden layers and the heads
    #: (an ``mlp``'s only), its output normalised with ``layer_norm``; None: not recurrent.
    recurrent: dict[str, Any] | None = None

    @property
    def image(self) -> bool:
        """Whether the network reads images (``cnn`` or ``impala``)."""
        return self.kind in IMAGE_NETWORKS


#: Network kinds that read image observations, and their defaults where an MLP's differ: the
#: Nature CNN (Mnih et al. 2015) and the IMPALA ResNet (Espeholt et al. 2018), ReLU throughout.
IMAGE_NETWORKS = {
    "cnn": {
        "hidden": (512,),
        "activation": "relu",
        "layers": (
            {"filters": 32, "kernel": 8, "stride": 4},
            {"filters": 64, "kernel": 4, "stride": 2},
            {"filters": 64, "kernel": 3, "stride": 1},
        ),
    },
    "impala": {"hidden": (256,), "activation": "relu", "channels": (16, 32, 32)},
}


# --- components ---------------------------------------------------------------
@dataclass(frozen=True)
class Exploration:
    """ε-greedy exploration, linear from ``initial`` to ``final`` over ``fraction`` of training."""

    initial: float = 1.0
    final: float = 0.05
    fraction: float = 0.1


def learner_defaults(algo: Algorithm) -> dict[str, Any]:
    """A learner kind's settings defaults, from its home's settings dataclass (optimizers and
    rate schedules typed as the Spec holds them)."""
    out: dict[str, Any] = {}
    for key, value in algo.defaults().items():
        if key == "optimizer":
            out[key] = optimizer_of(value, Optimizer(value["kind"]))
        elif key in algo.rates():
            out[key] = rate_of(value)
        else:
            out[key] = value
    return out


#: The component kinds that read a network (``network:``), one output head each.
NETWORK_READERS = ("policy", "value", "qvalue")

#: A policy's ``gsde`` settings when not written (Stable-Baselines3's with ``use_sde=True``:
#: SAC's ``log_std_init``; PPO and A2C take their policy's own, see :func:`gsde_defaults`).
GSDE_DEFAULTS: dict[str, Any] = {"sample_freq": -1, "log_std_init": -3.0}


def gsde_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    """``gsde``'s defaults for the policy ``raw``: SB3's SAC starts the matrix at -3; its PPO and
    A2C at the policy's ``log_std_init`` (0 unless written), one setting for both there."""
    if raw.get("distribution") == "squashed_gaussian":
        return dict(GSDE_DEFAULTS)
    own = raw.get("log_std_init", COMPONENT_DEFAULTS["policy"]["log_std_init"])
    return {**GSDE_DEFAULTS, "log_std_init": float(own)}


COMPONENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "policy": {"distribution": "auto", "log_std_init": 0.0},
    "value": {},
    "qvalue": {"exploration": Exploration()},
    "rollout": {"length": None},
    "replay": {"capacity": 1_000_000, "batch_size": 32, "compress": False},
    **{kind: learner_defaults(algo) for kind, algo in ALGORITHMS.items()},
    "custom": {"args": {}, "placement": "compute"},
}


@dataclass(frozen=True)
class Component:
    """A component: ``kind`` plus its settings (defaults filled in), and its methods."""

    name: str
    kind: str
    settings: dict[str, Any]
    methods: dict[str, Method]

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


# --- loop ---------------------------------------------------------------------
@dataclass(frozen=True)
class LoopCall:
    """A parsed call and where it is in the document."""

    call: Call
    path: PathT


@dataclass(frozen=True)
class Block:
    """A loop block: calls run in order, ``repeat`` times, on every ``every``-th iteration (and,
    with ``every_steps``, only in the iterations whose env steps pass a multiple of it)."""

    name: str
    calls: tuple[LoopCall, ...]
    repeat: int = 1
    every: int = 1
    after: int = 0
    every_steps: int = 0
    carry: tuple[tuple[str, str], ...] = ()
    path: PathT = ()


@dataclass(frozen=True)
class Loop:
    init: Block | None
    blocks: tuple[Block, ...]

    def all_blocks(self) -> tuple[Block, ...]:
        return ((self.init,) if self.init else ()) + self.blocks

    def env_steps_per_env(self) -> int:
        """Times one iteration steps each env: the repeats of the blocks that call env.step."""
        return sum(b.repeat for b in self.blocks for lc in b.calls if lc.call.target == "env.step")


# --- partitions, deploy, train ------------------------------------------------
@dataclass(frozen=True)
class Partition:
    """A point where the loop may be cut, and what crosses it."""

    name: str
    at: str | None = None
    after: str | None = None
    send: tuple[str, ...] = ()
    receive: tuple[str, ...] = ()
    reduce: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """``env`` (at env.step), ``experience`` (after a block) or ``gradients`` (reduce)."""
        if self.reduce:
            return "gradients"
        if self.after is not None:
            return "experience"
        return "env"


@dataclass(frozen=True)
class Deploy:
    """Distribution policy, number of workers (ranks), hosts (``host:slots``), and how many
    learner updates old the weights an actor acts with may be (``lag``; None: the policy's default).
    ``devices``: where compute fragments run (rlgen.dsl.devices): one value for every side, or
    ``(side, value)`` pairs; None when the spec names none (every fragment on the CPU)."""

    policy: str = "single"
    workers: int = 1
    hosts: tuple[str, ...] = ()
    lag: int | None = None
    devices: str | tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Stop:
    mean_return: float | None = None
    window: int = 100


@dataclass(frozen=True)
class Eval:
    every: int = 0
    episodes: int = 10
    deterministic: bool = True


@dataclass(frozen=True)
class Checkpoint:
    every: int = 0
    keep: int = 3


@dataclass(frozen=True)
class Log:
    """TensorBoard events every ``every`` metrics rows (metrics.jsonl gets a row every iteration;
    iterations of fewer than 64 env steps share one: rlgen.runtime.metricslog)."""

    every: int = 10
    tensorboard: bool = True


@dataclass(frozen=True)
class Train:
    """Budget in env steps, seed, stop condition, evaluation, checkpoints, logs."""

    total_steps: int
    seed: int = 0
    stop: Stop = Stop()
    eval: Eval = Eval()
    checkpoint: Checkpoint = Checkpoint()
    log: Log = Log()
    run_dir: str = "runs"


@dataclass(frozen=True)
class Spec:
    """A whole validated spec."""

    name: str
    env: EnvSpec
    networks: dict[str, Network]
    components: dict[str, Component]
    loop: Loop
    partitions: dict[str, Partition]
    deploy: Deploy
    train: Train
    description: str = ""
    version: int = 1

    @property
    def recurrent(self) -> bool:
        """Has the spec a recurrent network? Its env calls then also return ``first``."""
        return any(net.recurrent for net in self.networks.values())

    def readers(self, network: str) -> list[str]:
        """The components that read ``network`` (policies, values, Q-networks), in spec order."""
        return [n for n, c in self.components.items() if c.kind in NETWORK_READERS and c.get("network") == network]

    def normalize_gamma(self) -> float:
        """The discount of reward normalisation: its own ``gamma``, else the first learner's, else 0.99."""
        norm = self.env.normalize
        if norm is not None and norm.gamma is not None:
            return float(norm.gamma)
        for comp in self.components.values():
            if comp.kind in ALGORITHMS and comp.get("gamma") is not None:
                return float(comp.get("gamma"))
        return 0.99
