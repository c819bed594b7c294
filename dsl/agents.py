"""A PettingZoo env's agents and spaces, read without TensorFlow and without trusting it.

``validate`` must know the agent list, each agent's spaces and the global state's shape to
fix the loop's shapes. Third-party env code can hang, allocate without bound or crash the
interpreter, so it runs in a forked child limited to :data:`PROBE_SECONDS` and
:data:`PROBE_BYTES` of address space; the child sends plain data back through a pipe.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROBE_SECONDS = 10.0
PROBE_BYTES = 4 << 30


@dataclass(frozen=True)
class AgentSpaces:
    """What the probe read: agents in ``possible_agents`` order and per-agent spaces as plain data."""

    agents: tuple[str, ...]
    observations: tuple[dict[str, Any], ...]
    actions: tuple[dict[str, Any], ...]
    state: tuple[int, ...] | None
    max_cycles: int | None


class ProbeError(RuntimeError):
    """The env could not be made or read; the message says why."""


def pettingzoo_env(ref: str, kwargs: Mapping[str, Any] | None = None) -> Any:
    """Make one PettingZoo ``ParallelEnv`` from ``ref``: a module path whose
    ``parallel_env(**kwargs)`` makes it (``mpe2.simple_spread_v3``), or ``"pkg.module:callable"``,
    a factory called with ``**kwargs`` that returns one. Used by validate (in a child) and by
    the env workers (:mod:`rlgen.runtime.agents`)."""
    module_name, sep, attr = ref.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # the user's own modules, as `rlgen run` finds them
    try:
        make: Any = importlib.import_module(module_name)
        for part in attr.split(".") if sep else ():
            make = getattr(make, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            f"cannot import PettingZoo env {ref!r} ({exc}); its module must be importable where rlgen runs"
        ) from None
    if not sep:
        make = getattr(make, "parallel_env", None)
        if not callable(make):
            raise ValueError(
                f"module {ref!r} has no parallel_env(); give a PettingZoo env module "
                "(e.g. 'mpe2.simple_spread_v3') or a factory 'pkg.module:callable'"
            )
    if not callable(make):
        raise ValueError(f"{ref!r} is not callable")
    env = make(**dict(kwargs or {}))
    if all(callable(getattr(type(env), name, None)) for name in ("last", "observe")):  # AEC API
        raise ValueError(f"{ref!r} made an AEC env ({type(env).__name__}); a ParallelEnv is needed")
    missing = [name for name in ("possible_agents", "reset", "step") if not hasattr(env, name)]
    if missing:
        raise ValueError(
            f"{ref!r} made {type(env).__name__}, not a PettingZoo ParallelEnv (it has no {', '.join(missing)})"
        )
    return env


def space_data(space: Any) -> dict[str, Any]:
    """A gymnasium space as plain data: ``{"n": 5}`` or ``{"shape": [18], "low": .., "high": ..}``."""
    import numpy as np

    if hasattr(space, "n") and getattr(space, "shape", None) == ():
        return {"n": int(space.n)}
    if hasattr(space, "low") and hasattr(space, "shape"):
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        uniform = low.size and np.all(low == low.flat[0]) and np.all(high == high.flat[0])
        out: dict[str, Any] = {"shape": [int(s) for s in space.shape]}
        if uniform and np.isfinite(low.flat[0]) and np.isfinite(high.flat[0]):
            out.update(low=float(low.flat[0]), high=float(high.flat[0]))
        return out
    return {"unsupported": type(space).__name__}


def _probe(ref: str, kwargs: Mapping[str, Any], state: str | None) -> dict[str, Any]:
    import numpy as np

    env = pettingzoo_env(ref, kwargs)
    try:
        agents = [str(a) for a in env.possible_agents]
        out: dict[str, Any] = {
            "agents": agents,
            "observations": [space_data(env.observation_space(a)) for a in agents],
            "actions": [space_data(env.action_space(a)) for a in agents],
            "state": None,
            "max_cycles": getattr(getattr(env, "unwrapped", env), "max_cycles", None),
        }
        if state == "env":
            if not hasattr(env, "state"):
                raise ProbeError(f"'{ref}' has no state() method")
            env.reset(seed=0)
            out["state"] = [int(np.asarray(env.state()).size)]
        return out
    finally:
        close = getattr(env, "close", None)
        if close:
            close()


_READ: dict[str, AgentSpaces] = {}


def read_agent_spaces(ref: str, kwargs: Mapping[str, Any], state: str | None) -> AgentSpaces:
    """Make the env in a forked, limited child and read its agents and spaces (once per
    process for the same arguments: validate and build both ask)."""
    key = json.dumps([ref, dict(kwargs), state], sort_keys=True, default=str)
    if key not in _READ:
        _READ[key] = _read_in_child(ref, kwargs, state)
    return _READ[key]


def _read_in_child(ref: str, kwargs: Mapping[str, Any], state: str | None) -> AgentSpaces:
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: limits, probe, one JSON line, exit without cleanup
        os.close(rd)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (PROBE_BYTES, PROBE_BYTES))
            signal.alarm(int(PROBE_SECONDS) + 1)
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                os.dup2(null.fileno(), 2)
            reply = {"ok": _probe(ref, kwargs, state)}
        except BaseException as exc:  # anything the env does is reported, never raised here
            known = isinstance(exc, ProbeError | ValueError | ImportError)
            reply = {"error": str(exc) if known else f"{type(exc).__name__}: {exc}"}
        try:
            os.write(wr, json.dumps(reply, default=str).encode())
        finally:
            os._exit(0)
    os.close(wr)
    data = _read_limited(rd, pid)
    if "error" in data:
        raise ProbeError(data["error"])
    got = data["ok"]
    return AgentSpaces(
        tuple(got["agents"]),
        tuple(got["observations"]),
        tuple(got["actions"]),
        tuple(got["state"]) if got["state"] else None,
        got["max_cycles"] if isinstance(got["max_cycles"], int) else None,
    )


def _read_limited(fd: int, pid: int) -> dict[str, Any]:
    """The child's reply, or a :class:`ProbeError` once it dies or overruns its time."""
    deadline, chunks = time.monotonic() + PROBE_SECONDS, []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise ProbeError(f"making the env took over {PROBE_SECONDS:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        why = f"it was killed by signal {sig}" if sig else "it exited without a reply"
        raise ProbeError(f"the process making the env failed ({why}; memory is limited to {PROBE_BYTES >> 30} GiB)")
    return json.loads(b"".join(chunks))
