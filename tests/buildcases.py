"""Which (example, policy, workers) the build tests cover: every policy an example supports.

The list is explicit: a case that stops validating or building fails its tests (it is never
dropped), and ``test_build_golden`` checks that the list is exactly what the examples
support and that every golden directory belongs to a case.
"""

from __future__ import annotations

from pathlib import Path

from rlgen.api import validate_file
from rlgen.codegen.build import build

from conftest import ROOT

#: (example, policy, workers): the most workers (3, else 2; 1 for single) each example
#: validates with under each policy it supports (see :func:`workers_for`).
CASE_LIST: tuple[tuple[str, str, int], ...] = (
    ("a2c-breakout", "single", 1),
    ("a2c-breakout", "actors-learner", 3),
    ("a2c-breakout", "central-inference", 3),
    ("a2c-breakout", "pipelined-inference", 3),
    ("a2c-breakout", "multi-learner", 2),
    ("a2c-breakout", "async-actors", 3),
    ("a2c-cartpole", "single", 1),
    ("a2c-cartpole", "actors-learner", 3),
    ("a2c-cartpole", "central-inference", 3),
    ("a2c-cartpole", "pipelined-inference", 3),
    ("a2c-cartpole", "multi-learner", 2),
    ("a2c-cartpole", "async-actors", 3),
    ("custom-network", "single", 1),
    ("custom-network", "actors-learner", 3),
    ("custom-network", "central-inference", 3),
    ("custom-network", "pipelined-inference", 3),
    ("custom-network", "multi-learner", 2),
    ("custom-network", "async-actors", 3),
    ("dqn-cartpole", "single", 1),
    ("dqn-cartpole", "actors-learner", 2),
    ("dqn-cartpole", "central-inference", 2),
    # dqn-cartpole has 1 env: neither pipelined-inference (2 groups) nor multi-learner can split it
    ("dqn-cartpole", "async-actors", 2),
    ("dqn-pong", "single", 1),
    ("dqn-pong", "actors-learner", 2),
    ("dqn-pong", "central-inference", 2),
    ("dqn-pong", "async-actors", 2),
    ("impala-breakout", "single", 1),
    ("impala-breakout", "actors-learner", 3),
    ("impala-breakout", "central-inference", 3),
    ("impala-breakout", "pipelined-inference", 3),
    ("impala-breakout", "multi-learner", 2),
    ("impala-breakout", "async-actors", 3),
    ("ippo-simple-spread", "single", 1),
    ("ippo-simple-spread", "actors-learner", 3),
    ("ippo-simple-spread", "central-inference", 3),
    ("ippo-simple-spread", "pipelined-inference", 3),
    ("ippo-simple-spread", "multi-learner", 2),
    ("ippo-simple-spread", "async-actors", 3),
    ("mappo-simple-spread", "single", 1),
    ("mappo-simple-spread", "actors-learner", 3),
    ("mappo-simple-spread", "central-inference", 3),
    ("mappo-simple-spread", "pipelined-inference", 3),
    ("mappo-simple-spread", "multi-learner", 2),
    ("mappo-simple-spread", "async-actors", 3),
    # mappo-simple-tag has two agent groups (32 env copies: multi-learner on 2 workers)
    ("mappo-simple-tag", "single", 1),
    ("mappo-simple-tag", "actors-learner", 3),
    ("mappo-simple-tag", "central-inference", 3),
    ("mappo-simple-tag", "pipelined-inference", 3),
    ("mappo-simple-tag", "multi-learner", 2),
    ("mappo-simple-tag", "async-actors", 3),
    ("mappo-simple-tag", "agent-groups", 3),
    # rmappo-simple-spread has recurrent networks: their states cross every cut as values
    ("rmappo-simple-spread", "single", 1),
    ("rmappo-simple-spread", "actors-learner", 3),
    ("rmappo-simple-spread", "central-inference", 3),
    ("rmappo-simple-spread", "pipelined-inference", 3),
    ("rmappo-simple-spread", "multi-learner", 2),
    ("rmappo-simple-spread", "async-actors", 3),
    ("ppo-breakout", "single", 1),
    ("ppo-breakout", "actors-learner", 3),
    ("ppo-breakout", "central-inference", 3),
    ("ppo-breakout", "pipelined-inference", 3),
    ("ppo-breakout", "multi-learner", 2),
    ("ppo-breakout", "async-actors", 3),
    ("ppo-cartpole-ingraph", "single", 1),
    ("ppo-cartpole-ingraph", "actors-learner", 3),
    ("ppo-cartpole-ingraph", "central-inference", 3),
    ("ppo-cartpole-ingraph", "pipelined-inference", 3),
    ("ppo-cartpole-ingraph", "multi-learner", 2),
    ("ppo-cartpole-ingraph", "async-actors", 3),
    ("ppo-cartpole", "single", 1),
    ("ppo-cartpole", "actors-learner", 3),
    ("ppo-cartpole", "central-inference", 3),
    ("ppo-cartpole", "pipelined-inference", 3),
    ("ppo-cartpole", "multi-learner", 2),
    ("ppo-cartpole", "async-actors", 3),
    ("ppo-halfcheetah", "single", 1),
    ("ppo-halfcheetah", "actors-learner", 2),
    ("ppo-halfcheetah", "central-inference", 2),
    # ppo-halfcheetah has 1 env: neither pipelined-inference nor multi-learner can split it
    ("ppo-halfcheetah", "async-actors", 2),
    ("ppo-pendulum", "single", 1),
    ("ppo-pendulum", "actors-learner", 3),
    ("ppo-pendulum", "central-inference", 3),
    ("ppo-pendulum", "multi-learner", 2),
    ("ppo-pendulum", "async-actors", 3),
    # the SAC and TD3 examples have 1 env, as dqn-cartpole: no pipelined-inference, no multi-learner
    ("sac-halfcheetah", "single", 1),
    ("sac-halfcheetah", "actors-learner", 2),
    ("sac-halfcheetah", "central-inference", 2),
    ("sac-halfcheetah", "async-actors", 2),
    ("sac-mountaincar-continuous", "single", 1),
    ("sac-mountaincar-continuous", "actors-learner", 2),
    ("sac-mountaincar-continuous", "central-inference", 2),
    ("sac-mountaincar-continuous", "async-actors", 2),
    ("sac-pendulum", "single", 1),
    ("sac-pendulum", "actors-learner", 2),
    ("sac-pendulum", "central-inference", 2),
    ("sac-pendulum", "async-actors", 2),
    ("td3-halfcheetah", "single", 1),
    ("td3-halfcheetah", "actors-learner", 2),
    ("td3-halfcheetah", "central-inference", 2),
    ("td3-halfcheetah", "async-actors", 2),
    ("td3-pendulum", "single", 1),
    ("td3-pendulum", "actors-learner", 2),
    ("td3-pendulum", "central-inference", 2),
    ("td3-pendulum", "async-actors", 2),
)

CASES = [(ROOT / "examples" / f"{name}.rl.yaml", policy, workers) for name, policy, workers in CASE_LIST]
IDS = [f"{name}-{policy}" for name, policy, _ in CASE_LIST]


def workers_for(example: Path, policy: str) -> int | None:
    """The most workers (3, else 2; 1 for single) the example validates with under ``policy``."""
    for workers in (1,) if policy == "single" else (3, 2):
        if validate_file(example, policy=policy, workers=workers).ok:
            return workers
    return None


def build_case(example: Path, policy: str, workers: int):
    """Validate and build one case; a case that no longer validates fails loudly."""
    result = validate_file(example, policy=policy, workers=workers)
    assert result.ok, [f"{d.line}:{d.column} {d.code} {d.message}" for d in result.diagnostics]
    return build(result)


def build_importable(spec: Path, policy: str, workers: int, out: Path, unique: str, monkeypatch) -> tuple[str, object]:
    """Build ``spec`` into ``out`` as a package named ``unique`` (so that builds of one example
    do not collide in ``sys.modules``) on ``sys.path``; ``(unique, build result)``."""
    done = build(validate_file(spec, policy=policy, workers=workers), out)
    package = next(p.parent.name for p in out.glob("*/main.py"))
    (out / package).rename(out / unique)
    monkeypatch.syspath_prepend(str(out))
    return unique, done
