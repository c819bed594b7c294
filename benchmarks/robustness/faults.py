"""``faults``: through the installed ``rlgen`` command, on a copy of
examples/ppo-cartpole.rl.yaml with evaluation and the return target off: rank 1 of
multi-learner (2 workers) SIGKILLed, ``--kills`` times, a random moment after the first
checkpoint (seconds to the launcher's exit, its message, whether it names rank 1, and whether
``--resume`` then finishes the budget); SIGTERM under single and actors-learner (exit 143,
``run.json`` status, a final checkpoint at the last row, a resume), with a second trainer on
the busy run directory meanwhile (exit 2 and its message); a second Ctrl-C (exit 130); a full
disk (a 64 MiB tmpfs, mounted as root; skipped with a note where it cannot be): exit 1, its
message, every metrics row whole, ``run.json`` status; Ctrl-C under central-inference (exit 0,
no rank left). Ctrl-C is sent as a terminal sends it, to the launcher's whole process group;
SIGTERM as a scheduler or ``kill`` sends it, to the launcher.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from .common import (
    PPO,
    Report,
    Run,
    child_env,
    line_of,
    metrics,
    processes_of,
    read_json,
    reap,
    rlgen_now,
    table,
    wait_for,
    yes,
)


def fault_spec(folder: Path, total_steps: int = 10_000_000, checkpoint_every: int = 20000) -> Path:
    """The PPO CartPole example, evaluation and the return target off, a budget and checkpoints
    as given."""
    text = re.sub(r"eval: \{[^}]*\}", "eval: {every: 0}", PPO.read_text())
    text = re.sub(r"stop: \{[^}]*\}", "stop: {}", text)
    text = re.sub(r"checkpoint: \{[^}]*\}", f"checkpoint: {{every: {checkpoint_every}, keep: 3}}", text)
    text = re.sub(r"total_steps: \d+", f"total_steps: {total_steps}", text)
    path = folder / "ppo.rl.yaml"
    path.write_text(text)
    return path


def kill_trial(folder: Path, env: dict, n: int, budget: int, delay: float) -> dict:
    """One multi-learner run (2 workers) whose rank 1 is SIGKILLed ``delay`` seconds after its
    fifth row (and first checkpoint), then resumed to the end of its budget."""
    run_dir = folder / f"run{n}"
    spec = fault_spec(folder, total_steps=budget, checkpoint_every=1024)
    args = [spec, "--policy", "multi-learner", "--workers", 2, "--run-dir", run_dir, "--quiet"]
    run = Run(args, folder, env, f"run{n}")
    try:
        ready = wait_for(run, lambda: len(metrics(run_dir)[0]) >= 5 and any(run_dir.glob("checkpoints/*.index")), 240)
        time.sleep(delay)
        pid_file = run_dir / "ranks" / "1.pid"
        if not ready or run.proc.poll() is not None or not pid_file.is_file():
            code = run.finish(30)
            return {"missed": f"the run ended or stalled first (exit {code}: {line_of(run.err)})"}
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        killed = time.perf_counter()
        code = run.finish(120)
        ended = time.perf_counter() - killed
    finally:
        reap(run_dir)
    err = run.err.strip()
    status = read_json(run_dir / "run.json").get("status")
    resumed = rlgen_now(["run", "--resume", run_dir, "--quiet"], folder, env, 600)
    reap(run_dir)
    last, _ = metrics(run_dir)
    finished = (
        resumed is not None
        and resumed.returncode == 0
        and read_json(run_dir / "run.json").get("status") == "finished"
        and bool(last)
        and last[-1]["env_steps"] == budget
    )
    why = "" if finished else (line_of(resumed.stderr) if resumed is not None else "timed out")
    return {
        "code": code,
        "ended": ended,
        "err": err,
        "named": err.startswith("rlgen run: error: rank 1 died"),
        "one_line": err.count("\n") == 0,
        "status": status,
        "finished": finished,
        "resume_error": why,
    }


def fault_killed_rank(folder: Path, env: dict, report: Report, rows: list, kills: int, seed: int) -> None:
    budget = 8192  # 32 iterations of 256 env steps
    rng = random.Random(seed)
    trials = [kill_trial(folder, env, n, budget, rng.uniform(0.0, 2.0)) for n in range(kills)]
    done = [t for t in trials if "missed" not in t]
    for n, t in enumerate(trials):
        tag = f"killed rank #{n + 1}"
        if "missed" in t:
            rows.append([tag, "missed", t["missed"]])
            continue
        rows.append([f"{tag}: exit, seconds from SIGKILL to exit", f"{t['code']}, {t['ended']:.1f} s", "1, <= 30 s"])
        rows.append([f"{tag}: message", line_of(t["err"], 110), "rlgen run: error: rank 1 died ..."])
        rows.append([f"{tag}: one line, run.json status", f"{yes(t['one_line'])}, {t['status']}", "yes, failed"])
        rows.append(
            [
                f"{tag}: --resume finishes the budget",
                yes(t["finished"]) + (f": {t['resume_error']}" if t["resume_error"] else ""),
                "yes",
            ]
        )
    count = len(done)

    def out_of(key: str) -> str:
        return f"{sum(bool(t[key]) for t in done)}/{count}"

    report.figure("faults.killed_rank.trials", f"{count} ({len(trials) - count} missed)")
    report.figure("faults.killed_rank.exits", " ".join(str(t["code"]) for t in done))
    report.figure("faults.killed_rank.seconds_to_exit_max", f"{max((t['ended'] for t in done), default=0):.1f}")
    report.figure("faults.killed_rank.rank_1_named", out_of("named"))
    report.figure("faults.killed_rank.one_line", out_of("one_line"))
    report.figure("faults.killed_rank.status_failed", f"{sum(t['status'] == 'failed' for t in done)}/{count}")
    report.figure("faults.killed_rank.resume_finishes_budget", out_of("finished"))
    for t in done:
        key = "message" if t["named"] else "message_naming_another_rank"
        report.figure(f"faults.killed_rank.{key}", line_of(t["err"], 200))
    report.check(count == len(trials), f"faults: killed rank: {len(trials) - count} trials missed their moment")
    for n, t in enumerate(done):
        what = f"faults: killed rank #{n + 1}"
        report.check(t["code"] == 1, f"{what}: exit {t['code']}, not 1")
        report.check(t["ended"] <= 30, f"{what}: {t['ended']:.1f} s to the launcher's exit")
        report.check(t["named"] and t["one_line"], f"{what}: message {t['err'][:400]!r}")
        report.check(t["status"] == "failed", f"{what}: run.json status {t['status']}")
        report.check(t["finished"], f"{what}: --resume did not finish the budget ({t['resume_error']})")


def fault_sigterm(folder: Path, env: dict, report: Report, rows: list, policy: str, workers: int) -> None:
    run_dir = folder / "run"
    spec = fault_spec(folder)
    run = Run([spec, "--policy", policy, "--workers", workers, "--run-dir", run_dir], folder, env, "run")
    tag = f"SIGTERM ({policy})"
    try:
        if not wait_for(run, lambda: len(metrics(run_dir)[0]) >= 3, 240):
            code = run.finish(10)
            rows.append([tag, "missed", f"no 3 rows (exit {code}: {line_of(run.err)})"])
            report.check(False, f"faults: {tag}: the run never wrote 3 rows")
            return
        second = rlgen_now(["run", "--resume", run_dir, "--iterations", 2], folder, env, 120)
        run.proc.send_signal(signal.SIGTERM)  # to the launcher, as a scheduler or `kill` sends it
        code = run.finish(180)
    finally:
        reap(run_dir)
    busy_code = second.returncode if second else None
    busy_msg = line_of(second.stderr, 110) if second else "timed out"
    busy_ok = busy_code == 2 and (second.stderr if second else "").startswith(
        f"rlgen run: error: run directory {run_dir} is in use by rlgen run (pid {run.proc.pid} on "
    )
    doc = read_json(run_dir / "run.json")
    state = read_json(run_dir / "state.json")
    last, _ = metrics(run_dir)
    at_last = bool(state) and bool(last) and state.get("env_steps") == last[-1]["env_steps"]
    resume_ok, resume_why = False, "no state.json"
    if state:  # two more iterations from the final checkpoint
        r = rlgen_now(["run", "--resume", run_dir, "--iterations", 2, "--quiet"], folder, env, 600)
        after, _ = metrics(run_dir)
        got = after[-1]["iteration"] if after else None
        resume_ok = r is not None and r.returncode == 0 and got == state["iteration"] + 2
        resume_why = (
            "timed out"
            if r is None
            else f"exit {r.returncode}: {line_of(r.stderr)}"
            if r.returncode
            else f"last row {got}, not {state['iteration'] + 2}"
        )
    reap(run_dir)
    clean = "Traceback" not in run.err
    rows.append([f"busy run directory ({policy}): exit", busy_code, "2"])
    rows.append([f"busy run directory ({policy}): message", busy_msg, "... is in use by rlgen run (pid ..."])
    rows.append([f"{tag}: exit", code, "143"])
    rows.append([f"{tag}: run.json status", doc.get("status"), "terminated"])
    rows.append([f"{tag}: final checkpoint at the last row", yes(at_last), "yes"])
    rows.append([f"{tag}: resume works", yes(resume_ok) + ("" if resume_ok else f" ({resume_why})"), "yes"])
    key = policy.replace("-", "_")
    report.figure(f"faults.busy_run_dir.{key}.exit", busy_code)
    report.figure(f"faults.busy_run_dir.{key}.message", line_of(second.stderr, 200) if second else "timed out")
    report.figure(f"faults.sigterm.{key}.exit", code)
    report.figure(f"faults.sigterm.{key}.status", doc.get("status"))
    report.figure(f"faults.sigterm.{key}.final_checkpoint_at_last_row", yes(at_last))
    report.figure(f"faults.sigterm.{key}.resume_works", yes(resume_ok))
    report.check(busy_ok, f"faults: busy run directory ({policy}): exit {busy_code}, {busy_msg!r}")
    report.check(code == 143 and clean, f"faults: {tag}: exit {code}{'' if clean else ', a traceback'}")
    report.check(doc.get("status") == "terminated", f"faults: {tag}: run.json status {doc.get('status')}")
    report.check(at_last, f"faults: {tag}: the final checkpoint is not at the last row")
    report.check(resume_ok, f"faults: {tag}: resume failed ({resume_why})")


def fault_second_ctrl_c(folder: Path, env: dict, report: Report, rows: list, policy: str, workers: int) -> None:
    run_dir = folder / "run"
    run = Run([fault_spec(folder), "--policy", policy, "--workers", workers, "--run-dir", run_dir], folder, env, "run")
    tag = f"second Ctrl-C ({policy})"
    try:
        if not wait_for(run, lambda: len(metrics(run_dir)[0]) >= 2, 240):
            code = run.finish(10)
            rows.append([tag, "missed", f"no 2 rows (exit {code}: {line_of(run.err)})"])
            report.check(False, f"faults: {tag}: the run never wrote 2 rows")
            return
        run.ctrl_c()
        time.sleep(0.05)
        run.ctrl_c()
        code = run.finish(120)
        time.sleep(1.0)
        left = processes_of(run_dir)
    finally:
        reap(run_dir)
    clean = "Traceback" not in run.err
    rows.append([f"{tag}: exit", code, "130"])
    rows.append([f"{tag}: traceback printed", yes(not clean), "no"])
    rows.append([f"{tag}: processes left 1 s after", len(left), "0"])
    key = policy.replace("-", "_")
    report.figure(f"faults.second_ctrl_c.{key}.exit", code)
    report.figure(f"faults.second_ctrl_c.{key}.processes_left", len(left))
    report.check(code == 130 and clean, f"faults: {tag}: exit {code}{'' if clean else ', a traceback'}")
    report.check(not left, f"faults: {tag}: {len(left)} processes left")


def mount_tmpfs(mount: Path) -> str:
    """Mount a 64 MiB tmpfs at ``mount``: '' or why not."""
    if os.geteuid() != 0:
        return "not root"
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if r.returncode == 0 else (r.stderr.strip() or f"mount exit {r.returncode}")


def fill(mount: Path) -> None:
    """Fill ``mount`` to its last kilobytes (its close fails too: the disk is full)."""
    with contextlib.suppress(OSError), open(mount / "filler", "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * (1 << 20))
        while True:
            f.write(b"\0" * 512)


def fault_full_disk(folder: Path, env: dict, report: Report, rows: list) -> None:
    mount = folder / "disk"
    mount.mkdir()
    why = mount_tmpfs(mount)
    if why:
        rows.append(["full disk", "skipped", f"cannot mount a tmpfs: {why}"])
        report.figure("faults.full_disk", f"skipped (cannot mount a tmpfs: {why})")
        return
    run_dir = mount / "run"
    try:
        run = Run([fault_spec(folder, checkpoint_every=1024), "--run-dir", run_dir, "--quiet"], folder, env, "run")
        try:
            if not wait_for(run, lambda: len(metrics(run_dir)[0]) >= 5, 240):
                code = run.finish(10)
                rows.append(["full disk", "missed", f"no 5 rows (exit {code}: {line_of(run.err)})"])
                report.check(False, "faults: full disk: the run never wrote 5 rows")
                return
            fill(mount)
            code = run.finish(180)
        finally:
            reap(run_dir)
        err = run.err.strip()
        _, whole = metrics(run_dir)
        doc = read_json(run_dir / "run.json")
        (mount / "filler").unlink()
        state = read_json(run_dir / "state.json")
        resumed = None
        if state:
            resumed = rlgen_now(["run", "--resume", run_dir, "--iterations", state["iteration"] + 1, "--quiet"],
                                folder, env, 600)  # fmt: skip
        reap(run_dir)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True, timeout=60)
    resume_ok = resumed is not None and resumed.returncode == 0
    rows.append(["full disk: exit", code, "1"])
    rows.append(["full disk: message", line_of(err, 110), "rlgen run: error: training failed: no space left ..."])
    rows.append(["full disk: message is one line", yes(err.count("\n") == 0), "yes"])
    rows.append(["full disk: every metrics row whole", yes(whole), "yes"])
    rows.append(["full disk: run.json status", doc.get("status"), "failed"])
    rows.append(["full disk: resume once space is freed", yes(resume_ok), "yes"])
    report.figure("faults.full_disk.exit", code)
    report.figure("faults.full_disk.message", line_of(err, 200))
    report.figure("faults.full_disk.rows_whole", yes(whole))
    report.figure("faults.full_disk.status", doc.get("status"))
    report.figure("faults.full_disk.resume_after_freeing", yes(resume_ok))
    report.check(code == 1, f"faults: full disk: exit {code}")
    report.check(
        err.startswith("rlgen run: error: training failed: no space left on the device") and err.count("\n") == 0,
        f"faults: full disk: message {err[:300]!r}",
    )
    report.check(whole, "faults: full disk: a metrics row is cut")
    report.check(doc.get("status") == "failed", f"faults: full disk: run.json status {doc.get('status')}")
    report.check(resume_ok, "faults: full disk: resume after freeing space failed")


def fault_ctrl_c(folder: Path, env: dict, report: Report, rows: list, policy: str, workers: int) -> None:
    run_dir = folder / "run"
    spec = fault_spec(folder)
    run = Run([spec, "--policy", policy, "--workers", workers, "--run-dir", run_dir, "--quiet"], folder, env, "run")
    tag = f"Ctrl-C ({policy} x{workers})"
    try:
        if not wait_for(run, lambda: len(metrics(run_dir)[0]) >= 3, 240):
            code = run.finish(10)
            rows.append([tag, "missed", f"no 3 rows (exit {code}: {line_of(run.err)})"])
            report.check(False, f"faults: {tag}: the run never wrote 3 rows")
            return
        run.ctrl_c()
        code = run.finish(120)
        left_at_exit = processes_of(run_dir)
        time.sleep(5.0)
        left_later = processes_of(run_dir)
    finally:
        reap(run_dir)
    status = read_json(run_dir / "run.json").get("status")
    clean = "Traceback" not in run.err
    rows.append([f"{tag}: exit", code, "0"])
    rows.append([f"{tag}: run.json status", status, "interrupted"])
    rows.append([f"{tag}: processes left at exit / 5 s later", f"{len(left_at_exit)} / {len(left_later)}", "0 / 0"])
    key = policy.replace("-", "_")
    report.figure(f"faults.ctrl_c.{key}.exit", code)
    report.figure(f"faults.ctrl_c.{key}.status", status)
    report.figure(f"faults.ctrl_c.{key}.processes_left_at_exit", len(left_at_exit))
    report.check(code == 0 and clean, f"faults: {tag}: exit {code}{'' if clean else ', a traceback'}")
    report.check(status == "interrupted", f"faults: {tag}: run.json status {status}")
    report.check(not left_at_exit, f"faults: {tag}: {len(left_at_exit)} processes left at exit")


def faults(args: argparse.Namespace, work: Path, report: Report) -> None:
    start = time.perf_counter()
    env = child_env(work / "cache")
    rows: list[list[object]] = []
    steps: list[tuple[str, Callable[..., None], tuple]] = [
        ("killed-rank", fault_killed_rank, (args.kills, args.seed)),
        ("sigterm-single", fault_sigterm, ("single", 1)),
        ("sigterm-actors-learner", fault_sigterm, ("actors-learner", 2)),
        ("second-ctrl-c-single", fault_second_ctrl_c, ("single", 1)),
        ("second-ctrl-c-actors-learner", fault_second_ctrl_c, ("actors-learner", 2)),
        ("full-disk", fault_full_disk, ()),
        ("ctrl-c-central-inference", fault_ctrl_c, ("central-inference", 2)),
    ]
    for name, step, extra in steps:
        if args.faults and name not in args.faults.split(","):
            continue
        folder = work / "faults" / name
        folder.mkdir(parents=True)
        began = time.perf_counter()
        try:
            step(folder, env, report, rows, *extra)
        except Exception as exc:  # noqa: BLE001 - a fault of this script: say it, go on with the next
            rows.append([name, "script error", f"{type(exc).__name__}: {exc}"])
            report.check(False, f"faults: {name}: this script failed: {type(exc).__name__}: {exc}")
        print(f"  [{name}: {time.perf_counter() - began:.0f} s]", flush=True)
    seconds = time.perf_counter() - start
    print("\n== faults: through the installed rlgen command (PPO CartPole, evaluation and stop off)\n")
    table(["what", "got", "expected"], rows)
    print(f"\nsection {seconds:.0f} s")
    report.figure("faults.seconds", f"{seconds:.0f}")
