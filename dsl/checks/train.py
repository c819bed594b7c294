"""Budgets and batch sizes: what would otherwise fail (or silently do nothing) mid-training."""

from __future__ import annotations

from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl.checks.registry import Context, check
from rlgen.dsl.findings import Finding, error, warning
from rlgen.dsl.groups import assign_groups


def steps_per_iteration(ctx: Context) -> int:
    """Env steps (over all envs) taken by one iteration of the loop."""
    return ctx.spec.loop.env_steps_per_env() * ctx.spec.env.num_envs


@check
def budget(ctx: Context) -> Iterator[Finding]:
    """The budget covers at least one iteration; periodic work happens within it.

    ```yaml
    env: {id: CartPole-v1, num_envs: 8}
    loop: {rollout: {repeat: 32, do: [...]}}
    train: {total_steps: 100}     # E701: one iteration takes 256 steps
    train: {total_steps: 1000}    # W705: 3 iterations (768 steps) run, not 1000
    ```
    """
    per_iter = steps_per_iteration(ctx)
    train = ctx.spec.train
    if per_iter and train.total_steps < per_iter:
        yield error(
            "E701",
            ("train", "total_steps"),
            f"total_steps ({train.total_steps}) is less than one iteration of the loop ({per_iter} env steps)",
            f"use at least {per_iter}",
        )
    if per_iter and train.total_steps >= per_iter and train.total_steps % per_iter:
        iterations = train.total_steps // per_iter
        yield warning(
            "W705",
            ("train", "total_steps"),
            f"total_steps ({train.total_steps}) is not a whole number of iterations ({per_iter} env steps each): "
            f"training stops after {iterations} iterations, {iterations * per_iter} env steps",
            f"use {iterations * per_iter} or {(iterations + 1) * per_iter}",
        )
    for key, every in (("eval", train.eval.every), ("checkpoint", train.checkpoint.every)):
        if every > train.total_steps:
            yield warning(
                "W702",
                ("train", key, "every"),
                f"{key}.every ({every}) exceeds total_steps ({train.total_steps}), so it never happens during training",
                "lower it, or set 0 to disable",
            )
    for block in ctx.spec.loop.blocks:
        if block.after and block.after >= train.total_steps:
            yield warning(
                "W703",
                (*block.path, "after"),
                f"block '{block.name}' starts after {block.after} env steps, at or beyond total_steps",
                "lower `after`",
            )


@check
def minibatches(ctx: Context) -> Iterator[Finding]:
    """A learner's minibatch (PPO's) fits in, and divides, the rollout batch (steps × envs).

    ```yaml
    env: {id: CartPole-v1, num_envs: 8}
    components: {learner: {kind: ppo, minibatch: 100, ...}}
    loop: {rollout: {repeat: 32, ...}}      # E704: 256 samples are not a multiple of 100
    ```
    """
    group_of = assign_groups(ctx.spec, ctx.flow).components if ctx.spaces and ctx.spaces.groups else {}
    for info in ctx.flow.calls:
        algo = ALGORITHMS.get(info.kind)
        if algo is None or not algo.has_setting("minibatch") or info.method.name != "update":
            continue
        comp = ctx.spec.components[info.call.call.component]
        inserts = [
            c
            for c in ctx.flow.calls
            if c.method.name == "insert"
            and info.call.call.args
            and c.call.call.component == info.call.call.args[0].text
        ]
        if not inserts:
            continue
        if ctx.spaces is None and ctx.spec.env.multi_agent:
            continue  # the agents, and so the rows, are unknown (E420 says why)
        rows = ctx.spaces.rows if ctx.spaces else 1
        group = ctx.spaces.group(group_of.get(info.call.call.component)) if group_of else None
        rows = group.rows if group else rows  # several agent groups: the learner's group's rows
        steps = inserts[0].block.repeat
        chunk = int(comp.get("chunk")) if ctx.spec.recurrent and comp.get("chunk") else None
        if chunk:  # recurrent networks: each row's steps padded to whole chunks (E439 checks the rest)
            steps = -(-steps // chunk) * chunk
        batch = steps * ctx.spec.env.num_envs * rows
        mb = comp.get("minibatch")
        if mb is None:  # the whole rollout (mappo's default)
            continue
        path = ("components", info.call.call.component, "minibatch")
        if mb > batch:
            yield error(
                "E704",
                path,
                f"minibatch ({mb}) is larger than the rollout batch ({batch} = "
                f"{steps} steps{' in whole chunks' if chunk else ''} × {ctx.spec.env.num_envs} envs"
                + (f" × {rows} agents" if rows > 1 else "")
                + ")",
                f"use a minibatch ≤ {batch}, or collect more steps per iteration",
            )
        elif batch % mb:
            divisors = [d for d in range(mb, 0, -1) if batch % d == 0][:1]
            yield error(
                "E704",
                path,
                f"the rollout batch ({batch}) is not a multiple of minibatch ({mb}); the last minibatch would be short",
                f"use a divisor of {batch}, e.g. {divisors[0]}",
            )
