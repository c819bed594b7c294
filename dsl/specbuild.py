"""Building the typed :class:`~rlgen.dsl.spec.Spec` from a document that passed the JSON Schema:
defaults filled in, calls parsed, rates and optimizers typed. The checks (rlgen.dsl.checks) run
on what this returns; it assumes only what the schema guarantees."""

from __future__ import annotations

import dataclasses
from typing import Any

from rlgen.algorithms import ALGORITHMS
from rlgen.dsl.calls import CallSyntaxError, parse_call
from rlgen.dsl.catalog import METHODS, recurrent_methods
from rlgen.dsl.methods import Method, Param
from rlgen.dsl.spec import (
    COMPONENT_DEFAULTS,
    IMAGE_NETWORKS,
    Block,
    Checkpoint,
    Component,
    Deploy,
    EnvSpec,
    Eval,
    Exploration,
    Log,
    Loop,
    LoopCall,
    Network,
    Normalize,
    Optimizer,
    Partition,
    PathT,
    SpaceDecl,
    Spec,
    Stop,
    Train,
    gsde_defaults,
    optimizer_of,
    rate_of,
)
from rlgen.dsl.wrappers import parse as parse_wrappers


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
            settings[key] = rate_of(value)
        elif key == "optimizer":
            settings[key] = optimizer_of(value, settings.get("optimizer", Optimizer()))
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
