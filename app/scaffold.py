"""``rlgen init NAME --algo ppo|a2c|dqn|sac|td3 --env ENV_ID``: a commented starting spec for an env
(``--algo mappo|ippo`` for a PettingZoo env of many agents: :mod:`rlgen.app.scaffold_agents`;
an ALE id such as ``ALE/Breakout-v5``: the atari preset and a CNN, :mod:`rlgen.app.scaffold_atari`).

The env's spaces decide what the spec can say: a categorical policy for ``Discrete``
actions, a Gaussian one for ``Box`` actions, DQN only for ``Discrete`` actions, SAC and
TD3 only for ``Box`` actions. Where
the RL Baselines3 Zoo tunes the algorithm for the env (``hyperparams/<algo>.yml``), its
settings are written with a ``Zoo`` comment; everything else is Stable-Baselines3's
default, and the file says so. The stop target is the env's registered
``reward_threshold`` where it has one. The text is validated before it is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .scaffold_common import ScaffoldError, flow

ALGOS = ("ppo", "a2c", "dqn", "sac", "td3", "mappo", "ippo")  # the last two: PettingZoo envs only
#: Algorithms for one kind of action space only.
DISCRETE_ONLY, BOX_ONLY = ("dqn",), ("sac", "td3")


@dataclass(frozen=True)
class Settings:
    """What the template writes; ``zoo`` names the settings the Zoo tuned (their comments)."""

    num_envs: int
    steps: int  # PPO/A2C: rollout length; DQN/SAC/TD3: env steps per collection (train_freq)
    total_steps: int
    gamma: float = 0.99
    lr: Any = 3.0e-4
    hidden: tuple[int, ...] = (64, 64)
    # PPO / A2C
    clip: Any = 0.2
    gae_lambda: float = 0.95
    epochs: int = 10
    minibatch: int = 64
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    log_std_init: float = 0.0
    activation: str = "tanh"  # PPO / A2C networks (SB3's MlpPolicy: tanh, orthogonal init)
    init: str = "orthogonal"
    normalize: bool = False  # the Zoo's normalize: true (VecNormalize)
    # DQN
    capacity: int = 1_000_000
    batch_size: int = 32
    gradient_steps: int = 1
    learning_starts: int = 100
    target_every: int = 10_000  # env steps between target network copies
    eps_final: float = 0.05
    eps_fraction: float = 0.1
    # SAC / TD3
    tau: float = 0.005
    gsde: float | None = None  # SAC with gSDE (the Zoo's use_sde): its log_std_init
    sde_sample_freq: int | None = None  # PPO / A2C with gSDE (the Zoo's use_sde): its sde_sample_freq
    noise_std: float = 0.1  # TD3
    zoo: frozenset[str] = field(default_factory=frozenset)


#: Stable-Baselines3's defaults (n_envs as the Zoo's usual choice for on-policy methods).
DEFAULTS = {
    "ppo": Settings(num_envs=8, steps=2048, total_steps=1_000_000),
    "a2c": Settings(num_envs=8, steps=5, total_steps=1_000_000, lr=7.0e-4, gae_lambda=1.0),
    "dqn": Settings(num_envs=1, steps=4, total_steps=1_000_000, lr=1.0e-4),
    "sac": Settings(num_envs=1, steps=1, total_steps=1_000_000, hidden=(256, 256), batch_size=256),
    "td3": Settings(num_envs=1, steps=1, total_steps=1_000_000, lr=1.0e-3, hidden=(400, 300), batch_size=256),
}


def _lin(start: float) -> dict[str, Any]:
    return {"schedule": "linear", "start": start, "end": 0.0}


#: The Zoo's tuned settings (hyperparams/<algo>.yml) for the envs rlgen runs without extras.
ZOO: dict[tuple[str, str], dict[str, Any]] = {
    ("ppo", "CartPole-v1"): dict(
        num_envs=8, steps=32, total_steps=100_000, gamma=0.98, gae_lambda=0.8, epochs=20, minibatch=256,
        lr=_lin(1.0e-3), clip=_lin(0.2),
    ),
    ("ppo", "Acrobot-v1"): dict(num_envs=16, steps=256, total_steps=1_000_000, gae_lambda=0.94, epochs=4),
    ("ppo", "Pendulum-v1"): dict(
        num_envs=4, steps=1024, total_steps=100_000, gamma=0.9, gae_lambda=0.95, epochs=10, lr=1.0e-3,
        sde_sample_freq=4,
    ),
    ("ppo", "MountainCar-v0"): dict(
        num_envs=16, steps=16, total_steps=1_000_000, gae_lambda=0.98, epochs=4, normalize=True,
    ),
    ("ppo", "HalfCheetah-v5"): dict(  # HalfCheetah-v3 in the Zoo; ortho_init False: see the written comment
        num_envs=1, steps=512, total_steps=1_000_000, gamma=0.98, gae_lambda=0.92, epochs=20, minibatch=64,
        lr=2.0633e-5, clip=0.1, ent_coef=0.000401762, vf_coef=0.58096, max_grad_norm=0.8, log_std_init=-2.0,
        hidden=(256, 256), activation="relu", init="glorot_uniform", normalize=True,
    ),
    ("ppo", "LunarLander-v3"): dict(
        num_envs=16, steps=1024, total_steps=1_000_000, gamma=0.999, gae_lambda=0.98, epochs=4, minibatch=64,
        ent_coef=0.01,
    ),
    ("a2c", "CartPole-v1"): dict(num_envs=8, total_steps=500_000),
    ("a2c", "LunarLander-v3"): dict(num_envs=8, total_steps=200_000, gamma=0.995, lr=_lin(0.00083), ent_coef=0.00001),
    ("a2c", "Acrobot-v1"): dict(num_envs=16, total_steps=500_000),
    ("dqn", "CartPole-v1"): dict(
        steps=256, total_steps=50_000, lr=2.3e-3, hidden=(256, 256), capacity=100_000, batch_size=64,
        gradient_steps=128, learning_starts=1000, target_every=10, eps_final=0.04, eps_fraction=0.16,
    ),
    ("dqn", "Acrobot-v1"): dict(
        steps=4, total_steps=100_000, lr=6.3e-4, hidden=(256, 256), capacity=50_000, batch_size=128,
        gradient_steps=4, learning_starts=0, target_every=250, eps_final=0.1, eps_fraction=0.12,
    ),
    ("dqn", "LunarLander-v3"): dict(  # train_freq 4, gradient_steps -1: 4 gradient steps per 4 env steps
        steps=4, total_steps=100_000, lr=6.3e-4, hidden=(256, 256), capacity=50_000, batch_size=128,
        gradient_steps=4, learning_starts=0, target_every=250, eps_final=0.1, eps_fraction=0.12,
    ),
    ("sac", "Pendulum-v1"): dict(total_steps=20_000, lr=1.0e-3),
    ("sac", "HalfCheetah-v5"): dict(learning_starts=10_000),
    ("sac", "MountainCarContinuous-v0"): dict(
        steps=32, gradient_steps=32, total_steps=50_000, gamma=0.9999, lr=3.0e-4, hidden=(64, 64), capacity=50_000,
        batch_size=512, learning_starts=0, ent_coef=0.1, tau=0.01, gsde=-3.67,
    ),
    ("td3", "Pendulum-v1"): dict(  # train_freq [1, episode], gradient_steps -1: a 200-step episode, 200 steps
        steps=200, gradient_steps=200, total_steps=20_000, gamma=0.98, capacity=200_000, learning_starts=10_000,
        lr=1.0e-3, hidden=(400, 300), noise_std=0.1,
    ),
    ("td3", "HalfCheetah-v5"): dict(learning_starts=10_000, lr=1.0e-3, hidden=(400, 300), noise_std=0.1),
}  # fmt: skip


@dataclass(frozen=True)
class EnvFacts:
    id: str
    discrete: bool
    reward_threshold: float | None


def env_facts(env_id: str) -> EnvFacts:
    import gymnasium as gym

    from rlgen.dsl.envinfo import quiet_mujoco

    try:
        quiet_mujoco(env_id)
        env = gym.make(env_id)
    except Exception as exc:  # noqa: BLE001 - gymnasium raises several kinds for an id it cannot make
        raise ScaffoldError(f"cannot make env '{env_id}': {exc}") from exc
    try:
        discrete = isinstance(env.action_space, gym.spaces.Discrete)
        if not (discrete or isinstance(env.action_space, gym.spaces.Box)):
            raise ScaffoldError(
                f"env '{env_id}' has {type(env.action_space).__name__} actions; rlgen acts in Discrete or Box"
            )
        return EnvFacts(env_id, discrete, env.spec.reward_threshold if env.spec else None)
    finally:
        env.close()


def default_algo(env_id: str) -> str:
    """``--algo`` when it is not given: MAPPO for a PettingZoo env, PPO otherwise."""
    from .scaffold_agents import pettingzoo_ref

    return "ppo" if pettingzoo_ref(env_id) is None else "mappo"


def settings_for(algo: str, env_id: str) -> Settings:
    base = DEFAULTS[algo]
    tuned = ZOO.get((algo, env_id), {})
    return replace(base, **tuned, zoo=frozenset(tuned))


def render(name: str, algo: str, env_id: str, recurrent: bool = False) -> str:
    """The spec's text (not yet validated); ``recurrent``: GRU networks (mappo and ippo only)."""
    from rlgen.codegen.render import environment

    from .scaffold_agents import AGENT_ALGOS, pettingzoo_ref, render_agents
    from .scaffold_atari import is_atari, render_atari

    if algo not in ALGOS:
        raise ScaffoldError(f"unknown algorithm '{algo}'; choose from {', '.join(ALGOS)}")
    ref = pettingzoo_ref(env_id)
    if ref is not None or algo in AGENT_ALGOS:
        return render_agents(name, algo, env_id, ref, recurrent)
    if recurrent:
        raise ScaffoldError(f"--recurrent writes GRU networks for mappo and ippo on PettingZoo envs, not {algo}")
    if is_atari(env_id):
        return render_atari(name, algo, env_id)
    facts = env_facts(env_id)
    if algo in DISCRETE_ONLY and not facts.discrete:
        raise ScaffoldError(f"DQN needs Discrete actions; '{env_id}' has Box actions: use --algo ppo, a2c, sac or td3")
    if algo in BOX_ONLY and facts.discrete:
        raise ScaffoldError(
            f"{algo.upper()} needs Box actions; '{env_id}' has Discrete actions: use --algo ppo, a2c or dqn"
        )
    s = settings_for(algo, env_id)
    jinja = environment()  # the templates' own (generated code's filters included)
    jinja.filters["flow"] = flow
    per_iteration = s.steps * s.num_envs
    return jinja.get_template("init.rl.yaml.j2").render(
        name=name,
        algo=algo,
        env=facts,
        s=s,
        zoo=lambda key: "Zoo" if key in s.zoo else "SB3 default",
        minibatch=min(s.minibatch, per_iteration),
        total_steps=-(-s.total_steps // per_iteration) * per_iteration,  # whole iterations, as SB3 runs
    )


@dataclass(frozen=True)
class InitRequest:
    name: str
    env: str
    algo: str | None = None  # default: default_algo(env)
    output: Path | None = None  # default NAME.rl.yaml
    force: bool = False
    recurrent: bool = False  # mappo/ippo: GRU networks


def init(request: InitRequest) -> Path:
    """Write the starting spec, validated first; returns where."""
    from rlgen.api import validate_text

    from .errors import InvalidSpec, UsageError

    out = request.output or Path(f"{request.name}.rl.yaml")
    if out.exists() and not request.force:
        raise UsageError(f"{out} exists; choose another name or -o FILE, or --force")
    try:
        text = render(request.name, request.algo or default_algo(request.env), request.env, request.recurrent)
    except ScaffoldError as exc:
        raise UsageError(str(exc)) from None
    result = validate_text(text, str(out))
    if not result.ok:  # e.g. a NAME the language does not take
        raise InvalidSpec(result.diagnostics, {str(out): text}, f"{out} not written")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
