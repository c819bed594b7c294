"""The resolved spec: a :class:`~rlgen.dsl.spec.Spec` as plain data with every default explicit,
in the document's order. It is what ``spec.resolved.json`` holds, what a build's key hashes,
and what the code generator reads settings from."""

from __future__ import annotations

import dataclasses
from typing import Any

from rlgen.dsl.spec import Block, Deploy, LinearSchedule, Optimizer, Spec, Train


def plain(value: Any) -> Any:
    """``value`` as JSON data: schedules and optimizers as the spec writes them, dataclasses as dicts."""
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
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
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
    env = {k: v for k, v in plain(spec.env).items() if k not in skip}
    if spec.env.multi_agent:  # written only where they apply, so single-agent builds keep their bytes
        env.update(pettingzoo=spec.env.pettingzoo, state=spec.env.state, agents={"share": spec.env.share})
        if spec.env.groups:
            env["groups"] = {g: list(agents) for g, agents in spec.env.groups}
    if spec.env.preset:  # written only where set, so other builds keep their bytes
        env["preset"] = spec.env.preset
    env["wrappers"] = [{w.name: dict(w.kwargs)} if w.kwargs else w.name for w in spec.env.wrappers]
    if spec.env.observation or spec.env.action:
        env["spaces"] = {"observation": plain(spec.env.observation), "action": plain(spec.env.action)}
    if spec.env.normalize is not None:  # the gamma it uses, resolved from the learner
        env["normalize"] = {**plain(spec.env.normalize), "gamma": spec.normalize_gamma()}
    networks = {}
    for name, net in spec.networks.items():
        d = plain(net)
        del d["name"]
        keep = _NETWORK_KEYS.get(net.kind, ("kind", "impl", "args"))
        networks[name] = {k: d[k] for k in keep}
        if net.kind == "mlp" and net.layer_norm:  # only when set: specs without it resolve as before
            networks[name]["layer_norm"] = True
        if net.kind == "mlp" and net.recurrent:
            networks[name]["recurrent"] = dict(net.recurrent)
        if net.image and net.precision != "float32":  # only when set: specs without it resolve as before
            networks[name]["precision"] = net.precision
    components = {}
    for name, comp in spec.components.items():
        d = {"kind": comp.kind, **plain(comp.settings)}
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
    out = plain(deploy)  # devices None: dropped, so specs without it resolve as before
    if isinstance(deploy.devices, tuple):
        out["devices"] = dict(deploy.devices)
    return out


def _train_dict(train: Train) -> dict[str, Any]:
    out = plain(train)
    if train.stop.mean_return is None:  # no stop condition: its window means nothing (the schema refuses it)
        del out["stop"]
    return out
