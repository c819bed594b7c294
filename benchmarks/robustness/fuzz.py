"""``fuzz``: ``--mutants`` mutants of the examples, made by tests/test_fuzz.py's ``mutate``
(one to three random edits each, seeded by ``--seed``). Each is validated as the command line
does it (``rlgen.cli.main(["validate", ...])`` in this process, text and JSON output) and
through ``rlgen.api.validate_text``; each one that validates is built
(``rlgen.codegen.build.build``, formatted as ``rlgen build`` writes it) under every policy it
validates for (each policy's minimum of workers, and one distributed policy with 3), and every
generated ``.py`` must ``compile()``. Counts internal errors (an exception, or exit 3), slow
validations (over 5 s), mutants that validate but do not build, and generated files that do
not compile. Then ``--run-sample`` of the mutants that validate under ``single`` are run for
real, ``rlgen run MUTANT --policy single --iterations 2`` through the installed command: a run
must end with exit 0, or with exit 1 or 2 and a message that starts with ``rlgen run: error:``
and holds no traceback. Each failure is listed with its edits and the command that reproduces
it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .common import RLGEN, ROOT, SLOW_S, Report, child_env, line_of, table


def fuzz_module():
    """tests/test_fuzz.py, imported (its ``mutate`` and the loop that applies it are used as
    they are: the fuzzer is not duplicated here)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import test_fuzz

    return test_fuzz


def make_mutants(seed: int, count: int) -> list[tuple[str, str]]:
    """``count`` mutants, (edits, text): test_fuzz's own sequence under ``seed`` (mutant ``i``
    depends on the seed only, not on the count)."""
    tf = fuzz_module()
    saved = tf.SEED, tf.MUTANTS
    tf.SEED, tf.MUTANTS = seed, count
    try:
        return list(tf.mutants())
    finally:
        tf.SEED, tf.MUTANTS = saved


def cli_validate(args: list[str]) -> tuple[int | None, str, float]:
    """``rlgen validate ARGS`` in this process: (exit code, or None for an exception; what it
    printed, or the exception; seconds)."""
    from rlgen.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["validate", *args])
    except SystemExit as exc:  # argparse's own exits
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001 - the property: nothing escapes the command
        return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - start
    return code, out.getvalue() + err.getvalue(), time.perf_counter() - start


def run_mutant(path: Path, run_dir: Path, cwd: Path, env: dict, timeout: float) -> tuple[str, str, float]:
    """``rlgen run MUTANT --policy single --iterations 2``: (verdict, why, seconds); verdict is
    ``ok``, ``clean error``, ``failed`` or ``timeout``."""
    cmd = [str(RLGEN), "run", str(path), "--policy", "single", "--iterations", "2", "--run-dir", str(run_dir)]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", f"no end in {timeout:.0f} s", time.perf_counter() - start
    took = time.perf_counter() - start
    message = err.strip()
    if proc.returncode == 0:
        return "ok", "", took
    if "Traceback" in err:
        return "failed", f"exit {proc.returncode}, a traceback: {line_of(err.split('Traceback')[-1])}", took
    if proc.returncode in (1, 2) and message.startswith("rlgen run: error:"):
        return "clean error", line_of(message), took
    return "failed", f"exit {proc.returncode}: {line_of(message) or '(nothing on stderr)'}", took


def fuzz(args: argparse.Namespace, work: Path, report: Report) -> None:
    from rlgen.api import validate_text
    from rlgen.codegen.build import build
    from rlgen.codegen.policies import POLICIES

    start = time.perf_counter()
    tf = fuzz_module()
    mutants = make_mutants(args.seed, args.mutants)
    rng = random.Random(args.seed)
    folder = work / "mutants"
    folder.mkdir()
    internal, slow, broken, uncompiled, disagree, singles = [], [], [], [], [], []
    valid = builds = 0
    slowest = 0.0
    for i, (edits, text) in enumerate(mutants):
        path = folder / f"m{i}.rl.yaml"
        path.write_text(text, encoding="utf-8")
        verdicts = set()
        for fmt in ("text", "json"):
            code, said, took = cli_validate([str(path), "--format", fmt])
            slowest = max(slowest, took)
            if took > SLOW_S:
                slow.append(f"#{i} {edits}: validate --format {fmt} took {took:.1f} s")
            if code is None or code == 3:
                internal.append(f"#{i} {edits}: rlgen validate --format {fmt}: {line_of(said, 160)}")
            verdicts.add(code)
        try:
            result = validate_text(text, "mutant.rl.yaml")
        except Exception as exc:  # noqa: BLE001 - the property: nothing escapes validate
            internal.append(f"#{i} {edits}: validate_text: {type(exc).__name__}: {exc}"[:200])
            continue
        if verdicts <= {0, 1} and verdicts != {0 if result.ok else 1}:
            disagree.append(f"#{i} {edits}: rlgen validate exits {sorted(verdicts)}, the api says ok={result.ok}")
        if not result.ok:
            continue
        valid += 1
        targets = [(p, None) for p in POLICIES] + [(rng.choice([p for p in POLICIES if p != "single"]), 3)]
        for policy, workers in targets:
            where = f"[{policy} x{workers or 'min'}]"
            try:
                res = validate_text(text, "mutant.rl.yaml", policy=policy, workers=workers)
            except Exception as exc:  # noqa: BLE001
                internal.append(f"#{i} {edits} {where}: validate_text: {type(exc).__name__}: {exc}"[:200])
                continue
            if not res.ok:
                continue
            if policy == "single" and i not in singles:
                singles.append(i)
            try:
                out = build(res)
            except Exception as exc:  # noqa: BLE001 - the property: what validates, builds
                broken.append(f"#{i} {edits} {where}: {type(exc).__name__}: {exc}"[:240])
                continue
            builds += 1
            for rel, source in out.files.items():
                if rel.endswith(".py"):
                    try:
                        compile(source, rel, "exec")
                    except (SyntaxError, ValueError) as exc:
                        uncompiled.append(f"#{i} {edits} {where} {rel}: {exc}")
    checked = time.perf_counter() - start

    sample = sorted(rng.sample(singles, min(args.run_sample, len(singles))))
    shutil.copy(ROOT / "examples" / "custom_nets.py", folder)  # custom-network's own module, beside it
    env = child_env(work / "cache")
    runs: list[tuple[int, str, str, float]] = []
    for i in sample:
        verdict, why, took = run_mutant(
            folder / f"m{i}.rl.yaml", work / "runs" / f"m{i}", folder, env, args.run_timeout
        )
        runs.append((i, verdict, why, took))
    seconds = time.perf_counter() - start

    print(f"\n== fuzz: {args.mutants} mutants of {len(tf.EXAMPLES)} examples, seed {args.seed}\n")
    failed_runs = [r for r in runs if r[1] in ("failed", "timeout")]
    table(
        ["what", "count"],
        [
            ["mutants", len(mutants)],
            ["valid (as written)", valid],
            ["validate: internal errors (exception or exit 3)", len(internal)],
            [f"validate: slower than {SLOW_S:.0f} s", len(slow)],
            ["validate: rlgen validate and the api disagree", len(disagree)],
            ["builds (valid mutant x policy)", builds],
            ["validate OK, build fails", len(broken)],
            ["generated files that do not compile", len(uncompiled)],
            ["mutants valid under single", len(singles)],
            ["runs tried", len(runs)],
            ["runs: finished (exit 0)", sum(r[1] == "ok" for r in runs)],
            ["runs: clean error (exit 1/2, 'rlgen run: error:')", sum(r[1] == "clean error" for r in runs)],
            ["runs: failed (exit 3, traceback, other message)", sum(r[1] == "failed" for r in runs)],
            [f"runs: timed out ({args.run_timeout:.0f} s)", sum(r[1] == "timeout" for r in runs)],
        ],
    )
    print(f"\nslowest validate {slowest:.2f} s; validate+build of all mutants {checked:.0f} s; section {seconds:.0f} s")
    if runs:
        print("\nruns (rlgen run MUTANT --policy single --iterations 2):")
        table(
            ["mutant", "verdict", "s", "edits / message"],
            [[f"#{i}", v, f"{t:.1f}", f"{mutants[i][0]}" + (f" -> {why}" if why else "")] for i, v, why, t in runs],
        )
    problems = [
        ("internal errors", internal),
        ("slow validations", slow),
        ("cli/api disagreements", disagree),
        ("validate OK, build fails", broken),
        ("files that do not compile", uncompiled),
    ]
    for title, items in problems:
        if items:
            print(f"\n{title}:")
            for item in items:
                print(f"  {item}")
    if failed_runs:
        print("\nrun failures, each with its reproducer:")
        for i, verdict, why, _ in failed_runs:
            print(f"  #{i} {mutants[i][0]} -> {verdict}: {why}")
            print(
                f"    python -m benchmarks.robustness --seed {args.seed} --dump {i} > m.rl.yaml && "
                "rlgen run m.rl.yaml --policy single --iterations 2"
            )

    report.figure("fuzz.mutants", len(mutants))
    report.figure("fuzz.seed", args.seed)
    report.figure("fuzz.valid", valid)
    report.figure("fuzz.validate_internal_errors", len(internal))
    report.figure("fuzz.validate_slow", len(slow))
    report.figure("fuzz.validate_slowest_s", f"{slowest:.2f}")
    report.figure("fuzz.cli_api_disagreements", len(disagree))
    report.figure("fuzz.builds", builds)
    report.figure("fuzz.validate_ok_build_fails", len(broken))
    report.figure("fuzz.compile_failures", len(uncompiled))
    report.figure("fuzz.runs_tried", len(runs))
    report.figure("fuzz.runs_clean", sum(r[1] in ("ok", "clean error") for r in runs))
    report.figure("fuzz.runs_finished", sum(r[1] == "ok" for r in runs))
    report.figure("fuzz.runs_failed", sum(r[1] == "failed" for r in runs))
    report.figure("fuzz.runs_timed_out", sum(r[1] == "timeout" for r in runs))
    report.figure("fuzz.seconds", f"{seconds:.0f}")
    report.check(not internal, f"fuzz: {len(internal)} internal errors in validate")
    report.check(not slow, f"fuzz: {len(slow)} validations over {SLOW_S:.0f} s")
    report.check(not disagree, f"fuzz: {len(disagree)} cli/api disagreements")
    report.check(not broken, f"fuzz: {len(broken)} builds failed after validate said ok")
    report.check(not uncompiled, f"fuzz: {len(uncompiled)} generated files do not compile")
    report.check(not failed_runs, f"fuzz: {len(failed_runs)} runs ended without a clean error")
