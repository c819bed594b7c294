"""The lowered IR: everything the templates render, computed once by the lowering passes.

The FDG says what runs where; the :class:`Plan` says it in the terms of the generated
code: each fragment's networks, components and compiled steps with their signatures,
each boundary method with its packed parts, each role's loop as an ordered list of
operations, and the run's settings. Templates render a Plan and derive nothing; the
build writes it as ``plan.json``, and rendering that file again gives the same build
(``from_json(to_json(plan), Plan) == plan``).

Values that reach generated code as names (``attr``, ``frag``, ``method``…) are
identifiers checked by the ``ident`` filter when rendered; everything else is plain
data rendered by ``literal``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlgen.codegen.ir import ProcessSet, RankInfo, Transfer

#: Metadata of an optional field that plan.json leaves out while it is unset (None), so
#: that builds without the feature keep their plan.json as it was.
OPTIONAL = {"omit_none": True}


@dataclass(frozen=True)
class TensorPlan:
    """A tensor of a compiled step's signature, a port or a packed transfer."""

    name: str
    dtype: str
    shape: tuple[int | None, ...]
    axis: int | None = None


# --- fragments ---------------------------------------------------------------------
@dataclass(frozen=True)
class NetworkPlan:
    """A network built by ``build_network``: one head (``output_size`` an int) or several
    on a shared torso (tuples, one entry per component reading it)."""

    attr: str
    config: dict[str, Any]
    output_size: int | tuple[int, ...]
    gain: float | tuple[float, ...]
    seed: int
    #: ``state`` where it reads the global state (a centralised critic) rather than ``obs``.
    input: str | None = field(default=None, metadata=OPTIONAL)
    #: One network per agent (``env.agents: {share: false}``): an ensemble of this many members.
    agents: int | None = field(default=None, metadata=OPTIONAL)
    #: The suffix of its agent group's constants (``_ADVERSARIES``), with several groups.
    group: str | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class ComponentPlan:
    """A component of a fragment. ``options`` are the kind's constructor settings (plain
    data, see :mod:`rlgen.codegen.lower.components`); ``head`` is its slice of a shared
    network (``(start, stop)`` for a policy, an index for a value)."""

    attr: str
    kind: str
    seed: int
    network: str | None = None
    head: tuple[int, int] | int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    seeded: bool = False  # it draws random numbers: it gets a seed from the replica's stream
    #: With several agent groups: the suffix of its group's constants and its action dtype.
    group: str | None = field(default=None, metadata=OPTIONAL)
    action_dtype: str | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class CallPlan:
    """One call of the loop inside a compiled step; ``options`` are what its kind needs to
    render it (e.g. a learner's buffer parts, a sampler's number of minibatches)."""

    path: str
    text: str
    component: str
    method: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoopBlockPlan:
    """A block inside a fused iteration: a ``tf.while_loop`` when ``repeat > 1``."""

    name: str
    path: str
    repeat: int
    counter: str | None
    body: str
    carry: tuple[tuple[str, str], ...]
    buffers: tuple[tuple[str, str], ...]  # (buffer, local holding its rows)
    calls: tuple[CallPlan, ...]


@dataclass(frozen=True)
class StepPlan:
    """A method of a fragment: a compiled step (``compute``, ``loop``) or host code (``env``, ``cpu``)."""

    name: str
    kind: str
    calls: tuple[CallPlan, ...]
    signature: tuple[TensorPlan, ...]
    outputs: tuple[str, ...]
    produced: tuple[str, ...]
    jit: bool
    blocks: tuple[LoopBlockPlan, ...] = ()

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.signature)


@dataclass(frozen=True)
class MemberPlan:
    """One value of a packed transfer: parts ``start:stop`` of the group's parts."""

    name: str
    multi: bool  # several parts: passed and returned as a tuple
    start: int
    stop: int


@dataclass(frozen=True)
class BoundaryPlan:
    """A fragment's side of one transfer group: a ``send_<value>``/``recv_<value>`` or ``sync_<value>`` method."""

    kind: str  # send | recv | sync (collectives); send | recv | publish | pull (channels)
    value: str
    op: str
    at: str
    peer: str
    tag: int = 0  # the channel tag of a channel transfer (one per transfer group of the plan)
    peer_ranks: tuple[int, ...] = ()  # the ranks on the other side of a channel transfer
    versioned: bool = False  # a send carries, a receive records, the weights version acted with
    lag: int = 0  # pull: how many versions behind the iteration the weights may be
    mode: str = "sync"  # async: taken as it arrives (recv from any sender; pull never waits)
    packed: bool = False
    multi: bool = False  # the (single) value has several parts
    members: tuple[MemberPlan, ...] = ()
    label: str = ""
    splits: tuple[int, ...] = ()
    parts: tuple[TensorPlan, ...] = ()
    received: tuple[TensorPlan, ...] = ()
    # a receive of what an env call returned (env cut): the call ("reset" | "step") and where
    # its outputs are among the parts, in the call's order; None for other transfers
    env_call: str | None = field(default=None, metadata=OPTIONAL)
    env_parts: tuple[int, ...] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class PortPlan:
    value: str
    parts: tuple[TensorPlan, ...]


@dataclass(frozen=True)
class ActionPlan:
    """The action space as ``rlgen.runtime.policies.ActionSpec`` takes it: ``n`` (discrete) or
    ``shape`` with optional bounds (box)."""

    n: int | None = None
    shape: tuple[int, ...] | None = None
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None


@dataclass(frozen=True)
class GroupPlan:
    """One agent group's constants in a compute fragment (``OBS_SHAPE_<GROUP>``, ...)."""

    name: str
    suffix: str
    agents: tuple[str, ...]
    batch: int  # rows: env copies x agents
    obs_shape: tuple[int, ...]
    action: ActionPlan
    action_dtype: str
    action_shape: tuple[int, ...]


@dataclass(frozen=True)
class EnvPlan:
    id: str | None
    backend: str
    factory: str | None
    kwargs: dict[str, Any]
    max_episode_steps: int | None
    wrappers: tuple[dict[str, Any], ...] | None = field(default=None, metadata=OPTIONAL)  # env.wrappers, if any
    #: A PettingZoo env (``$.env.pettingzoo``), its global state and its agents per env copy.
    pettingzoo: str | None = field(default=None, metadata=OPTIONAL)
    state: str | None = field(default=None, metadata=OPTIONAL)
    agents: int | None = field(default=None, metadata=OPTIONAL)
    #: ``env.groups``: group name -> its agents, in the spec's order.
    groups: dict[str, Any] | None = field(default=None, metadata=OPTIONAL)
    preset: str | None = field(default=None, metadata=OPTIONAL)  # $.env.preset, if any
    #: reset()/step() also return ``first`` (the spec has recurrent networks).
    first: bool | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class NormalizePlan:
    """Observation and reward normalisation (``$.env.normalize``) in a fragment: the compute
    fragment that ``holds`` the statistics (a ``Normalizer``; in-graph when it steps its env),
    or the env fragment that applies the one it is given. ``distributed``: counted as pending,
    merged over ranks once per iteration (multi-learner) or by the learner (``exchange``)."""

    obs: bool
    reward: bool
    clip_obs: float
    clip_reward: float
    epsilon: float
    gamma: float
    distributed: bool = False
    holds: bool = True
    # across an experience cut: "actor" sends its pending statistics with its rollouts and
    # adopts those pulled with the weights; "learner" merges them and publishes its own
    exchange: str | None = field(default=None, metadata=OPTIONAL)
    sums: int | None = field(default=None, metadata=OPTIONAL)  # length of an actor's row of sums
    # an off-policy learner's: envs only count, the acting policy and each replay sample normalise
    at_use: bool | None = field(default=None, metadata=OPTIONAL)
    # across an env cut: the envs' results arrive from the env workers and are counted (and
    # normalised) as they are received
    arrivals: bool | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class NormalizeRef:
    """A role's normaliser: the fragment holding it, the env fragment that applies it (None:
    the holder steps its env in-graph, or receives what the envs return), and whether it is
    merged over ranks each iteration."""

    holder: str
    env: str | None = None
    sync: bool = False
    exchange: str | None = field(default=None, metadata=OPTIONAL)  # the holder's NormalizePlan.exchange
    arrivals: bool | None = field(default=None, metadata=OPTIONAL)  # the holder's NormalizePlan.arrivals


@dataclass(frozen=True)
class FragmentPlan:
    """One generated fragment module (a ``tf.Module`` for compute, a host class for envs)."""

    name: str
    class_name: str
    kind: str
    role: str
    ranks: tuple[int, ...]
    batch: int
    replicas: int
    obs_shape: tuple[int, ...]
    action: ActionPlan
    action_dtype: str
    action_shape: tuple[int, ...]
    env: EnvPlan
    networks: tuple[NetworkPlan, ...] = ()
    components: tuple[ComponentPlan, ...] = ()
    weights: tuple[str, ...] = ()
    log_std: tuple[str, ...] = ()
    steps: tuple[StepPlan, ...] = ()
    carried: tuple[TensorPlan, ...] = ()
    episode_capacity: int = 0
    boundary: tuple[BoundaryPlan, ...] = ()
    inputs: tuple[PortPlan, ...] = ()
    outputs: tuple[PortPlan, ...] = ()
    env_groups: int = 1  # an env fragment's envs in groups, stepped one group at a time
    normalize: NormalizePlan | None = field(default=None, metadata=OPTIONAL)
    #: The global state's shape per row, where the loop has a ``state`` value (multi-agent).
    state_shape: tuple[int, ...] | None = field(default=None, metadata=OPTIONAL)
    #: Several agent groups (``env.groups``): each group's constants; ``batch`` then counts env copies.
    groups: tuple[GroupPlan, ...] | None = field(default=None, metadata=OPTIONAL)
    #: Where a compute fragment runs (``cpu``, ``gpu``, ``gpu:N``, ``auto``) and the side of
    #: ``deploy.devices`` that says so; None where the spec names no devices (the CPU).
    device: str | None = field(default=None, metadata=OPTIONAL)
    device_side: str | None = field(default=None, metadata=OPTIONAL)
    #: The observations' element type where it is not float32 (``uint8`` images).
    obs_dtype: str | None = field(default=None, metadata=OPTIONAL)
    #: The rank whose sampling streams the fragment draws from where not its own: a group's
    #: fragment under ``agent-groups`` samples as ``single``'s rank 0 does.
    stream_rank: int | None = field(default=None, metadata=OPTIONAL)

    @property
    def fused(self) -> bool:
        return any(s.kind == "loop" for s in self.steps)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(c.kind for c in self.components)


# --- the rank loops ----------------------------------------------------------------
@dataclass(frozen=True)
class ArgPlan:
    """An argument of a step call: a value (``name``), a received tuple (``star``), a
    buffer's rollout held by ``frag`` (``rollout``), or that rollout and its recurrent
    networks' memory (``memory``)."""

    kind: str  # name | star | rollout | memory
    value: str
    frag: str = ""


@dataclass(frozen=True)
class Op:
    """One line of a role's loop.

    ``step``: ``outputs = frag.method(*args)``, timed as ``lap``; ``send``/``recv``: a
    boundary method (``value`` names it) to or from ``peer``; ``sync``: a weights exchange.
    """

    type: str  # step | send | recv | sync | publish | pull
    frag: str
    value: str = ""
    method: str = ""
    args: tuple[ArgPlan, ...] = ()
    outputs: tuple[str, ...] = ()
    lap: str = ""
    op: str = ""
    peer: str = ""
    targets: tuple[str, ...] = ()
    store: tuple[str, ...] = ()  # received replay transitions recorded at once (learner side)
    lag: int = 0  # pull: how many versions behind the iteration the weights may be
    mode: str = "sync"  # async: a recv takes what arrives first, a pull never waits


@dataclass(frozen=True)
class BlockSchedule:
    """A loop block as one role runs it."""

    name: str
    repeat: int
    every: int
    after: int
    path: str
    note: str | None
    ops: tuple[Op, ...]
    carry: tuple[tuple[str, str], ...]
    after_ops: tuple[Op, ...]
    init: bool
    every_steps: int = 0  # run in the iterations whose env steps pass a multiple of it (0: all)
    # env groups (pipelined inference): the block runs group by group; on the learning side
    # ``ahead`` ops (inference, sending actions) run for a group before its env step, the
    # rest on the whole batch once every group's results are in; ``rows`` envs per group;
    # with several agent groups, ``agents`` gives each carried value's agents per env copy
    # (its rows per env group are ``rows`` times that)
    env_groups: int = 1
    side: str = ""  # acting | learning (grouped blocks)
    ahead: int = 0
    arrive: int = 0  # the receives after the ahead ops
    rows: int = 0
    agents: tuple[tuple[str, int], ...] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class FragmentRef:
    var: str
    module: str
    class_name: str
    kind: str


@dataclass(frozen=True)
class RolePlan:
    """A role's ``run_<role>`` function: its fragments, its loop, which fragment learns."""

    role: str
    ranks: tuple[int, ...]
    fragments: tuple[FragmentRef, ...]
    blocks: tuple[BlockSchedule, ...]
    start: tuple[Op, ...] = ()  # once, before the loop
    begin: tuple[Op, ...] = ()  # at the start of every iteration (e.g. taking the newest weights)
    end: tuple[Op, ...] = ()  # at the end of every iteration, whichever blocks ran (e.g. publishing them)
    lag_frag: str | None = None  # the fragment that records the weights version of received experience
    counts_dropped: bool = False  # lag_frag also counts experience dropped as too stale (async)
    open_ended: bool = False  # runs until rank 0 stops the run (asynchronous actors), not to the budget
    env_frag: str | None = None
    learner_frag: str | None = None
    learner_attr: str | None = None
    policy_attr: str | None = None
    policy_call: bool = False  # a Q-network becomes a policy through .policy()
    metrics_home: str | None = None
    replicated_learner: bool = False
    metrics: str | None = None  # the value holding the learner's metrics (logged each iteration)
    metrics_conditional: bool = False
    uses_progress: bool = False
    uses_iteration: bool = False
    normalize: NormalizeRef | None = field(default=None, metadata=OPTIONAL)
    #: With several agent groups: each learner's (group, metrics value), logged as ``<group>/<metric>``.
    group_metrics: tuple[tuple[str, str], ...] | None = field(default=None, metadata=OPTIONAL)
    #: With several agent groups whose learners the role holds every one of: each group's
    #: (group, acting policy attribute), in ``env.groups`` order, attached as one policy
    #: (``GroupPolicies``) for evaluation and export.
    group_policies: tuple[tuple[str, str], ...] | None = field(default=None, metadata=OPTIONAL)
    #: ``agent-groups``' env role (rank 0), which holds no group's learner: every group's (group,
    #: fragment, fragment class, acting policy attribute, the group's rank), in ``env.groups``
    #: order; it builds the fragments to evaluate and export a copy of the groups' policies, given
    #: each group's weights by its rank (``rlgen.runtime.evaluation.remote``).
    policy_copies: tuple[tuple[str, str, str, str, int], ...] | None = field(default=None, metadata=OPTIONAL)
    #: What the role's ranks ask for at start (its compute fragment's device; ``cpu`` for a
    #: role without one); None where the spec names no devices (every rank on the CPU).
    device: str | None = field(default=None, metadata=OPTIONAL)


# --- the run -----------------------------------------------------------------------
@dataclass(frozen=True)
class RunPlan:
    """Keyword arguments of ``rlgen.runtime.session.RunConfig`` (a test keeps the fields equal)."""

    name: str
    total_steps: int
    steps_per_iteration: int
    seed: int
    env: dict[str, Any]
    stop_mean_return: float | None
    window: int
    eval_every: int
    eval_episodes: int
    eval_deterministic: bool
    checkpoint_every: int
    checkpoint_keep: int
    log_every: int
    tensorboard: bool
    episode_capacity: int
    run_root: str
    threaded_roles: tuple[str, ...] = ()  # roles whose ranks take their host's spare cores
    #: Roles whose ranks checkpoint their own fragment (``agent-groups``: each group's rank, in
    #: ``checkpoints/<role>/``); None where rank 0 holds every learner.
    group_checkpoints: tuple[str, ...] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class Meta:
    """What the generated files' headers say about their origin."""

    version: str
    spec_file: str
    sha256: str
    spec_name: str
    policy: str
    workers: int


@dataclass(frozen=True)
class Plan:
    """A whole build, ready to render (see the module docstring)."""

    meta: Meta
    package: str
    partition: str | None
    cut: str | None
    ranks: tuple[RankInfo, ...]
    process_sets: tuple[ProcessSet, ...]
    collectives: tuple[Transfer, ...]
    fragments: tuple[FragmentPlan, ...]
    roles: tuple[RolePlan, ...]
    run: RunPlan
    control: str = "lockstep"  # how ranks agree on stopping (rlgen.runtime.control)
    metrics_homes: tuple[str, ...] = ()

    @property
    def policy(self) -> str:
        return self.meta.policy

    @property
    def role_of(self) -> dict[int, str]:
        """rank → role."""
        return {r.rank: r.role for r in self.ranks}

    @property
    def workers(self) -> int:
        return self.meta.workers
