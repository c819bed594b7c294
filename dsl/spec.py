"""The typed Spec: small frozen dataclasses built once from a schema-valid document.

Defaults live here, and a learner's in its home's settings dataclass
(:mod:`rlgen.algorithms`); ``schemas/rlgen.schema.json`` states the same ones (a test
keeps them equal). Every field's meaning is documented in ``docs/language.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.algorithms.base import Algorithm
from rlgen.dsl.calls import Call, CallSyntaxError, parse_call
from rlgen.dsl.catalog import METHODS, recurrent_methods
from rlgen.dsl.methods import Method, Param
from rlgen.dsl.wrappers import Wrapper
from rlgen.dsl.wrappers import parse as parse_wrappers

PathT = tuple[str | int, ...]


# --- rates and optimizers ---------------------------------------------------
@dataclass(frozen=True)
class LinearSchedule:
    """A value that moves linearly from ``start`` to ``end`` over training progress."""

    start: float
    end: float = 0.0
    schedule: str = "linear"


Rate = float | LinearSchedule


def _rate(value: Any) -> Rate:
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


def _optimizer(value: dict[str, Any] | None, default: Optimizer) -> Optimizer:
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
    of its residual stacks then dense ``hidden``) or a custom network (``impl``, ``args``)."""

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
            out[key] = _optimizer(value, Optimizer(value["kind"]))
        elif key in algo.rates():
            out[key] = _rate(value)
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

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec (all defaults filled in) as plain data."""
        return resolved(self)

    @property
    def recurrent(self) -> bool:
        """Has the spec a recurrent network? Its env calls then also return ``first``."""
        return any(net.recurrent for net in self.networks.values())

    def readers(self, network: str) -> list[str]:
        """The components that read ``network`` (policies, values, Q-networks), in spec order."""
        return [n for n, c in self.components.items() if c.kind in NETWORK_READERS and c.get("network") == network]


# --- building -----------------------------------------------------------------
def _custom_methods(raw: dict[str, Any]) -> dict[str, Method]:
    out = {}
    for mname, decl in raw.items():
        ins = tuple(Param(f"in{i}", t) for i, t in enumerate(decl.get("inputs", [])))
        outs = tuple(Param(f"out{i}", t) for i, t in enumerate(decl.get("outputs", [])))
        out[mname] = Method(mname, ins, outs)
    return out


def build_component(name: str, raw: dict[str, Any]) -> Component:
    kind = raw["kind"]
    settings = dict(COMPONENT_DEFAULTS.get(kind, {}))
    for key, value in raw.items():
        if key in ("kind", "methods"):
            continue
        if kind in ALGORITHMS and key in ALGORITHMS[kind].rates():
            settings[key] = _rate(value)
        elif key == "optimizer":
            settings[key] = _optimizer(value, settings.get("optimizer", Optimizer()))
        elif key == "exploration":
            settings[key] = dataclasses.replace(Exploration(), **value)
        elif key == "gsde" and isinstance(value, dict):
            settings[key] = {**gsde_defaults(raw), **value}
        else:
            settings[key] = value
    methods = _custom_methods(raw.get("methods", {})) if kind == "custom" else METHODS.get(kind, {})
    return Component(name, kind, settings, dict(methods))


def _with_memory(comp: Component, networks: dict[str, Network], env: EnvSpec) -> Component:
    """``comp`` with the methods of a spec with recurrent networks: a policy or value over one
    takes and returns its state, and rollout buffers store the memory (see
    :func:`rlgen.dsl.catalog.recurrent_methods`)."""
    net = networks.get(comp.get("network")) if comp.kind in ("policy", "value") else None
    if (net is not None and net.recurrent) or comp.kind == "rollout":
        return dataclasses.replace(comp, methods=recurrent_methods(comp.kind, bool(env.state)))
    return comp


def build_block(name: str, raw: Any, path: PathT) -> Block:
    """Build a block; calls are assumed parseable (the schema and the checks see to it)."""
    if isinstance(raw, list):
        raw, do_path = {"do": raw}, path
    else:
        do_path = (*path, "do")
    calls = []
    for i, text in enumerate(raw.get("do", [])):
        try:
            calls.append(LoopCall(parse_call(text), (*do_path, i)))
        except CallSyntaxError:
            continue
    return Block(
        name=name,
        calls=tuple(calls),
        repeat=int(raw.get("repeat", 1)),
        every=int(raw.get("every", 1)),
        after=int(raw.get("after", 0)),
        every_steps=int(raw.get("every_steps", 0)),
        carry=tuple((k, v) for k, v in raw.get("carry", {}).items()),
        path=path,
    )


def _space(raw: dict[str, Any] | None) -> SpaceDecl | None:
    if raw is None:
        return None
    shape = raw.get("shape")
    return SpaceDecl(raw.get("n"), tuple(shape) if shape is not None else None, raw.get("low"), raw.get("high"))


def _normalize(raw: Any) -> Normalize | None:
    """``normalize: true`` is every default; ``false`` or absent is none."""
    if raw is None or raw is False:
        return None
    if raw is True:
        return Normalize()
    fields = {k: (float(v) if k.startswith(("clip", "eps")) else v) for k, v in raw.items()}
    return Normalize(**fields)


def build_spec(data: dict[str, Any]) -> Spec:
    """Build a :class:`Spec` from a document that passed the JSON Schema."""
    env_raw = data["env"]
    spaces = env_raw.get("spaces", {})
    env = EnvSpec(
        id=env_raw.get("id"),
        backend=env_raw.get("backend", "gymnasium"),
        factory=env_raw.get("factory"),
        num_envs=env_raw.get("num_envs", 1),
        kwargs=dict(env_raw.get("kwargs", {})),
        max_episode_steps=env_raw.get("max_episode_steps"),
        observation=_space(spaces.get("observation")),
        action=_space(spaces.get("action")),
        normalize=_normalize(env_raw.get("normalize")),
        wrappers=parse_wrappers(env_raw.get("wrappers", ())),
        pettingzoo=env_raw.get("pettingzoo"),
        # envpool runs the atari preset only: `backend: envpool` implies it
        preset=env_raw.get("preset") or ("atari" if env_raw.get("backend") == "envpool" else None),
        state=env_raw.get("state"),
        share=bool(env_raw.get("agents", {}).get("share", True)),
        groups=tuple((str(g), tuple(str(a) for a in agents)) for g, agents in env_raw.get("groups", {}).items()),
    )
    networks = {}
    for name, raw in data.get("networks", {}).items():
        fields = {k: (tuple(v) if k in ("hidden", "layers", "channels") else v) for k, v in raw.items()}
        if "recurrent" in fields:
            fields["recurrent"] = {"size": 64, "layer_norm": True, **fields["recurrent"]}
        networks[name] = Network(name=name, **{**IMAGE_NETWORKS.get(raw.get("kind"), {}), **fields})
    components = {name: build_component(name, raw) for name, raw in data["components"].items()}
    if any(net.recurrent for net in networks.values()):
        components = {name: _with_memory(comp, networks, env) for name, comp in components.items()}
    loop_raw = data["loop"]
    init = build_block("init", loop_raw["init"], ("loop", "init")) if "init" in loop_raw else None
    blocks = tuple(build_block(n, b, ("loop", n)) for n, b in loop_raw.items() if n != "init")
    partitions = {
        name: Partition(
            name,
            raw.get("at"),
            raw.get("after"),
            tuple(raw.get("send", [])),
            tuple(raw.get("receive", [])),
            tuple(raw.get("reduce", [])),
        )
        for name, raw in data.get("partitions", {}).items()
    }
    dep = data.get("deploy", {})
    devices = dep.get("devices")
    deploy = Deploy(
        dep.get("policy", "single"),
        dep.get("workers", 1),
        tuple(dep.get("hosts", [])),
        dep.get("lag"),
        tuple(devices.items()) if isinstance(devices, dict) else devices,
    )
    tr = data["train"]
    train = Train(
        total_steps=tr["total_steps"],
        seed=tr.get("seed", 0),
        stop=Stop(**tr.get("stop", {})),
        eval=Eval(**tr.get("eval", {})),
        checkpoint=Checkpoint(**tr.get("checkpoint", {})),
        log=Log(**tr.get("log", {})),
        run_dir=tr.get("run_dir", "runs"),
    )
    return Spec(
        name=data["name"],
        env=env,
        networks=networks,
        components=components,
        loop=Loop(init, blocks),
        partitions=partitions,
        deploy=deploy,
        train=train,
        description=data.get("description", ""),
        version=data["rlgen"],
    )


def normalize_gamma(spec: Spec) -> float:
    """The discount of reward normalisation: its own ``gamma``, else the first learner's, else 0.99."""
    norm = spec.env.normalize
    if norm is not None and norm.gamma is not None:
        return float(norm.gamma)
    for comp in spec.components.values():
        if comp.kind in ALGORITHMS and comp.get("gamma") is not None:
            return float(comp.get("gamma"))
    return 0.99


# --- resolved form ------------------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, LinearSchedule):
        return {"schedule": value.schedule, "start": value.start, "end": value.end}
    if isinstance(value, Optimizer):
        out = {"kind": value.kind, "eps": value.eps}
        if value.kind == "rmsprop":
            out["alpha"] = value.alpha
            if value.tf_like:  # written only when set: torch-style resolved specs stay as they were
                out["tf_like"] = True
        return out
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _block_dict(block: Block) -> dict[str, Any]:
    return {
        "repeat": block.repeat,
        "every": block.every,
        "after": block.after,
        "every_steps": block.every_steps,
        "do": [str(c.call) for c in block.calls],
        "carry": dict(block.carry),
    }


def _drop_none(value: Any, keep: frozenset[str] = frozenset({"clip_value"})) -> Any:
    """Remove unset optional fields (``None``), except those whose ``null`` means something."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None or k in keep}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def resolved(spec: Spec) -> dict[str, Any]:
    """The spec with every default made explicit, in the document's order."""
    return _drop_none(_resolved(spec))


#: What a resolved spec writes of each network kind (a custom one: ``kind, impl, args``).
_NETWORK_KEYS = {
    "mlp": ("kind", "hidden", "activation", "init"),
    "cnn": ("kind", "layers", "hidden", "activation", "init"),
    "impala": ("kind", "channels", "hidden", "activation", "init"),
}


def _resolved(spec: Spec) -> dict[str, Any]:
    skip = ("observation", "action", "normalize", "wrappers", "pettingzoo", "state", "share", "groups", "preset")
    env = {k: v for k, v in _plain(spec.env).items() if k not in skip}
    if spec.env.multi_agent:  # written only where they apply, so single-agent builds keep their bytes
        env.update(pettingzoo=spec.env.pettingzoo, state=spec.env.state, agents={"share": spec.env.share})
        if spec.env.groups:
            env["groups"] = {g: list(agents) for g, agents in spec.env.groups}
    if spec.env.preset:  # written only where set, so other builds keep their bytes
        env["preset"] = spec.env.preset
    env["wrappers"] = [{w.name: dict(w.kwargs)} if w.kwargs else w.name for w in spec.env.wrappers]
    if spec.env.observation or spec.env.action:
        env["spaces"] = {"observation": _plain(spec.env.observation), "action": _plain(spec.env.action)}
    if spec.env.normalize is not None:  # the gamma it uses, resolved from the learner
        env["normalize"] = {**_plain(spec.env.normalize), "gamma": normalize_gamma(spec)}
    networks = {}
    for name, net in spec.networks.items():
        d = _plain(net)
        del d["name"]
        keep = _NETWORK_KEYS.get(net.kind, ("kind", "impl", "args"))
        networks[name] = {k: d[k] for k in keep}
        if net.kind == "mlp" and net.layer_norm:  # only when set: specs without it resolve as before
            networks[name]["layer_norm"] = True
        if net.kind == "mlp" and net.recurrent:
            networks[name]["recurrent"] = dict(net.recurrent)
    components = {}
    for name, comp in spec.components.items():
        d = {"kind": comp.kind, **_plain(comp.settings)}
        if comp.kind == "custom":
            d["methods"] = {
                m.name: {"inputs": [p.type for p in m.inputs], "outputs": [p.type for p in m.outputs]}
                for m in comp.methods.values()
            }
        components[name] = d
    loop = {b.name: _block_dict(b) for b in spec.loop.all_blocks()}
    partitions = {}
    for name, p in spec.partitions.items():
        d: dict[str, Any] = {"at": p.at} if p.at else {"after": p.after}
        for key in ("send", "receive", "reduce"):
            if getattr(p, key):
                d[key] = list(getattr(p, key))
        partitions[name] = d
    return {
        "rlgen": spec.version,
        "name": spec.name,
        "description": spec.description,
        "env": env,
        "networks": networks,
        "components": components,
        "loop": loop,
        "partitions": partitions,
        "deploy": _deploy_dict(spec.deploy),
        "train": _train_dict(spec.train),
    }


def _deploy_dict(deploy: Deploy) -> dict[str, Any]:
    out = _plain(deploy)  # devices None: dropped, so specs without it resolve as before
    if isinstance(deploy.devices, tuple):
        out["devices"] = dict(deploy.devices)
    return out


def _train_dict(train: Train) -> dict[str, Any]:
    out = _plain(train)
    if train.stop.mean_return is None:  # no stop condition: its window means nothing (the schema refuses it)
        del out["stop"]
    return out
