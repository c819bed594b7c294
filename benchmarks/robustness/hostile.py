"""``hostile``: ``rlgen validate`` on files that are not specs: a FIFO with no writer, a FIFO
whose writer never writes (rlgen waits ``PIPE_WAIT_S``, 60 s, a constant it does not let a user
change), ``/dev/zero`` (as a path and as standard input), a 50 MB file (as a path and as
standard input), lists nested 10,000 deep, a YAML alias bomb ("billion laughs"), a NUL byte, a
directory, names with control characters (ESC sequences, BEL, a line break) and a name with
glob characters (``spec[1].rl.yaml``). For each: exit code, first line of output, wall seconds
and peak RSS (GNU time's ``%M``); flagged: over 5 s (the silent pipe: over its wait and 5 s
more), over 200 MB, a traceback, an exit code other than the expected one (1: a diagnostic
about the text; 2: the file cannot be read), or a raw control character printed back.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from .common import CONTROL, PPO, RLGEN, SLOW_S, Measured, Report, child_env, line_of, measured, table

BIG_MB = 200.0  # a hostile file costing more memory is flagged


def billion_laughs() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 10):
        lines.append(f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def hostile(args: argparse.Namespace, work: Path, report: Report) -> None:
    from rlgen.dsl.specfile import PIPE_WAIT_S

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
