"""What the language knows without importing anything: component kinds, their
methods and value types, and the spaces of well-known environments."""

from __future__ import annotations

from dataclasses import dataclass

#: Value types flowing through the loop. Shapes are per env (batch dimension implicit).
VALUE_TYPES = ("obs", "action", "reward", "flag", "logp", "value", "buffer", "batch", "metrics")

RESERVED_NAMES = frozenset({"env", "weights", "init", "gradients"})


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    optional: bool = False


@dataclass(frozen=True)
class Method:
    """A callable method of a component kind: typed inputs and outputs."""

    name: str
    inputs: tuple[Param, ...] = ()
    outputs: tuple[Param, ...] = ()

    @property
    def min_inputs(self) -> int:
        return sum(not p.optional for p in self.inputs)

    @property
    def min_outputs(self) -> int:
        return sum(not p.optional for p in self.outputs)

    def signature(self, component: str) -> str:
        def fmt(params: tuple[Param, ...]) -> str:
            req = [p.name for p in params if not p.optional]
            opt = [p.name for p in params if p.optional]
            return ", ".join(req) + "".join(f"[, {o}" for o in opt) + "]" * len(opt)

        outs = f" -> {fmt(self.outputs)}" if self.outputs else ""
        return f"{component}.{self.name}({fmt(self.inputs)}){outs}"


def _m(name: str, inputs: str = "", outputs: str = "") -> Method:
    """``_m("act", "obs:obs", "action:action logp:logp?")``: name:type, ``?`` = optional."""

    def params(spec: str) -> tuple[Param, ...]:
        out = []
        for item in spec.split():
            pname, ptype = item.split(":")
            out.append(Param(pname, ptype.rstrip("?"), ptype.endswith("?")))
        return tuple(out)

    return Method(name, params(inputs), params(outputs))


ENV_METHODS = {
    "reset": _m("reset", "", "obs:obs"),
    "step": _m("step", "action:action", "obs:obs reward:reward terminated:flag truncated:flag"),
}

_UPDATE_ON_POLICY = _m("update", "buffer:buffer obs:obs", "metrics:metrics?")

METHODS: dict[str, dict[str, Method]] = {
    "policy": {"act": _m("act", "obs:obs", "action:action logp:logp?")},
    "value": {"value": _m("value", "obs:obs", "value:value")},
    "qvalue": {"act": _m("act", "obs:obs", "action:action")},
    "rollout": {
        "insert": _m(
            "insert",
            "obs:obs action:action reward:reward terminated:flag truncated:flag logp:logp? value:value?",
        )
    },
    "replay": {
        "insert": _m("insert", "obs:obs action:action reward:reward next_obs:obs terminated:flag truncated:flag"),
        "sample": _m("sample", "", "batch:batch"),
    },
    "ppo": {"update": _UPDATE_ON_POLICY},
    "a2c": {"update": _UPDATE_ON_POLICY},
    "dqn": {"update": _m("update", "batch:batch", "metrics:metrics?"), "sync_target": _m("sync_target")},
}

LEARNER_KINDS = frozenset({"ppo", "a2c", "dqn"})
BUFFER_KINDS = frozenset({"rollout", "replay"})
#: Component kinds whose methods run as TensorFlow compute (vs. CPU-side bookkeeping).
COMPUTE_KINDS = frozenset({"policy", "value", "qvalue", "ppo", "a2c", "dqn"})
#: Fields of a component that name another component, with the kinds they accept.
COMPONENT_REFS: dict[str, dict[str, frozenset[str]]] = {
    "ppo": {"policy": frozenset({"policy"}), "value": frozenset({"value"})},
    "a2c": {"policy": frozenset({"policy"}), "value": frozenset({"value"})},
    "dqn": {"q": frozenset({"qvalue"})},
}
#: Buffers that a learner can be updated from.
LEARNER_BUFFERS = {"ppo": "rollout", "a2c": "rollout"}
#: Buffer fields that an on-policy learner needs to have been inserted.
LEARNER_NEEDS_INSERTED = {"ppo": ("logp", "value"), "a2c": ("value",)}


@dataclass(frozen=True)
class Space:
    """A gymnasium space as far as the language needs it."""

    kind: str  # "discrete" | "box"
    shape: tuple[int, ...] = ()
    n: int = 0
    low: float | None = None
    high: float | None = None

    def describe(self) -> str:
        if self.kind == "discrete":
            return f"Discrete({self.n})"
        return f"Box(shape={list(self.shape)})"


@dataclass(frozen=True)
class EnvSpaces:
    observation: Space
    action: Space
    max_episode_steps: int | None = None


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
