"""The reference MAPPO trainer's updates replayed through rlgen's MAPPOLearner: the same
rollout, initial weights, value-normaliser and optimizer state, and the same settings (the
learner of ``examples/rmappo-simple-spread.rl.yaml``: the reference's), so that a difference in
what one update computes shows.

The dump comes from ``benchmarks/reference_dump.py`` (run with the reference's interpreter).
For each iteration it prints both sides' update metrics (means over the gradient steps), the
value normaliser's statistics after the update and, per network, how far apart the two
updates' weight changes are (the norm of their difference over the reference's, and their
cosine).

    .venv/bin/python benchmarks/marl_reference_replay.py DUMP_DIR [--iterations 1,2,3]

Iteration 1 differs by a quirk of the reference: its buffer's first mask is 1, so in the chunks
that run on into the next sequence (25 steps cut into chunks of 10) the previous state leaks
into their first 5 steps. The reference's rollouts are 25 steps, one episode (its envs reset
within the last step); rlgen's learner is given the same 25 rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rlgen.runtime import tfimport

tfimport.install()  # TensorFlow's import without its native log lines, as an rlgen rank's

from rlgen.algorithms.mappo import MAPPO  # noqa: E402
from rlgen.algorithms.mappo.config import MAPPOConfig  # noqa: E402
from rlgen.algorithms.mappo.learner import MAPPOLearner  # noqa: E402
from rlgen.dsl.resolved import resolved  # noqa: E402
from rlgen.dsl.specbuild import build_spec  # noqa: E402
from rlgen.runtime.buffers import Memory, StateRollout  # noqa: E402
from rlgen.runtime.networks import build_network  # noqa: E402
from rlgen.runtime.policies import ActionSpec, Policy, Value  # noqa: E402
from rlgen.runtime.tfutil import configure_threads  # noqa: E402

STEPS, ENVS, AGENTS, OBS, ACTIONS = 25, 128, 3, 18, 5
ROWS, STATE = ENVS * AGENTS, AGENTS * OBS
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rmappo-simple-spread.rl.yaml"


def example() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The example's policy and value networks and its learner's settings (the reference's),
    read through the spec as a build reads them."""
    spec = resolved(build_spec(yaml.safe_load(EXAMPLE.read_text())))
    return spec["networks"]["pi"], spec["networks"]["v"], MAPPO.settings_of(spec["components"]["learner"])


#: rlgen's recurrent MLP -> the reference's parameter names (R_Actor / R_Critic), "|T": transposed
LAYERS = (
    ("input_norm.gamma", "base.feature_norm.weight"),
    ("input_norm.beta", "base.feature_norm.bias"),
    ("hidden.0.w", "base.mlp.fc1.0.weight|T"),
    ("hidden.0.b", "base.mlp.fc1.0.bias"),
    ("norms.0.gamma", "base.mlp.fc1.2.weight"),
    ("norms.0.beta", "base.mlp.fc1.2.bias"),
    ("hidden.1.w", "base.mlp.fc2.0.0.weight|T"),
    ("hidden.1.b", "base.mlp.fc2.0.0.bias"),
    ("norms.1.gamma", "base.mlp.fc2.0.2.weight"),
    ("norms.1.beta", "base.mlp.fc2.0.2.bias"),
    ("gru.w_x", "rnn.rnn.weight_ih_l0|T"),
    ("gru.b_x", "rnn.rnn.bias_ih_l0"),
    ("gru.w_h", "rnn.rnn.weight_hh_l0|T"),
    ("gru.b_h", "rnn.rnn.bias_hh_l0"),
    ("output_norm.gamma", "rnn.norm.weight"),
    ("output_norm.beta", "rnn.norm.bias"),
)
HEADS = {"actor": "act.action_out.linear", "critic": "v_out"}
VNORM = ("running_mean", "running_mean_sq", "debiasing_term")


def variable(net: Any, path: str) -> Any:
    """``hidden.0.w`` -> ``net.hidden[0].w``."""
    obj = net
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def layers(net: Any, side: str) -> list[tuple[Any, str, bool]]:
    """``(rlgen variable, reference name, transposed)`` for every weight of one network."""
    pairs = [*LAYERS, ("head.w", f"{HEADS[side]}.weight|T"), ("head.b", f"{HEADS[side]}.bias")]
    return [(variable(net, ours), ref.split("|")[0], ref.endswith("|T")) for ours, ref in pairs]


def rows(x: np.ndarray) -> np.ndarray:
    """``[T, envs, agents, ...]`` -> ``[T, envs*agents, ...]`` (env-major rows)."""
    return x.reshape(x.shape[0], ROWS, *x.shape[3:])


def replay(dump: dict[str, np.ndarray], epochs: int) -> dict[str, Any]:
    """One update of a fresh learner, loaded from the dump; its metrics and weights after it."""
    pi_net, v_net, settings = example()
    pi = build_network(pi_net, (OBS,), ACTIONS, output_gain=0.01, seed=1, name="pi")
    v = build_network(v_net, (STATE,), 1, output_gain=1.0, seed=2, name="v")
    actor = Policy(pi, ActionSpec(n=ACTIONS), seed=100, name="actor")
    critic = Value(v, name="critic")
    config = MAPPOConfig(**{**settings, "epochs": epochs})
    learner = MAPPOLearner(actor, critic, config, STEPS, ROWS, (OBS,), seed=103, state_shape=(STATE,))
    nets = {"actor": pi, "critic": v}
    for side, net in nets.items():
        for var, name, transposed in layers(net, side):
            value = dump[f"before/{side}/{name}"]
            var.assign((value.T if transposed else value).astype(np.float32))
    optimizers = {"actor": learner.optimizer, "critic": learner.critic_optimizer}
    if "opt_before/actor/0/step" in dump:  # iterations after the first: the optimizers have state
        for side, net in nets.items():
            opt, order = optimizers[side], [str(n) for n in dump[f"opt_names/{side}"]]
            where = {id(var): (name, transposed) for var, name, transposed in layers(net, side)}
            for var, m, s in zip(opt.params, opt.m, opt.v, strict=True):
                name, transposed = where[id(var)]
                i = order.index(name)
                for slot, field in ((m, "exp_avg"), (s, "exp_avg_sq")):
                    value = dump[f"opt_before/{side}/{i}/{field}"]
                    slot.assign((value.T if transposed else value).astype(np.float32))
            opt.step.assign(float(dump[f"opt_before/{side}/0/step"]))
    for name in VNORM:
        getattr(learner.value_norm, name).assign(float(np.ravel(dump[f"vnorm_before/{name}"])[0]))

    buf = {key[4:]: dump[key] for key in dump if key.startswith("buf/")}
    masks = rows(buf["masks"])[..., 0].astype(np.float32)
    data = StateRollout(
        obs=rows(buf["obs"][:STEPS]).astype(np.float32),
        actions=rows(buf["actions"])[..., 0].astype(np.int32),
        rewards=rows(buf["rewards"])[..., 0].astype(np.float32),
        terminated=1.0 - masks[1:],  # the reference's mask after a step is 0 where it ended an episode
        truncated=np.zeros((STEPS, ROWS), np.float32),
        valid=np.ones((STEPS, ROWS), np.float32),
        logp=rows(buf["action_log_probs"])[..., 0].astype(np.float32),
        values=rows(buf["value_preds"][:STEPS])[..., 0].astype(np.float32),
        states=rows(buf["share_obs"][:STEPS]).astype(np.float32),
    )
    memory = Memory(
        first=1.0 - masks[:STEPS],
        policy_states=rows(buf["rnn_states"][:STEPS])[:, :, 0].astype(np.float32),
        value_states=rows(buf["rnn_states_critic"][:STEPS])[:, :, 0].astype(np.float32),
    )
    last = (rows(buf["obs"][STEPS:])[0], rows(buf["share_obs"][STEPS:])[0])
    last_memory = (1.0 - masks[STEPS], rows(buf["rnn_states_critic"][STEPS:])[0, :, 0].astype(np.float32))
    metrics = learner.update(data, *last, 0.0, memory=memory, last_memory=last_memory)
    after = {
        side: [(var.numpy(), name, transposed) for var, name, transposed in layers(net, side)]
        for side, net in nets.items()
    }
    vnorm = [float(getattr(learner.value_norm, name).numpy()) for name in VNORM]
    return {"metrics": metrics, "after": after, "vnorm": vnorm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump", help="the directory benchmarks/reference_dump.py wrote")
    ap.add_argument("--iterations", default="1,2,3", help="comma-separated iterations (default 1,2,3)")
    ap.add_argument("--epochs", type=int, default=10, help="gradient steps to replay (the reference's 10)")
    args = ap.parse_args()
    configure_threads(1, 1)
    print(
        f"{'iter':>4} {'side':<9} {'policy_loss':>12} {'value_loss':>11} {'entropy':>9} {'grad_norm':>10} vnorm after"
    )
    for k in (int(x) for x in args.iterations.split(",")):
        with np.load(f"{args.dump}/iter{k}.npz") as npz:
            dump = {key: npz[key] for key in npz.files}
        with tfimport.native_stderr_aside(None):
            ours = replay(dump, args.epochs)
        m = ours["metrics"]
        ref = {key[5:]: float(dump[key]) for key in dump if key.startswith("info/")}
        ref_norm = float(np.hypot(ref["actor_grad_norm"], ref["critic_grad_norm"]))
        ref_vnorm = [float(np.ravel(dump[f"vnorm_after/{name}"])[0]) for name in VNORM]
        for side, row, vn in (
            ("rlgen", (m["policy_loss"], m["value_loss"], m["entropy"], m["grad_norm"]), ours["vnorm"]),
            ("reference", (ref["policy_loss"], ref["value_loss"], ref["dist_entropy"], ref_norm), ref_vnorm),
        ):
            cells = " ".join(f"{x:>{w}.6f}" for x, w in zip(row, (12, 11, 9, 10), strict=True))
            print(f"{k:>4} {side:<9} {cells} " + " ".join(f"{x:.6g}" for x in vn))
        for side in ("actor", "critic"):
            ours_moves, ref_moves = [], []
            for got, name, transposed in ours["after"][side]:
                want, was = dump[f"after/{side}/{name}"], dump[f"before/{side}/{name}"]
                want, was = (want.T, was.T) if transposed else (want, was)
                ours_moves.append((got - was).ravel())
                ref_moves.append((want - was).ravel())
            a, b = np.concatenate(ours_moves), np.concatenate(ref_moves)
            cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            print(
                f"{k:>4} {side:<9} the update's weight change: |rlgen - reference| / |reference| "
                f"{np.linalg.norm(a - b) / np.linalg.norm(b):.3f}, cosine {cos:.3f}"
            )


if __name__ == "__main__":
    main()
