"""Faults and fuzzing of the command line as a user meets it: what held, with the command that
produced the figures, for docs/benchmarks.md.

    .venv/bin/python benchmarks/fuzz_faults.py                       # everything (about 15 min on 2 busy cores)
    .venv/bin/python benchmarks/fuzz_faults.py --only fuzz --mutants 1000 --seed 7
    .venv/bin/python benchmarks/fuzz_faults.py --seed 7 --dump 17 > m.rl.yaml   # one mutant, to reproduce it

Three sections (``--only fuzz,hostile,faults``; ``--faults killed-rank,full-disk,...`` picks
faults by the names the run prints):

* ``fuzz``: ``--mutants`` mutants of the examples, made by tests/test_fuzz.py's ``mutate``
  (one to three random edits each, seeded by ``--seed``). Each is validated as the command
  line does it (``rlgen.cli.main(["validate", ...])`` in this process, text and JSON output)
  and through ``rlgen.api.validate_text``; each one that validates is built
  (``rlgen.codegen.build.build``, formatted as ``rlgen build`` writes it) under every policy it
  validates for (each policy's minimum of workers, and one distributed policy with 3), and
  every generated ``.py`` must ``compile()``. Counts internal errors (an exception, or exit 3),
  slow validations (over 5 s), mutants that validate but do not build, and generated files that
  do not compile. Then ``--run-sample`` of the mutants that validate under ``single`` are run
  for real, ``rlgen run MUTANT --policy single --iterations 2`` through the installed command:
  a run must end with exit 0, or with exit 1 or 2 and a message that starts with
  ``rlgen run: error:`` and holds no traceback. Each failure is listed with its edits and the
  command that reproduces it.
* ``hostile``: ``rlgen validate`` on files that are not specs: a FIFO with no writer, a FIFO
  whose writer never writes (rlgen waits ``PIPE_WAIT_S``, 60 s, a constant it does not let a
  user change), ``/dev/zero`` (as a path and as standard input), a 50 MB file (as a path and
  as standard input), lists nested 10,000 deep, a YAML alias bomb ("billion laughs"), a NUL
  byte, a directory, names with control characters (ESC sequences, BEL, a line break) and a
  name with glob characters (``spec[1].rl.yaml``). For each: exit code, first line of output,
  wall seconds and peak RSS (GNU time's ``%M``); flagged: over 5 s (the silent pipe: over its
  wait and 5 s more), over 200 MB, a traceback, an exit code other than the expected one (1:
  a diagnostic about the text; 2: the file cannot be read), or a raw control character
  printed back.
* ``faults``: through the installed ``rlgen`` command, on a copy of
  examples/ppo-cartpole.rl.yaml with evaluation and the return target off: rank 1 of
  multi-learner (2 workers) SIGKILLed, ``--kills`` times, a random moment after the first
  checkpoint (seconds to the launcher's exit, its message, whether it names rank 1, and
  whether ``--resume`` then finishes the budget); SIGTERM under single and actors-learner (exit
  143, ``run.json`` status, a final checkpoint at the last row, a resume), with a second
  trainer on the busy run directory meanwhile (exit 2 and its message); a second Ctrl-C (exit
  130); a full disk (a 64 MiB tmpfs, mounted as root; skipped with a note where it cannot be):
  exit 1, its message, every metrics row whole, ``run.json`` status; Ctrl-C under
  central-inference (exit 0, no rank left). Ctrl-C is sent as a terminal sends it, to the
  launcher's whole process group; SIGTERM as a scheduler or ``kill`` sends it, to the launcher.

Each section prints a table; the end prints one ``figure: value`` line per figure, for the docs
to quote, and the exit status is 1 if any property failed. Runs use a cache directory of their
own (``RLGEN_CACHE_DIR``), so the user's measured speeds are left alone. The machine may be
shared: seconds are only comparable within one run of this script.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RLGEN = Path(sys.executable).with_name("rlgen")  # the installed console script, as a user runs it
GNU_TIME = Path("/usr/bin/time")  # its %M: a command's peak RSS
PPO = ROOT / "examples" / "ppo-cartpole.rl.yaml"
SECTIONS = ("fuzz", "hostile", "faults")
SLOW_S = 5.0  # a validation, or a hostile file, taking longer is flagged
BIG_MB = 200.0  # a hostile file costing more memory is flagged
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # raw control characters a terminal would act on


@dataclass
class Report:
    """The figures and the failed properties of the whole pass."""

    figures: list[tuple[str, object]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def figure(self, name: str, value: object) -> None:
        self.figures.append((name, value))

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failed.append(what)
        return ok


def yes(flag: bool | None) -> str:
    return "n/a" if flag is None else ("yes" if flag else "no")


def line_of(text: str, width: int = 100) -> str:
    """The first non-empty line of ``text``, control characters shown escaped, cut to ``width``."""
    first = next((s.strip() for s in text.splitlines() if s.strip()), "")
    shown = CONTROL.sub(lambda m: ascii(m.group())[1:-1], first)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def table(headers: list[str], rows: list[list[object]]) -> None:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def child_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "RLGEN_CACHE_DIR": str(cache)}


# ---------------------------------------------------------------------------------------------
# fuzz


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
                f"    python benchmarks/fuzz_faults.py --seed {args.seed} --dump {i} > m.rl.yaml && "
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


# ---------------------------------------------------------------------------------------------
# hostile


@dataclass
class Measured:
    code: int | None  # None: killed at the timeout
    out: str
    seconds: float
    rss_mb: float


def measured(cmd: list[str], cwd: Path, env: dict, timeout: float, stdin: Path | None = None) -> Measured:
    """Run ``cmd``: its exit code, output (stderr first), wall seconds and peak RSS. The RSS is
    GNU time's ``%M`` where /usr/bin/time is installed: ``os.wait4``'s figure for a child of this
    process counts this process's own size too (a forked child's memory before its exec)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile() as rss:
        wrapped = [str(GNU_TIME), "-f", "%M", "-o", rss.name, *cmd] if GNU_TIME.exists() else cmd
        with open(stdin or os.devnull, "rb") as feed:
            start = time.perf_counter()
            proc = subprocess.Popen(
                wrapped, cwd=cwd, env=env, stdin=feed, stdout=out, stderr=err, start_new_session=True
            )
        code, usage = None, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() - start > timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, _, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        proc.returncode = code if code is not None else -9  # reaped here: Popen must not wait for it
        err.seek(0)
        out.seek(0)
        text = err.read().decode("utf-8", "replace") + out.read().decode("utf-8", "replace")
        peak = usage.ru_maxrss / 1024
        if GNU_TIME.exists():
            said = Path(rss.name).read_text().split()
            peak = int(said[-1]) / 1024 if said and said[-1].isdigit() else float("nan")
    return Measured(code, text, seconds, peak)


def billion_laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 10):
        lines.append(f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def hostile(args: argparse.Namespace, work: Path, report: Report) -> None:
    from rlgen.dsl.yamlload import PIPE_WAIT_S

    start = time.perf_counter()
    folder = work / "hostile"
    folder.mkdir()
    env = child_env(work / "cache")
    ppo = PPO.read_text()
    big = folder / "big.rl.yaml"
    with open(big, "w") as f:
        line = "# " + "x" * 97 + "\n"
        for _ in range(50 * (1 << 20) // len(line)):
            f.write(line)
    (folder / "deep.rl.yaml").write_text("x: " + "[" * 10_000 + "]" * 10_000 + "\n")
    (folder / "laughs.rl.yaml").write_text(billion_laughs())
    (folder / "nul.rl.yaml").write_text(ppo.replace("name: ppo-cartpole", "name: ppo-\x00cartpole"))
    (folder / "a-directory.rl.yaml").mkdir()
    os.mkfifo(folder / "fifo-no-writer.rl.yaml")
    os.mkfifo(folder / "fifo-silent.rl.yaml")
    gama = ppo.replace("    gamma: 0.98", "    gama: 0.98")  # an error whose message names the file
    odd = "odd\x1b]0;title\x07\x1bc\nname.rl.yaml"  # ESC (a window title, a terminal reset), BEL, a line break
    (folder / odd).write_text(gama)
    (folder / "spec[1].rl.yaml").write_text(gama)  # glob characters in a name that exists

    cases: list[tuple[str, list[str], Path | None, set[int], float, Callable[[Measured], str]]] = []

    def case(
        name: str,
        target: str,
        expect: set[int],
        stdin: Path | None = None,
        limit: float = SLOW_S,
        extra: Callable[[Measured], str] | None = None,
    ) -> None:
        cases.append((name, [str(RLGEN), "validate", target], stdin, expect, limit, extra or (lambda m: "")))

    def no_raw_control(m: Measured) -> str:
        return "a raw control character printed back" if CONTROL.search(m.out.replace("\n", "")) else ""

    # what each should exit with: 1 a diagnostic about the text, 2 the file cannot be read
    case("FIFO, no writer", "fifo-no-writer.rl.yaml", {1})
    case("FIFO, a writer that never writes", "fifo-silent.rl.yaml", {2}, limit=PIPE_WAIT_S + SLOW_S)
    case("/dev/zero", "/dev/zero", {2})
    case("standard input from /dev/zero", "-", {1}, stdin=Path("/dev/zero"))
    case("a 50 MB file", "big.rl.yaml", {1})
    case("standard input from a 50 MB file", "-", {1}, stdin=big)
    case("lists nested 10,000 deep", "deep.rl.yaml", {1})
    case("alias bomb (billion laughs)", "laughs.rl.yaml", {1})
    case("a NUL byte", "nul.rl.yaml", {1})
    case("a directory", "a-directory.rl.yaml", {2})
    case("a name with ESC, BEL, newline", odd, {1}, extra=no_raw_control)
    case("a missing name with ESC sequences", "missing-\x1b[31mred\x1b[0m.rl.yaml", {2}, extra=no_raw_control)
    case("a name with glob characters, spec[1]", "spec[1].rl.yaml", {1})

    rows, flagged = [], []
    for name, cmd, stdin, expect, limit, extra in cases:
        writer = None
        if "never writes" in name:  # this process holds the FIFO open for writing and writes nothing
            writer = os.open(folder / cmd[-1], os.O_RDWR | os.O_NONBLOCK)
        try:
            m = measured(cmd, folder, env, timeout=max(limit, SLOW_S) + 60, stdin=stdin)
        finally:
            if writer is not None:
                os.close(writer)
        flags = []
        if m.code is None:
            flags.append("killed at the timeout")
        elif m.code not in expect:
            flags.append(f"exit {m.code}, not {'/'.join(map(str, sorted(expect)))}")
        if m.seconds > limit:
            flags.append(f"over {limit:.0f} s")
        if m.rss_mb > BIG_MB:
            flags.append(f"over {BIG_MB:.0f} MB")
        if "Traceback" in m.out:
            flags.append("a traceback")
        if why := extra(m):
            flags.append(why)
        rows.append([name, "-" if m.code is None else m.code, f"{m.seconds:.2f}", f"{m.rss_mb:.0f}",
                     ", ".join(flags) or "ok", line_of(m.out, 90)])  # fmt: skip
        if flags:
            flagged.append(f"{name}: {', '.join(flags)}")
        key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        report.figure(f"hostile.{key}", f"exit {m.code}, {m.seconds:.2f} s, {m.rss_mb:.0f} MB" + (
            f", FLAGGED: {', '.join(flags)}" if flags else ""))  # fmt: skip
        report.check(not flags, f"hostile: {name}: {', '.join(flags)}")
    seconds = time.perf_counter() - start
    print(
        f"\n== hostile files: rlgen validate FILE (flagged: over {SLOW_S:.0f} s, over {BIG_MB:.0f} MB peak RSS, "
        "a traceback, an exit other than the one expected; the silent pipe waits rlgen's PIPE_WAIT_S = "
        f"{PIPE_WAIT_S:.0f} s, a constant)\n"
    )
    table(["file", "exit", "s", "MB", "flags", "first line of output"], rows)
    print(f"\nsection {seconds:.0f} s")
    report.figure("hostile.cases", len(cases))
    report.figure("hostile.flagged", len(flagged))
    report.figure("hostile.seconds", f"{seconds:.0f}")


# ---------------------------------------------------------------------------------------------
# faults


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


class Run:
    """One ``rlgen run`` through the installed command, in its own session (as a shell starts a
    job), its output in files."""

    def __init__(self, args: list[str], cwd: Path, env: dict, name: str) -> None:
        self.out_path, self.err_path = cwd / f"{name}.out", cwd / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [str(RLGEN), "run", *map(str, args)], cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True
            )

    @property
    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def ctrl_c(self) -> None:
        """SIGINT to the process group, as a terminal's Ctrl-C sends it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float) -> int | None:
        """The exit code, or None if it had not ended in ``timeout`` seconds (it is then killed)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None


def rlgen_now(args: list, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            [str(RLGEN), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def metrics(run_dir: Path) -> tuple[list[dict], bool]:
    """The metrics rows, and whether every line is a whole row."""
    rows, whole = [], True
    with contextlib.suppress(OSError):
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                whole = False
    return rows, whole


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_for(run: Run, ready: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.proc.poll() is None:
        if ready():
            return True
        time.sleep(0.1)
    return ready() and run.proc.poll() is None


def processes_of(run_dir: Path, plotter: bool = False) -> list[int]:
    """pids of processes whose command line names ``run_dir`` (the launcher, its wrappers, the
    ranks; with ``plotter``, also the detached ``rlgen plot`` that draws a finished run's
    curves.png): all started by this script."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(run_dir).encode() in b" ".join(argv) and (plotter or b"plot" not in argv):
                found.append(int(pid))
    return found


def reap(run_dir: Path) -> None:
    """SIGKILL what is left of a run this script started, one pid at a time."""
    for pid in processes_of(run_dir, plotter=True):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


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


# ---------------------------------------------------------------------------------------------


def git_commit() -> str:
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True)
    except OSError:
        return "unknown"
    return r.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "") if r.returncode == 0 else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--mutants", type=int, default=400, help="mutants to validate and build (default 400)")
    parser.add_argument("--seed", type=int, default=1, help="the mutants' seed (default 1)")
    parser.add_argument("--run-sample", type=int, default=20, help="mutants valid under single to run (default 20)")
    parser.add_argument("--run-timeout", type=float, default=240, help="seconds one mutant's run may take")
    parser.add_argument("--kills", type=int, default=3, help="runs whose rank 1 is killed (default 3)")
    parser.add_argument("--faults", default="", help="only these faults, comma-separated (default: all)")
    parser.add_argument("--dump", type=int, metavar="I", help="print mutant I of --seed's sequence and exit")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (its path is printed)")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # each section's lines as they come, into a file too
    if args.dump is not None:
        edits, text = make_mutants(args.seed, args.dump + 1)[args.dump]
        print(f"# mutant {args.dump}, seed {args.seed}: {edits}", file=sys.stderr)
        sys.stdout.write(text)
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if bad := [s for s in only if s not in SECTIONS]:
        parser.error(f"unknown section(s) {', '.join(bad)}: choose from {', '.join(SECTIONS)}")
    import rlgen

    shown = ["--only", ",".join(only)]
    if "fuzz" in only:
        shown += ["--mutants", str(args.mutants), "--seed", str(args.seed), "--run-sample", str(args.run_sample)]
    if "faults" in only:
        shown += ["--kills", str(args.kills)] + (["--faults", args.faults] if args.faults else [])
    print(
        f"command: python benchmarks/fuzz_faults.py {shlex.join(argv if argv is not None else sys.argv[1:])}".rstrip()
    )
    print(f"settings: {shlex.join(shown)}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}; rlgen {rlgen.__version__} at {Path(rlgen.__file__).parent} "
          f"(commit {git_commit()}); {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    if not RLGEN.exists():
        print(f"the installed rlgen command is missing ({RLGEN}): pip install -e . first", file=sys.stderr)
        return 2
    report = Report()
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="rlgen-fuzz-faults-"))
    try:
        for section in SECTIONS:
            if section in only:
                {"fuzz": fuzz, "hostile": hostile, "faults": faults}[section](args, work, report)
    finally:
        if args.keep:
            print(f"\nwork directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = time.perf_counter() - started
    report.figure("seconds", f"{total:.0f}")
    report.figure("properties_failed", len(report.failed))
    print("\n== figures\n")
    for name, value in report.figures:
        print(f"{name}: {value}")
    if report.failed:
        print("\nfailed:")
        for what in report.failed:
            print(f"  {what}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
