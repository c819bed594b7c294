"""Checks of a spec against its distribution policy, run by ``rlgen validate`` before launch."""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterator

from rlgen.algorithms import ALGORITHMS
from rlgen.codegen.names import LOCAL_NAMES
from rlgen.codegen.policies import AUTO, POLICIES, DistributionPolicy
from rlgen.dsl.catalog import LEARNER_KINDS
from rlgen.dsl.dataflow import Dataflow
from rlgen.dsl.diagnostics import did_you_mean, quote_list
from rlgen.dsl.envinfo import resolve_spaces
from rlgen.dsl.findings import Finding, error, warning
from rlgen.dsl.hosts import slots_of
from rlgen.dsl.spec import Spec

_DEPLOY = ("deploy",)


def _suggest_partition(spec: Spec, flow: Dataflow, kind: str) -> str:
    """A partition entry the user can paste, written with this spec's own names."""
    if kind == "env":
        steps = flow.calls_to("env.step")
        call = steps[0].call.call if steps else None
        send = ", ".join(a.text for a in call.args) if call else "action"
        recv = ", ".join(o.text for o in call.outputs) if call else "next_obs, reward, terminated, truncated"
        return f"env: {{at: env.step, send: [{send}], receive: [{recv}]}}"
    if kind == "experience":
        learn = next((c for c in flow.calls if c.kind in LEARNER_KINDS), None)
        blocks = [b.name for b in spec.loop.blocks]
        after = blocks[blocks.index(learn.block.name) - 1] if learn and blocks.index(learn.block.name) else "rollout"
        send = ", ".join(a.text for a in learn.call.call.args) if learn else "buffer, obs"
        return f"experience: {{after: {after}, send: [{send}], receive: [weights]}}"
    learn = next((c for c in flow.calls if c.kind in LEARNER_KINDS and c.method.name == "update"), None)
    target = learn.call.call.target if learn else "learner.update"
    return f"gradients: {{at: {target}, reduce: [gradients]}}"


def _check_group_roles(spec: Spec, policy: DistributionPolicy) -> Iterator[Finding]:
    """Under a policy that gives each agent group a rank, a group's name names its role, its
    fragment (a module, its class and the variable that holds it) and its rank's function
    (``run_<group>``): it may not be a keyword or builtin, another role's or fragment's name,
    a name generated code keeps, nor a value's name (a value is a local variable beside the
    fragment's)."""
    values: set[str] = set()
    for block in spec.loop.all_blocks():
        for lc in block.calls:
            values |= {n.text for n in (*lc.call.args, *lc.call.outputs)}
    roles = {r.name for r in policy.roles if r.name != policy.learner_role}
    for group, _ in spec.env.groups:
        if keyword.iskeyword(group) or keyword.issoftkeyword(group) or hasattr(builtins, group):
            what = "a Python keyword or builtin"
        elif group in roles or group in ("main", "agent", "env_worker"):
            what = "the name of another role or fragment of the build"
        elif group in LOCAL_NAMES:
            what = "a name generated code keeps for itself"
        elif group in values:
            what = "the name of a value of the loop"
        else:
            continue
        yield error(
            "E612",
            ("env", "groups", group),
            f"policy '{policy.name}' names a rank's role, fragment and module after each agent group, "
            f"and '{group}' is {what}",
            f"rename the group, e.g. '{group}_agents' (docs/language.md lists the names generated code keeps)",
            key=True,
        )


def _check_normalize_across_env_cut(spec: Spec, flow: Dataflow) -> Iterator[Finding]:
    """Across an env cut the acting side counts (and normalises) what the envs return as it
    arrives: every output of `env.step` must cross."""
    steps = flow.calls_to("env.step")
    cut = next((p for p in spec.partitions.values() if p.kind == "env"), None)
    if not steps or cut is None:  # no cut to check (E508 says a missing one)
        return
    outputs = [o.text for o in steps[0].call.call.outputs]
    missing = [o for o in outputs if o not in cut.receive]
    if missing:
        yield error(
            "E607",
            ("partitions", cut.name, "receive"),
            f"`env.normalize` across the env cut counts what the envs return where it arrives, "
            f"but `{cut.name}` does not send {quote_list(missing)} back",
            f"receive every output of env.step: `receive: [{', '.join(outputs)}]`",
        )


def _per_agent_minibatch(spec: Spec, name: str, minibatch: int, learners: int) -> Iterator[Finding]:
    """E603: with one network per agent each learner's share of the minibatch holds whole env
    copies (a multiple of the agents; the spec's minibatch itself is checked by E426)."""
    if not spec.env.multi_agent or spec.env.share:
        return
    spaces, _ = resolve_spaces(spec.env)  # read once per process: validate has read it already
    agents = spaces.rows if spaces else 1
    per = minibatch // learners
    if agents > 1 and minibatch % agents == 0 and per % agents:
        yield error(
            "E603",
            ("components", name, "minibatch"),
            f"minibatch {minibatch} over {learners} learners gives each {per} rows, not a multiple of the "
            f"{agents} agents: with one network per agent (`agents: {{share: false}}`) "
            "a minibatch holds whole env copies",
            f"use a multiple of {learners * agents}",
        )


def check_deploy(spec: Spec, flow: Dataflow) -> Iterator[Finding]:
    """Does the spec support its deploy policy with this many workers and hosts?

    ```yaml
    deploy: {policy: central-inference, workers: 3}
    env: {id: CartPole-v1, num_envs: 3}     # E602: 3 envs do not split over 2 env workers
    ```
    """
    if spec.deploy.policy == AUTO:  # `rlgen run` profiles single and measures the candidates that validate
        yield from _check_auto(spec)
        return
    policy: DistributionPolicy | None = POLICIES.get(spec.deploy.policy)
    if policy is None:
        yield error(
            "E600",
            (*_DEPLOY, "policy"),
            f"unknown policy '{spec.deploy.policy}'{did_you_mean(spec.deploy.policy, [*POLICIES, AUTO])}",
            f"policies: {quote_list([*POLICIES, AUTO])}",
        )
        return
    if policy.per_group:
        if not spec.env.grouped:
            yield error(
                "E610",
                (*_DEPLOY, "policy"),
                f"policy '{policy.name}' puts each agent group on its own rank, but the env has no `env.groups`",
                "use another policy, or declare the agent groups under `env.groups`",
            )
            return
        if clashes := list(_check_group_roles(spec, policy)):
            yield from clashes
            return
        policy = policy.for_groups(tuple(g for g, _ in spec.env.groups))
    workers = spec.deploy.workers
    if workers < policy.min_workers:
        yield error(
            "E601",
            (*_DEPLOY, "workers"),
            f"policy '{policy.name}' needs at least {policy.min_workers} workers, got {workers}",
            f"set `workers: {policy.min_workers}` or more (or --workers)",
        )
        return
    if policy.max_workers is not None and workers > policy.max_workers:
        yield error(
            "E601",
            (*_DEPLOY, "workers"),
            f"policy '{policy.name}' runs in {policy.max_workers} process"
            f"{'es' * (policy.max_workers > 1)}, got workers: {workers}",
            "use a distributed policy, e.g. multi-learner"
            if policy.max_workers == 1
            else f"set `workers: {policy.max_workers}`",
        )
        return
    if policy.cut is not None and not any(p.kind == policy.cut for p in spec.partitions.values()):
        yield error(
            "E508",
            (*_DEPLOY, "policy"),
            f"policy '{policy.name}' cuts the loop at a{'n' * (policy.cut[0] in 'ae')} "
            f"{policy.cut} partition, but `partitions:` declares none",
            f"add under `partitions:`  {_suggest_partition(spec, flow, policy.cut)}",
        )
    if spec.env.normalize is not None and policy.cut == "env":
        yield from _check_normalize_across_env_cut(spec, flow)
    env_workers = policy.env_workers(workers)
    if spec.env.num_envs % env_workers:
        yield error(
            "E602",
            ("env", "num_envs"),
            f"{spec.env.num_envs} envs do not split evenly over "
            f"{env_workers} env-stepping workers of policy '{policy.name}' ({workers} workers)",
            f"use a multiple of {env_workers} envs, or change the number of workers",
        )
    elif spec.env.num_envs % (env_workers * policy.env_groups):
        yield error(
            "E602",
            ("env", "num_envs"),
            f"{spec.env.num_envs} envs do not split evenly into {policy.env_groups} groups on each of "
            f"{env_workers} env worker(s) of policy '{policy.name}' ({workers} workers)",
            f"use a multiple of {env_workers * policy.env_groups} envs, or central-inference",
        )
    if policy.env_groups > 1:
        yield from _check_pipelined(spec, flow, policy)
    learners = policy.learner_workers(workers)
    for name, comp in spec.components.items():
        splits = comp.kind in ALGORITHMS and ALGORITHMS[comp.kind].has_setting("minibatch")
        if splits and learners > 1 and comp.get("minibatch") is not None and comp.get("minibatch") % learners:
            yield error(
                "E603",
                ("components", name, "minibatch"),
                f"minibatch {comp.get('minibatch')} does not split evenly over {learners} learners",
                f"use a multiple of {learners}",
            )
        elif splits and learners > 1 and comp.get("minibatch") is not None:
            yield from _per_agent_minibatch(spec, name, comp.get("minibatch"), learners)
    slots = slots_of(spec.deploy.hosts)
    for i, host in enumerate(spec.deploy.hosts):
        if host in spec.deploy.hosts[:i]:
            yield error(
                "E604",
                (*_DEPLOY, "hosts", i),
                f"host '{host}' is listed twice",
                "list each host once with its slot count",
            )
    if spec.deploy.hosts and slots < workers:
        yield error(
            "E604",
            (*_DEPLOY, "hosts"),
            f"the hosts ({', '.join(spec.deploy.hosts)}) offer {slots} slot(s) for {workers} workers: "
            f"rank{'s' if workers - slots > 1 else ''} {', '.join(map(str, range(slots, workers)))} would have none",
            "add hosts or slots (host:slots), or lower workers",
        )
    lag = spec.deploy.lag
    if lag is not None and policy.max_lag == 0:
        yield warning(
            "W605",
            (*_DEPLOY, "lag"),
            f"policy '{policy.name}' has no actors that could lag behind the learner: `lag: {lag}` is ignored",
            "lag applies to actors-learner and async-actors",
        )
    elif lag is not None and lag > policy.max_lag:
        yield error(
            "E605",
            (*_DEPLOY, "lag"),
            f"policy '{policy.name}' lets actors lag at most {policy.max_lag} updates behind, got lag: {lag}",
            f"use a lag from 0 to {policy.max_lag}",
        )


#: What may run on the learner before ``env.step`` in a pipelined block: per-env inference.
_PER_ENV = frozenset({("policy", "act"), ("value", "value"), ("qvalue", "act")})


def _check_pipelined(spec: Spec, flow: Dataflow, policy: DistributionPolicy) -> Iterator[Finding]:
    """A policy with env groups acts for one group while another steps, so the block with
    ``env.step`` must act on what it carries, per env, and ``init`` may only reset the envs.

    ```yaml
    deploy: {policy: pipelined-inference, workers: 2}
    loop:
      init: [env.reset() -> obs, norm.update(obs) -> stats]   # E606: init computes on the learner
    ```
    """
    hint = "use central-inference, which steps every env at once"
    if spec.loop.init is not None:
        for i, lc in enumerate(spec.loop.init.calls):
            # a recurrent network's initial state is zeros per env row, split as the rows are
            if lc.call.target != "env.reset" and lc.call.method != "initial_state":
                yield error(
                    "E606",
                    lc.path or ("loop", "init", i),
                    f"policy '{policy.name}' pipelines env groups, so `init` may only reset the envs "
                    f"(and make recurrent networks' initial states), but it calls {lc.call.target}",
                    hint,
                )
    for step in flow.calls_to("env.step"):
        block = step.block
        carried = {dst for dst, _ in block.carry}
        before = block.calls[: block.calls.index(step.call)]
        for lc in before:
            info = next(c for c in flow.calls if c.call is lc)
            args = [a.text for a in lc.call.args]
            if (info.kind, info.method.name) not in _PER_ENV:
                why = f"calls {lc.call.target} before env.step"
            elif spec.components[lc.call.component].get("gsde") is not None:
                why = f"acts through {lc.call.component}, whose gSDE noise is held per env of one whole batch"
            elif not set(args) <= carried:
                why = f"acts on {', '.join(a for a in args if a not in carried)}, which `carry` does not hold"
            else:
                continue
            yield error(
                "E606",
                lc.path,
                f"policy '{policy.name}' acts for one env group while another steps, which needs "
                f"per-env inference on carried values before env.step; block '{block.name}' {why}",
                hint,
            )
        if block.repeat < 2:
            yield error(
                "E606",
                block.path or ("loop", block.name),
                f"policy '{policy.name}' pipelines the steps of a repeated block, but block '{block.name}' "
                "with env.step runs once per iteration",
                f"give block '{block.name}' a `repeat`, or {hint}",
            )


def _check_auto(spec: Spec) -> Iterator[Finding]:
    """``policy: auto`` starts under single; the lag it may set applies to the policy chosen."""
    if spec.deploy.lag is not None and spec.deploy.lag > max(p.max_lag for p in POLICIES.values()):
        yield error(
            "E605",
            (*_DEPLOY, "lag"),
            f"no policy lets actors lag {spec.deploy.lag} updates behind",
            f"use a lag from 0 to {max(p.max_lag for p in POLICIES.values())}",
        )
