"""Faults and fuzzing of the command line as a user meets it: what held, with the command that
produced the figures, for docs/benchmarks.md.

    .venv/bin/python -m benchmarks.robustness             # everything (44 min with --kills 10, 2 cores at load 12-17)
    .venv/bin/python -m benchmarks.robustness --only fuzz --mutants 1000 --seed 7
    .venv/bin/python -m benchmarks.robustness --seed 7 --dump 17 > m.rl.yaml   # one mutant, to reproduce it

Run from the repository root. Three sections (``--only fuzz,hostile,faults``; ``--faults
killed-rank,full-disk,...`` picks faults by the names the run prints), each in a module of its
own that says what it checks: ``fuzz`` (fuzzed specs validated, built, compiled and run),
``hostile`` (``rlgen validate`` on files that are not specs) and ``faults`` (killed ranks,
SIGTERM, Ctrl-C, a busy run directory, a full disk). ``common`` holds what they share: the
report, the tables, and the processes they start and measure.

Each section prints a table; the end prints one ``figure: value`` line per figure, for the docs
to quote, and the exit status is 1 if any property failed. Runs use a cache directory of their
own (``RLGEN_CACHE_DIR``), so the user's measured speeds are left alone. The machine may be
shared: seconds are only comparable within one run of this script.
"""
