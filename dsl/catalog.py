"""What the language knows without importing anything: component kinds, their
methods and value types, and the spaces of well-known environments."""

from __future__ import annotations

from dataclasses import dataclass

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl.methods import Method
from rlgen.dsl.methods import method as _m

#: Value types flowing through the loop. Shapes are per env (batch dimension implicit).
#: ``hidden`` is a recurrent network's carried state; ``first`` flags the rows whose observation
#: begins an episode (where a recurrent network starts from zeros).
VALUE_TYPES = (
    "obs",
    "state",
    "action",
    "reward",
    "flag",
    "logp",
    "value",
    "buffer",
    "batch",
    "metrics",
    "hidden",
    "first",
)

RESERVED_NAMES = frozenset({"env", "weights", "init", "gradients"})


ENV_METHODS = {
    "reset": _m("reset", "", "obs:obs state:state?"),
    "step": _m("step", "action:action", "obs:obs reward:reward terminated:flag truncated:flag state:state?"),
}


def env_methods(state: bool, first: bool) -> dict[str, Method]:
    """``env.reset`` / ``env.step`` of a spec: :data:`ENV_METHODS`, or, where a network is
    recurrent (``first``), with ``state`` exactly when ``env.state`` is set and ``first`` last."""
    if not first:
        return ENV_METHODS
    tail = (" state:state" if state else "") + " first:first"
    return {
        "reset": _m("reset", "", "obs:obs" + tail),
        "step": _m("step", "action:action", "obs:obs reward:reward terminated:flag truncated:flag" + tail),
    }


def recurrent_methods(kind: str, state: bool) -> dict[str, Method]:
    """Methods of a component over a recurrent network (``networks.<n>.recurrent``), which take
    and return its carried state (``hidden``) and reset it on the rows that begin an episode:
    a policy or value, and the rollout buffer of a spec with one (it stores ``first`` and the
    states each call read; ``state`` exactly when ``env.state`` is set)."""
    init = _m("initial_state", "", "hidden:hidden")
    if kind == "policy":
        return {
            "act": _m("act", "obs:obs hidden:hidden first:first", "action:action logp:logp hidden:hidden"),
            "initial_state": init,
        }
    if kind == "value":
        return {
            "value": _m("value", "obs:obs|state hidden:hidden first:first", "value:value hidden:hidden"),
            "initial_state": init,
        }
    fields = "obs:obs action:action reward:reward terminated:flag truncated:flag logp:logp value:value"
    return {
        "insert": _m("insert", fields + (" state:state" if state else "") + " first:first hidden:hidden hidden:hidden?")
    }


#: Outputs of one group's part of env.reset() / env.step(), without and with the state.
RESET_OUTPUTS = (("obs:obs",), ("obs:obs", "state:state"))
STEP_OUTPUTS = (
    ("next_obs:obs", "reward:reward", "terminated:flag", "truncated:flag"),
    ("next_obs:obs", "reward:reward", "terminated:flag", "truncated:flag", "next_state:state"),
)


def group_env_methods(groups: tuple[str, ...], state: bool) -> dict[str, Method]:
    """``env.reset`` and ``env.step`` for several agent groups: one value of each kind per group,
    group by group (see :mod:`rlgen.dsl.groups`)."""

    def outs(per_group: tuple[str, ...]) -> str:
        return " ".join(f"{p.split(':')[0]}_{g}:{p.split(':')[1]}" for g in groups for p in per_group)

    return {
        "reset": _m("reset", "", outs(RESET_OUTPUTS[state])),
        "step": _m("step", " ".join(f"action_{g}:action" for g in groups), outs(STEP_OUTPUTS[state])),
    }


def group_outputs(method_name: str, state: bool) -> int:
    return len((RESET_OUTPUTS if method_name == "reset" else STEP_OUTPUTS)[state])


METHODS: dict[str, dict[str, Method]] = {
    "policy": {"act": _m("act", "obs:obs", "action:action logp:logp?")},
    "value": {"value": _m("value", "obs:obs|state", "value:value")},
    "qvalue": {"act": _m("act", "obs:obs", "action:action")},
    "rollout": {
        "insert": _m(
            "insert",
            "obs:obs action:action reward:reward terminated:flag truncated:flag logp:logp? value:value? state:state?",
        )
    },
    "replay": {
        "insert": _m("insert", "obs:obs action:action reward:reward next_obs:obs terminated:flag truncated:flag"),
        "sample": _m("sample", "", "batch:batch"),
    },
    **{kind: dict(algo.methods) for kind, algo in ALGORITHMS.items()},
}

#: Learner kinds: one per algorithm home (rlgen.algorithms).
LEARNER_KINDS = frozenset(ALGORITHMS)
BUFFER_KINDS = frozenset({"rollout", "replay"})
#: Component kinds whose methods run as TensorFlow compute (vs. CPU-side bookkeeping).
COMPUTE_KINDS = frozenset({"policy", "value", "qvalue", *ALGORITHMS})
#: Fields of a component that name another component, with the kinds they accept.
COMPONENT_REFS: dict[str, dict[str, frozenset[str]]] = {
    kind: {ref.field: ref.kinds for ref in algo.refs} for kind, algo in ALGORITHMS.items()
}
#: Fields of a learner that name a network it builds itself (e.g. SAC's critics).
NETWORK_REFS: dict[str, tuple[str, ...]] = {
    kind: tuple(ref.field for ref in algo.networks) for kind, algo in ALGORITHMS.items() if algo.networks
}
#: Buffers that a learner can be updated from.
LEARNER_BUFFERS = {kind: algo.buffer for kind, algo in ALGORITHMS.items() if algo.buffer}
#: Buffer fields that an on-policy learner needs to have been inserted.
LEARNER_NEEDS_INSERTED = {kind: algo.needs_inserted for kind, algo in ALGORITHMS.items() if algo.needs_inserted}


@dataclass(frozen=True)
class Space:
    """A gymnasium space as far as the language needs it."""

    kind: str  # "discrete" | "box"
    shape: tuple[int, ...] = ()
    n: int = 0
    low: float | None = None
    high: float | None = None
    #: A Box's element type as the loop carries it: ``uint8`` for images (kept so from the env to
    #: the learner, scaled inside the graph), ``float32`` for everything else.
    dtype: str = "float32"

    def describe(self) -> str:
        if self.kind == "discrete":
            return f"Discrete({self.n})"
        if self.dtype != "float32":
            return f"Box(shape={list(self.shape)}, dtype={self.dtype})"
        return f"Box(shape={list(self.shape)})"


@dataclass(frozen=True)
class GroupSpaces:
    """One agent group of a PettingZoo env (``env.groups``): its agents, folded into its own
    batch (``len(agents)`` rows per env copy), and the spaces they share."""

    name: str
    agents: tuple[str, ...]
    observation: Space
    action: Space

    @property
    def rows(self) -> int:
        return len(self.agents)

    @property
    def suffix(self) -> str:
        """What the generated code appends to a group's constants (``OBS_SHAPE_ADVERSARIES``)."""
        return "_" + self.name.upper()


@dataclass(frozen=True)
class EnvSpaces:
    observation: Space
    action: Space
    max_episode_steps: int | None = None
    #: A PettingZoo env's agents (folded into the batch: ``agents`` rows per env copy) and
    #: the shape of its global state, if the spec asks for one.
    agents: tuple[str, ...] = ()
    state: tuple[int, ...] | None = None
    #: Several agent groups (``env.groups``), each its own batch and spaces; ``observation``
    #: and ``action`` are then the first group's. Empty: every agent in one batch.
    groups: tuple[GroupSpaces, ...] = ()

    @property
    def rows(self) -> int:
        """Rows of every per-agent value per env copy (1 for a single-agent env)."""
        return max(1, len(self.agents))

    def group(self, name: str | None) -> GroupSpaces | None:
        return next((g for g in self.groups if g.name == name), None)


#: Spaces of environments rlgen knows without importing gymnasium (classic control + Box2D).
KNOWN_ENVS: dict[str, EnvSpaces] = {
    "CartPole-v1": EnvSpaces(Space("box", (4,)), Space("discrete", n=2), 500),
    "Acrobot-v1": EnvSpaces(Space("box", (6,)), Space("discrete", n=3), 500),
    "MountainCar-v0": EnvSpaces(Space("box", (2,)), Space("discrete", n=3), 200),
    "MountainCarContinuous-v0": EnvSpaces(Space("box", (2,)), Space("box", (1,), low=-1.0, high=1.0), 999),
    "Pendulum-v1": EnvSpaces(Space("box", (3,)), Space("box", (1,), low=-2.0, high=2.0), 200),
    "LunarLander-v3": EnvSpaces(Space("box", (8,)), Space("discrete", n=4), 1000),
    "LunarLanderContinuous-v3": EnvSpaces(Space("box", (8,)), Space("box", (2,), low=-1.0, high=1.0), 1000),
    "BipedalWalker-v3": EnvSpaces(Space("box", (24,)), Space("box", (4,), low=-1.0, high=1.0), 1600),
    # MuJoCo (pip install rlgen[mujoco]); observations as gymnasium 1.x's v5 defaults give them
    "HalfCheetah-v5": EnvSpaces(Space("box", (17,)), Space("box", (6,), low=-1.0, high=1.0), 1000),
    "Hopper-v5": EnvSpaces(Space("box", (11,)), Space("box", (3,), low=-1.0, high=1.0), 1000),
    "Walker2d-v5": EnvSpaces(Space("box", (17,)), Space("box", (6,), low=-1.0, high=1.0), 1000),
    "Ant-v5": EnvSpaces(Space("box", (105,)), Space("box", (8,), low=-1.0, high=1.0), 1000),
    "Humanoid-v5": EnvSpaces(Space("box", (348,)), Space("box", (17,), low=-0.4, high=0.4), 1000),
}

#: Environments with an in-graph TensorFlow implementation (``backend: tensorflow``).
TF_ENVS = frozenset({"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1"})

#: PettingZoo envs with an in-graph TensorFlow implementation (``pettingzoo: ..., backend: tensorflow``)
#: and the ``kwargs`` each honours. ``reward`` is rlgen's own (``mpe2`` or ``reference``, see
#: ``rlgen.runtime.mpe.tf_spread``): it is not passed to the PettingZoo env when its spaces are read.
TF_AGENT_ENVS: dict[str, tuple[str, ...]] = {
    "mpe2.simple_spread_v3": ("N", "local_ratio", "max_cycles", "continuous_actions", "reward", "physics"),
}
#: The ``kwargs`` of ours among those of :data:`TF_AGENT_ENVS`, and the values each takes.
TF_AGENT_OWN_KWARGS: dict[str, tuple[str, ...]] = {"reward": ("mpe2", "reference"), "physics": ("mpe2", "mpe")}
