"""The env and the action space: does each policy and learner fit it?"""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl import atari_envpool
from rlgen.dsl.catalog import TF_ENVS
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.findings import Finding, error
from rlgen.dsl.images import cnn_sizes, image_layout
from rlgen.dsl.wrappers import problem

CONTINUOUS_DISTRIBUTIONS = ("gaussian", "squashed_gaussian", "deterministic")
CONTINUOUS_LEARNERS = [kind for kind, algo in ALGORITHMS.items() if not algo.discrete_actions]


@check
def env_source(ctx: Context) -> Iterator[Finding]:
    """The env has an ``id`` or a ``factory``, an in-graph backend exists for it, and its
    wrappers are gymnasium's and take the arguments given.

    ```yaml
    env: {id: LunarLander-v3, backend: tensorflow}   # E404: no in-graph LunarLander
    env: {id: CartPole-v1, wrappers: [FrameStack]}    # E411: not a gymnasium wrapper
    ```
    """
    env = ctx.spec.env
    if env.multi_agent:
        return  # checks/agents.py
    if env.id is None and env.factory is None:
        yield error(
            "E406",
            ("env",),
            "the env needs an `id` (a gymnasium id), a `factory` or a `pettingzoo` env",
            "e.g. `env: {id: CartPole-v1, num_envs: 8}`",
        )
    if env.id and env.factory:
        yield error(
            "E406",
            ("env", "factory"),
            "give either `id` or `factory`, not both",
            "`factory` makes a custom env; remove `id`, or remove `factory` to use gymnasium",
        )
    if env.backend == "tensorflow" and (env.kwargs or env.factory or env.wrappers):
        yield error(
            "E407",
            ("env", "kwargs" if env.kwargs else "factory" if env.factory else "wrappers"),
            "an in-graph (backend: tensorflow) env takes no kwargs, factory or wrappers: it is gymnasium's "
            "default env rewritten in TensorFlow",
            "remove them, or use `backend: gymnasium`",
        )
    for i, wrapper in enumerate(env.wrappers):
        found = problem(wrapper)
        if found:
            yield error("E411", ("env", "wrappers", i), *found)
    if env.backend == "tensorflow" and env.id not in TF_ENVS:
        yield error(
            "E404",
            ("env", "backend"),
            f"there is no in-graph TensorFlow version of '{env.id}'",
            f"in-graph envs: {quote_list(TF_ENVS)}; or use `backend: gymnasium`",
        )


@check
def envpool_backend(ctx: Context) -> Iterator[Finding]:
    """``backend: envpool`` runs ALE's Atari games (``ALE/<Game>-v5``) under the atari preset,
    with no wrappers and only the kwargs envpool takes under ALE's names, and needs envpool.

    ```yaml
    env: {id: CartPole-v1, backend: envpool}   # E436: envpool runs ALE's Atari ids only
    ```
    """
    env = ctx.spec.env
    if env.backend != "envpool" or env.multi_agent:
        return
    task = atari_envpool.task_id(env.id)
    if task is None or env.factory:
        yield error(
            "E436",
            ("env", "backend"),
            f"backend: envpool runs ALE's Atari games (`ALE/<Game>-v5`); '{env.id or env.factory}' is not one",
            "use an ALE id such as `ALE/Breakout-v5`, or `backend: gymnasium` (the default)",
        )
        return
    for i, _ in enumerate(env.wrappers):
        yield error(
            "E436",
            ("env", "wrappers", i),
            "backend: envpool takes no wrappers: its C++ envs apply the atari preset themselves",
            "remove `wrappers`, or use `backend: gymnasium`",
        )
    for key in sorted(set(env.kwargs) - set(atari_envpool.KWARGS)):
        yield error(
            "E436",
            ("env", "kwargs", key),
            f"envpool's Atari envs take no `{key}`",
            f"it takes {quote_list(atari_envpool.KWARGS)}; or use `backend: gymnasium`",
        )
    if not atari_envpool.installed():
        yield error(
            "E436",
            ("env", "backend"),
            "backend: envpool needs envpool, which is not installed",
            f"`{atari_envpool.INSTALL_HINT}` (envpool 1.2.5, Linux x86-64), or use `backend: gymnasium`",
        )
    elif task not in atari_envpool.known_tasks():
        yield error(
            "E436",
            ("env", "id"),
            f"envpool has no Atari game '{task}'{did_you_mean(task, atari_envpool.known_tasks())}",
            "use an ALE id whose game envpool has, e.g. `ALE/Breakout-v5`",
        )


@check
def action_space_fit(ctx: Context) -> Iterator[Finding]:
    """Policies and Q-networks fit the env's action space.

    ```yaml
    env: {id: Pendulum-v1}
    components:
      actor: {kind: policy, network: pi, distribution: categorical}   # E402: actions are continuous
      q: {kind: qvalue, network: qnet}                                # E403: DQN needs discrete actions
    ```
    """
    if ctx.spaces is None:
        return
    action = ctx.spaces.action
    env_name = ctx.spec.env.id or "the env"
    for name, comp in ctx.spec.components.items():
        if comp.kind == "policy":
            dist = comp.get("distribution", "auto")
            if dist == "categorical" and action.kind != "discrete":
                yield error(
                    "E402",
                    ("components", name, "distribution"),
                    f"a categorical policy needs discrete actions; {env_name} has {action.describe()}",
                    "use `distribution: gaussian` (or `auto`)",
                )
            if dist in CONTINUOUS_DISTRIBUTIONS and action.kind != "box":
                yield error(
                    "E402",
                    ("components", name, "distribution"),
                    f"a {dist} policy needs continuous actions; {env_name} has {action.describe()}",
                    "use `distribution: categorical` (or `auto`)",
                )
            if action.kind == "box" and len(action.shape) != 1:
                yield error(
                    "E402",
                    ("components", name),
                    f"rlgen policies need a flat Box action space; {env_name} has {action.describe()}",
                    "flatten the action space in a wrapper",
                )
        discrete_only = comp.kind == "qvalue" or (comp.kind in ALGORITHMS and ALGORITHMS[comp.kind].discrete_actions)
        if discrete_only and action.kind != "discrete":
            yield error(
                "E403",
                ("components", name, "kind"),
                f"{comp.kind} needs a discrete action space; {env_name} has {action.describe()}",
                f"use a learner for continuous actions ({quote_list(CONTINUOUS_LEARNERS)})",
            )


@check
def policy_outputs(ctx: Context) -> Iterator[Finding]:
    """Only categorical and gaussian policies give a log-probability with their action, and
    only squashed_gaussian and deterministic ones act at random first (their log-probability
    would not describe random actions).

    ```yaml
    components: {actor: {kind: policy, network: pi, distribution: squashed_gaussian}}
    loop: {collect: {do: [actor.act(obs) -> action, logp, ...]}}   # E406: no logp
    components: {actor: {kind: policy, network: pi, random_steps: 100}}   # E407: a gaussian policy
    ```
    """
    for name, comp in ctx.spec.components.items():
        dist = comp.get("distribution", "auto")
        if comp.kind == "policy" and comp.get("random_steps") and dist not in ("squashed_gaussian", "deterministic"):
            yield error(
                "E407",
                ("components", name, "random_steps"),
                f"a {dist} policy cannot act at random first: its learner would read log-probabilities "
                "of actions it did not take",
                "use it with a squashed_gaussian or deterministic policy (sac, td3), or remove it",
            )
    for info in ctx.flow.calls:
        comp = ctx.spec.components.get(info.call.call.component)
        if comp is None or comp.kind != "policy" or len(info.call.call.outputs) < 2:
            continue
        dist = comp.get("distribution", "auto")
        if dist in ("squashed_gaussian", "deterministic"):
            yield error(
                "E406",
                info.call.path,
                f"a {dist} policy's act(obs) gives only the action, not a log-probability",
                f"write `{info.call.call.component}.act(obs) -> action` (its learner computes what it needs)",
            )


@check
def policy_gsde(ctx: Context) -> Iterator[Finding]:
    """gSDE (``gsde``) explores through a continuous policy's own ``kind: mlp`` network (a
    squashed_gaussian one for SAC, a gaussian one for PPO and A2C): the noise reads the
    features the network's output layer reads.

    ```yaml
    env: {id: CartPole-v1}
    components: {actor: {kind: policy, network: pi, gsde: {}}}   # E412: actions are discrete
    ```
    """
    discrete = ctx.spaces is not None and ctx.spaces.action.kind == "discrete"
    for name, comp in ctx.spec.components.items():
        if comp.kind != "policy" or comp.get("gsde") is None:
            continue
        path = ("components", name, "gsde")
        dist = comp.get("distribution", "auto")
        if dist not in ("squashed_gaussian", "gaussian", "auto") or (dist == "auto" and discrete):
            shown = "categorical (the env's actions are discrete)" if dist == "auto" else dist
            yield error(
                "E412",
                path,
                f"gSDE explores through a gaussian or squashed_gaussian policy's features; '{name}' is {shown}",
                "remove `gsde`, or use it with continuous actions (`distribution: gaussian` for ppo and a2c, "
                "`squashed_gaussian` for sac)",
            )
            continue
        network = ctx.spec.networks.get(comp.get("network"))
        sharers = [other for other in ctx.spec.readers(comp.get("network")) if other != name]
        if network is not None and network.kind != "mlp":
            yield error(
                "E412",
                path,
                f"gSDE reads the last hidden features of the network; network '{comp.get('network')}' is "
                f"kind: {network.kind}, whose features rlgen cannot see",
                "give the policy a kind: mlp network, or remove `gsde`",
            )
        elif sharers:
            yield error(
                "E412",
                path,
                f"gSDE reads the features of its own network, but '{comp.get('network')}' is shared with "
                f"{quote_list(sharers)}",
                f"give '{name}' a network of its own, or remove `gsde`",
            )


@check
def normalize_fit(ctx: Context) -> Iterator[Finding]:
    """Normalisation (``env.normalize``) fits the env.

    ```yaml
    env: {id: FrozenLake-v1, normalize: true}        # E408: Discrete observations have no mean
    env: {id: CartPole-v1, normalize: {obs: false, reward: false}}   # E409: normalises nothing
    ```
    """
    norm = ctx.spec.env.normalize
    if norm is None:
        return
    path = ("env", "normalize")
    if not norm.obs and not norm.reward:
        yield error(
            "E409",
            path,
            "`normalize` with `obs: false` and `reward: false` normalises nothing",
            "remove `normalize`, or set `obs: true` or `reward: true`",
        )
    if norm.obs and ctx.spaces is not None and ctx.spaces.observation.kind != "box":
        env_name = ctx.spec.env.id or "the env"
        yield error(
            "E408",
            path,
            f"observation normalisation needs a Box observation space; {env_name} has "
            f"{ctx.spaces.observation.describe()}",
            "set `normalize: {obs: false}` (reward normalisation still works), or remove `normalize`",
        )


@check
def image_networks(ctx: Context) -> Iterator[Finding]:
    """A ``cnn`` or ``impala`` network reads images: the env's observations must be one (``[H, W]``,
    ``[H, W, C]`` or ``[C, H, W]``), large enough for every convolution.

    ```yaml
    env: {id: CartPole-v1}
    networks: {pi: {kind: cnn}}   # E435: CartPole's observations are Box(shape=[4]), not images
    ```
    """
    if ctx.spaces is None:
        return
    obs = ctx.spaces.observation
    for name, net in ctx.spec.networks.items():
        if not net.image or not ctx.spec.readers(name):
            continue
        layout = image_layout(obs.shape) if obs.kind == "box" else None
        env_name = ctx.spec.env.id or "the env"
        if layout is None:
            yield error(
                "E435",
                ("networks", name, "kind"),
                f"a {net.kind} network reads images; {env_name}'s observations are {obs.describe()}, not an image "
                "([H, W], [H, W, C] or [C, H, W])",
                "use `kind: mlp` for vector observations, or an image env (e.g. `env: {id: ALE/Breakout-v5, "
                "preset: atari}`)",
            )
            continue
        if net.kind != "cnn":
            continue
        (h, w), layers = layout[1][:2], [(d["filters"], d["kernel"], d["stride"]) for d in net.layers]
        for i, (oh, ow) in enumerate(cnn_sizes((h, w), layers)):
            if oh < 1 or ow < 1:
                yield error(
                    "E435",
                    ("networks", name, "layers", i),
                    f"convolution {i} ({layers[i][0]} filters, {layers[i][1]}x{layers[i][1]}, stride {layers[i][2]}) "
                    f"leaves no pixels of the {h}x{w} observation",
                    "use smaller kernels or strides, or fewer layers",
                )
                break


@check
def compressed_replay(ctx: Context) -> Iterator[Finding]:
    """``compress`` on a replay keeps image frames zlib-compressed; float observations are not
    stored as frames, so there it would do nothing.

    ```yaml
    env: {id: CartPole-v1}
    components:
      replay: {kind: replay, compress: true}   # E440: CartPole's observations are float32
    ```
    """
    if ctx.spaces is None:
        return
    obs = ctx.spaces.observation
    for name, comp in ctx.spec.components.items():
        if comp.kind != "replay" or not comp.get("compress") or obs.dtype != "float32":
            continue
        env_name = ctx.spec.env.id or "the env"
        yield error(
            "E440",
            ("components", name, "compress"),
            f"`compress` keeps uint8 image frames compressed; {env_name}'s observations are {obs.describe()} of "
            "float32, which the replay stores as they are",
            "remove `compress` (it is for image observations, e.g. `env: {id: ALE/Pong-v5, preset: atari}`)",
        )
