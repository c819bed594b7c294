"""What each command does, apart from how it is asked for: plain request objects in, results or
typed errors (:mod:`.errors`) out; nothing here sees argparse or decides an exit code
(:mod:`rlgen.cli` does both)."""
