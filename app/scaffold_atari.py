"""``rlgen init NAME --algo ppo|a2c|dqn --env ALE/<Game>-v5``: a starting spec for an Atari game
under the ``atari`` preset (the RL Zoo's AtariWrapper, rlgen.dsl.atari), a Nature CNN, and the
Zoo's Atari settings (``hyperparams/ppo.yml``, ``a2c.yml`` and ``dqn.yml``, ``atari``), as the
examples ppo-breakout, a2c-breakout and dqn-pong have them, for the Zoo's 10M steps."""

from __future__ import annotations

from typing import Any

from .scaffold_common import ScaffoldError, flow

ATARI_ALGOS = ("ppo", "a2c", "dqn")
#: The Zoo's Atari settings rlgen writes (the template says which Zoo key each one is).
ZOO_ATARI: dict[str, dict[str, Any]] = {
    "ppo": {"num_envs": 8, "steps": 128, "epochs": 4, "minibatch": 256, "total_steps": 10_000_000},
    "a2c": {"num_envs": 16, "steps": 5, "total_steps": 10_000_000},
    "dqn": {"num_envs": 1, "steps": 4, "capacity": 100_000, "learning_starts": 100_000, "total_steps": 10_000_000},
}
EVAL_EVERY = 500_000  # env steps between evaluations and checkpoints (rounded up to whole iterations)


def is_atari(env_id: str) -> bool:
    """An ALE id: ``ALE/Breakout-v5``, ``ALE/Pong-v5``, ..."""
    return env_id.startswith("ALE/")


def _game_exists(env_id: str) -> None:
    import gymnasium as gym

    from rlgen.dsl import atari

    try:
        atari.register()
    except ImportError:
        raise ScaffoldError(f"'{env_id}' is an Atari game: `pip install 'rlgen[atari]'` (ale-py) first") from None
    if env_id not in gym.registry:
        raise ScaffoldError(f"'{env_id}' is not one of ALE's games (e.g. ALE/Breakout-v5, ALE/Pong-v5)")


def render_atari(name: str, algo: str, env_id: str) -> str:
    """The spec's text for an ALE id (not yet validated)."""
    from rlgen.codegen.render import environment

    if algo not in ATARI_ALGOS:
        raise ScaffoldError(
            f"for an Atari game rlgen init writes --algo ppo, a2c or dqn (the Zoo's CnnPolicy), not {algo}"
        )
    _game_exists(env_id)
    s = ZOO_ATARI[algo]
    per_iteration = s["steps"] * s["num_envs"]

    def whole(steps: int) -> int:
        return -(-steps // per_iteration) * per_iteration

    jinja = environment()
    jinja.filters["flow"] = flow
    return jinja.get_template("init_atari.rl.yaml.j2").render(
        name=name, algo=algo, env_id=env_id, s=s, total_steps=whole(s["total_steps"]), every=whole(EVAL_EVERY)
    )
