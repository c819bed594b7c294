"""Agent groups (env.groups): validate's errors, the grouped loop's shapes, and the host adapter
returning one array per group, against mpe2's simple_tag stepped directly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlgen.runtime.agents import ParallelVectorEnv
from rlgen.runtime.envs import env_seed

from conftest import ROOT

simple_tag_v3 = pytest.importorskip("mpe2.simple_tag_v3")

TAG = "mpe2.simple_tag_v3"
KWARGS = {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 5, "continuous_actions": False}
GROUPS = {"adversaries": ["adversary_0", "adversary_1", "adversary_2"], "good": ["agent_0"]}


def test_groups_match_mpe2_simple_tag_stepped_directly() -> None:
    B, seed = 2, 3
    env = ParallelVectorEnv(TAG, B, seed=seed, rank=1, kwargs=KWARGS, state="concat", groups=GROUPS)
    direct = [simple_tag_v3.parallel_env(**KWARGS) for _ in range(B)]
    agents = direct[0].possible_agents
    first = [d.reset(seed=env_seed(seed, 1, b))[0] for b, d in enumerate(direct)]
    obs_adv, state_adv, obs_good, state_good = env.reset()
    assert obs_adv.shape == (B * 3, 16) and obs_good.shape == (B, 14)
    assert state_adv.shape == (B * 3, 62) and state_good.shape == (B, 62)
    for b in range(B):
        assert np.array_equal(obs_adv[b * 3 : b * 3 + 3], np.array([first[b][a] for a in GROUPS["adversaries"]]))
        assert np.array_equal(obs_good[b], first[b]["agent_0"])
        concat = np.concatenate([first[b][a] for a in agents])
        assert np.array_equal(state_adv[b * 3], concat) and np.array_equal(state_good[b], concat)
    rng = np.random.default_rng(0)
    done = [False] * B
    saw_reset = False
    for _ in range(13):  # episode ends at steps 5 and 10, reset steps after them
        a_adv = rng.integers(0, 5, B * 3).astype(np.int32)
        a_good = rng.integers(0, 5, B).astype(np.int32)
        out = env.step(a_adv, a_good)
        assert len(out) == 10
        o_adv, r_adv, te_adv, tr_adv, s_adv, o_good, r_good, te_good, tr_good, s_good = out
        assert r_adv.shape == te_adv.shape == tr_adv.shape == (B * 3,) and r_good.shape == (B,)
        for b, d in enumerate(direct):
            if done[b]:
                o, _ = d.reset()
                r = {a: 0.0 for a in agents}
                te = tr = {a: False for a in agents}
                saw_reset = True
            else:
                act = {a: int(a_adv[b * 3 + i]) for i, a in enumerate(GROUPS["adversaries"])}
                act["agent_0"] = int(a_good[b])
                o, r, te, tr, _ = d.step(act)
            adv = GROUPS["adversaries"]
            rows = slice(b * 3, b * 3 + 3)
            assert np.array_equal(o_adv[rows], np.array([o[a] for a in adv], np.float32))
            assert np.array_equal(r_adv[rows], np.array([r[a] for a in adv], np.float32))
            assert list(te_adv[rows]) == [te[a] for a in adv] and list(tr_adv[rows]) == [tr[a] for a in adv]
            assert np.array_equal(o_good[b], np.asarray(o["agent_0"], np.float32))
            assert r_good[b] == np.float32(r["agent_0"])
            assert (te_good[b], tr_good[b]) == (te["agent_0"], tr["agent_0"])
            concat = np.concatenate([o[a] for a in agents]).astype(np.float32)
            assert np.array_equal(s_adv[b * 3 + 2], concat) and np.array_equal(s_good[b], concat)
            done[b] = not d.agents
    assert saw_reset
    assert env.env_steps == 2 * B * 5 + B
    episodes, by_group = env.drain_episodes(), env.drain_group_returns()
    assert len(episodes) == len(by_group["adversaries"]) == len(by_group["good"]) == 2 * B
    for (mean, _), adv, good in zip(episodes, by_group["adversaries"], by_group["good"], strict=True):
        assert mean == pytest.approx((3 * adv + good) / 4)  # the episode's mean over all 4 agents


def test_one_group_returns_what_no_groups_do() -> None:
    with pytest.raises(ValueError, match="Box observation of one shape"):
        ParallelVectorEnv(TAG, 2, seed=1, kwargs=KWARGS)  # mixed spaces need groups
    spread, kw = "mpe2.simple_spread_v3", {"max_cycles": 5}
    plain = ParallelVectorEnv(spread, 2, seed=1, kwargs=kw, state="concat")
    one = ParallelVectorEnv(
        spread, 2, seed=1, kwargs=kw, state="concat", groups={"all": ["agent_0", "agent_1", "agent_2"]}
    )
    for x, y in zip(plain.reset(), one.reset(), strict=True):
        assert np.array_equal(x, y)
    rng = np.random.default_rng(1)
    for _ in range(7):
        action = rng.integers(0, 5, 6)
        for x, y in zip(plain.step(action), one.step(action), strict=True):
            assert np.array_equal(x, y)


def test_group_errors() -> None:
    with pytest.raises(ValueError, match="exactly once"):
        ParallelVectorEnv(TAG, 1, kwargs=KWARGS, groups={"adversaries": GROUPS["adversaries"]})
    with pytest.raises(ValueError, match="one action array per group"):
        env = ParallelVectorEnv(TAG, 1, kwargs=KWARGS, groups=GROUPS)
        env.reset()
        env.step(np.zeros(4, np.int32))


def _small_tag(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "mappo-simple-tag.rl.yaml").read_text())
    data["env"]["num_envs"] = 4
    for learner in ("learner_adv", "learner_good"):
        data["components"][learner]["epochs"] = 2
    data["train"].pop("checkpoint", None)
    path = tmp_path / "tag.rl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(spec: Path, run_dir: Path, *args: object) -> list[dict]:
    cmd = [sys.executable, "-m", "rlgen", "run", spec, "--iterations", 3, "--run-dir", run_dir, "--quiet", *args]
    r = subprocess.run(list(map(str, cmd)), cwd=spec.parent, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_two_group_example_trains_under_single(tmp_path: Path) -> None:
    rows = [r for r in _run(_small_tag(tmp_path), tmp_path / "run") if "mean_return" in r]
    assert rows[-1]["env_steps"] == 3 * 25 * 4
    for group in ("adversaries", "good"):  # each group's learner logs its own metrics and returns
        assert all(math.isfinite(r[f"{group}/value_loss"]) for r in rows)
        returns = [r[f"{group}/return"] for r in rows if f"{group}/return" in r]
        assert returns and all(math.isfinite(x) for x in returns)
