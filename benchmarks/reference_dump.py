"""Dump the first N training iterations of the reference MAPPO trainer (marlbenchmark/on-policy,
``rmappo``) on its MPE simple_spread, with the settings of
``onpolicy/scripts/train_mpe_scripts/train_mpe_spread.sh``, so that each update can be replayed
through rlgen's learner (``benchmarks/marl_reference_replay.py``).

The reference is not a dependency of rlgen: run this with the reference's own interpreter (a
virtual environment with torch, gym 0.26 and the checkout's ``onpolicy`` importable, as
``benchmarks/reference_mappo.py`` describes), e.g.

    DUMP_DIR=/tmp/refdump DUMP_ITERS=3 /path/to/onpolicy-venv/bin/python benchmarks/reference_dump.py

Each iteration k writes ``DUMP_DIR/iter{k}.npz``: the rollout buffer after ``compute()``
(``buf/*``), both networks' state dicts, the ValueNorm's and the Adam optimizers' state before
and after ``train()``, ``train()``'s infos, and per-update losses (``per_update/*``).

Only observation hooks are added (they call the original functions unchanged and
record their inputs/outputs); the runner/trainer/buffer code itself is unmodified.
The one deliberate deviation from train_mpe.py is the vec env: DummyVecEnv instead
of SubprocVecEnv (128 processes cannot start on this 2-core machine).
"""

import os
import tempfile
from pathlib import Path

import numpy as np
import onpolicy.scripts.train.train_mpe as train_mpe
import torch
from onpolicy.config import get_config

ARGS = [
    "--env_name",
    "MPE",
    "--algorithm_name",
    "rmappo",
    "--experiment_name",
    "dump",
    "--scenario_name",
    "simple_spread",
    "--num_agents",
    "3",
    "--num_landmarks",
    "3",
    "--seed",
    "1",
    "--n_training_threads",
    "1",
    "--n_rollout_threads",
    "128",
    "--num_mini_batch",
    "1",
    "--episode_length",
    "25",
    "--num_env_steps",
    "20000000",
    "--ppo_epoch",
    "10",
    "--use_ReLU",
    "--gain",
    "0.01",
    "--lr",
    "7e-4",
    "--critic_lr",
    "7e-4",
    "--use_wandb",
]

N_ITERS = int(os.environ.get("DUMP_ITERS", "3"))
OUT_DIR = Path(os.environ.get("DUMP_DIR", "reference-dump"))


def t2n(x):
    return x.detach().cpu().numpy()


def state_dict_np(prefix, module, out):
    for k, v in module.state_dict().items():
        out[f"{prefix}/{k}"] = t2n(v).copy()


def opt_state_np(prefix, optimizer, params, out):
    for i, p in enumerate(params):
        st = optimizer.state.get(p, {})
        for field in ("exp_avg", "exp_avg_sq", "step"):
            if field in st:
                v = st[field]
                out[f"{prefix}/{i}/{field}"] = (
                    (t2n(v) if torch.is_tensor(v) else np.asarray(v)).astype(np.float32).copy()
                )


def to_float(v):
    if torch.is_tensor(v):
        return float(v.detach().cpu().item())
    return float(v)


def main():
    # ---- config exactly as train_mpe.py main() builds it ----
    parser = get_config()
    all_args = train_mpe.parse_args(ARGS, parser)
    if all_args.algorithm_name == "rmappo":
        all_args.use_recurrent_policy = True
        all_args.use_naive_recurrent_policy = False
    else:
        raise NotImplementedError
    assert all_args.use_wandb is False, "wandb must be off"
    assert all_args.use_ReLU is False, "--use_ReLU is store_false -> tanh"
    assert all_args.use_linear_lr_decay is False
    assert all_args.share_policy is True and all_args.use_centralized_V is True
    assert all_args.use_eval is False

    # cuda: all_args.cuda is True by default but no GPU here -> cpu (train_mpe.py branch)
    device = torch.device("cuda:0") if all_args.cuda and torch.cuda.is_available() else torch.device("cpu")
    torch.set_num_threads(all_args.n_training_threads)

    run_dir = Path(tempfile.mkdtemp(prefix="onpolicy_dump_run_"))

    # seed (train_mpe.py order: seeds, then envs, then runner)
    torch.manual_seed(all_args.seed)
    torch.cuda.manual_seed_all(all_args.seed)
    np.random.seed(all_args.seed)

    train_mpe.SubprocVecEnv = train_mpe.DummyVecEnv  # its own make_train_env, one process
    envs = train_mpe.make_train_env(all_args)
    config = {
        "all_args": all_args,
        "envs": envs,
        "eval_envs": None,
        "num_agents": all_args.num_agents,
        "device": device,
        "run_dir": run_dir,
    }
    from onpolicy.runner.shared.mpe_runner import MPERunner as Runner

    runner = Runner(config)

    trainer, policy, buffer = runner.trainer, runner.policy, runner.buffer
    vnorm = trainer.value_normalizer

    # ---- observation hooks (call originals unchanged) ----
    rec = {"perms": [], "adv": [], "updates": []}
    orig_randperm = torch.randperm

    def randperm_rec(*a, **k):
        r = orig_randperm(*a, **k)
        rec["perms"].append(r.clone())
        return r

    # shared_buffer.py uses `torch.randperm` via its module-global `torch`
    torch.randperm = randperm_rec

    orig_gen = buffer.recurrent_generator

    def gen_rec(advantages, num_mini_batch, data_chunk_length):
        rec["adv"].append(np.array(advantages, copy=True))
        return orig_gen(advantages, num_mini_batch, data_chunk_length)

    buffer.recurrent_generator = gen_rec

    orig_ppo_update = trainer.ppo_update

    def ppo_update_rec(sample, update_actor=True):
        out = orig_ppo_update(sample, update_actor)
        value_loss, critic_grad_norm, policy_loss, dist_entropy, actor_grad_norm, imp_weights = out
        rec["updates"].append(
            dict(
                value_loss=to_float(value_loss),
                critic_grad_norm=to_float(critic_grad_norm),
                policy_loss=to_float(policy_loss),
                dist_entropy=to_float(dist_entropy),
                actor_grad_norm=to_float(actor_grad_norm),
                ratio=to_float(imp_weights.mean()),
                ratio_max=to_float(imp_weights.max()),
                ratio_min=to_float(imp_weights.min()),
                vnorm_running_mean=to_float(vnorm.running_mean.sum()),
                vnorm_running_mean_sq=to_float(vnorm.running_mean_sq.sum()),
                vnorm_debiasing_term=to_float(vnorm.debiasing_term),
            )
        )
        return out

    trainer.ppo_update = ppo_update_rec

    actor_names = [n for n, _ in policy.actor.named_parameters()]
    critic_names = [n for n, _ in policy.critic.named_parameters()]
    actor_params = list(policy.actor.parameters())
    critic_params = list(policy.critic.parameters())

    OUT_DIR.mkdir(parents=True, exist_ok=True)

    # ---- run() loop (mpe_runner.py MPERunner.run), first N_ITERS iterations ----
    runner.warmup()
    episodes = int(runner.num_env_steps) // runner.episode_length // runner.n_rollout_threads
    for episode in range(N_ITERS):
        if runner.use_linear_lr_decay:
            runner.trainer.policy.lr_decay(episode, episodes)
        for step in range(runner.episode_length):
            values, actions, action_log_probs, rnn_states, rnn_states_critic, actions_env = runner.collect(step)
            obs, rewards, dones, infos = runner.envs.step(actions_env)
            data = obs, rewards, dones, infos, values, actions, action_log_probs, rnn_states, rnn_states_critic
            runner.insert(data)
        runner.compute()

        out = {}
        for name in (
            "share_obs",
            "obs",
            "rnn_states",
            "rnn_states_critic",
            "value_preds",
            "returns",
            "actions",
            "action_log_probs",
            "rewards",
            "masks",
            "bad_masks",
            "active_masks",
            "available_actions",
        ):
            arr = getattr(buffer, name)
            if arr is not None:
                out[f"buf/{name}"] = np.array(arr, copy=True)
        state_dict_np("before/actor", policy.actor, out)
        state_dict_np("before/critic", policy.critic, out)
        state_dict_np("vnorm_before", vnorm, out)
        if episode > 0:
            opt_state_np("opt_before/actor", policy.actor_optimizer, actor_params, out)
            opt_state_np("opt_before/critic", policy.critic_optimizer, critic_params, out)
        out["opt_names/actor"] = np.array(actor_names)
        out["opt_names/critic"] = np.array(critic_names)
        out["meta/iteration"] = np.array(episode + 1)
        out["meta/actor_lr"] = np.array([g["lr"] for g in policy.actor_optimizer.param_groups], dtype=np.float64)
        out["meta/critic_lr"] = np.array([g["lr"] for g in policy.critic_optimizer.param_groups], dtype=np.float64)
        out["meta/torch_rng_state_before_train"] = torch.get_rng_state().numpy().copy()

        rec["perms"].clear()
        rec["adv"].clear()
        rec["updates"].clear()
        train_infos = runner.train()  # trainer.prep_training(); trainer.train(buffer); buffer.after_update()

        for k, v in train_infos.items():
            out[f"info/{k}"] = np.array(to_float(v), dtype=np.float64)
        # what run() adds at log iterations (episode % log_interval == 0); computed after train()
        out["info_run/average_episode_rewards"] = np.array(
            float(np.mean(buffer.rewards) * runner.episode_length), dtype=np.float64
        )

        state_dict_np("after/actor", policy.actor, out)
        state_dict_np("after/critic", policy.critic, out)
        state_dict_np("vnorm_after", vnorm, out)
        opt_state_np("opt_after/actor", policy.actor_optimizer, actor_params, out)
        opt_state_np("opt_after/critic", policy.critic_optimizer, critic_params, out)

        # extras recorded by the hooks
        out["extra/chunk_perm"] = np.stack([t2n(p) for p in rec["perms"]]).astype(np.int64)  # [ppo_epoch, data_chunks]
        out["extra/advantages_normalized"] = rec["adv"][0].astype(np.float32)  # [T, threads, agents, 1]
        assert all(np.array_equal(a, rec["adv"][0]) for a in rec["adv"])
        for key in rec["updates"][0]:
            out[f"per_update/{key}"] = np.array([u[key] for u in rec["updates"]], dtype=np.float64)

        path = OUT_DIR / f"iter{episode + 1}.npz"
        np.savez(path, **out)
        print(f"iteration {episode + 1}: wrote {path} ({len(out)} keys)")
        for k, v in train_infos.items():
            print(f"   {k} = {to_float(v):.6g}")
        print(f"   average_episode_rewards = {float(out['info_run/average_episode_rewards']):.6g}")

    torch.randperm = orig_randperm
    envs.close()
    print("run_dir (tensorboard scratch):", run_dir)


if __name__ == "__main__":
    main()
