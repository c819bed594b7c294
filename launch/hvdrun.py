"""Horovod's own launcher (``horovodrun``), without the 4 seconds it spends before every job
asking whether Horovod was built with Gloo.

``horovodrun --gloo`` checks that Gloo is built before it starts any rank, and it checks by
forking a process that imports ``horovod.tensorflow`` (and so TensorFlow and Keras) to call
one C function: about 4 s of a 2-core machine, serial, before the ranks begin their own
TensorFlow imports, on every distributed run and every ``--policy auto`` measurement
(``python -m cProfile horovodrun --gloo -np 2 python -c pass``: 7.6 of its 8.4 s wait on
that process). The answer cannot change until Horovod or TensorFlow is reinstalled.

``python -m rlgen.launch.hvdrun ARGS`` is ``horovodrun ARGS`` with that one check answered
by :func:`gloo_built`: the same C function (``horovod_gloo_built``), called through ctypes in a
short process that loads TensorFlow's two shared libraries and Horovod's op library, but
not TensorFlow's Python package (0.5 s), once per installation: the answer is kept in the
cache directory under the libraries' paths, sizes and modification times. Where that probe
cannot run, Horovod's own check answers, as it always did. Everything else (argument
parsing, ssh and interface checks, the Gloo rendezvous, rank placement) is horovodrun's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from rlgen.machine import cache_dir

#: The probe: load the op library (TensorFlow's libraries found through LD_LIBRARY_PATH) and
#: print what horovod_gloo_built() returns.
_PROBE = "import ctypes, sys; print(int(ctypes.CDLL(sys.argv[1]).horovod_gloo_built()))"


def _package_dir(name: str) -> Path | None:
    """A package's directory, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _libraries() -> tuple[Path, Path, list[Path]] | None:
    """Horovod's TensorFlow op library, TensorFlow's package directory, and the shared
    libraries there that the op library links to."""
    horovod, tensorflow = _package_dir("horovod"), _package_dir("tensorflow")
    if horovod is None or tensorflow is None:
        return None
    ops = sorted((horovod / "tensorflow").glob("mpi_lib*.so"))
    if not ops:
        return None
    return ops[0], tensorflow, sorted(tensorflow.glob("libtensorflow*.so*"))


def _probe(ops: Path, tf_dir: Path) -> bool | None:
    """``horovod_gloo_built()`` from a short process; None when the probe fails."""
    search = os.pathsep.join(filter(None, [str(tf_dir), os.environ.get("LD_LIBRARY_PATH")]))
    env = {**os.environ, "LD_LIBRARY_PATH": search}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, str(ops)], env=env, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    answer = out.stdout.strip()
    return answer == "1" if out.returncode == 0 and answer in ("0", "1") else None


def gloo_built(verbose: bool = False) -> bool | None:
    """Whether Horovod's TensorFlow ops were built with Gloo: from the cache, else the probe
    (then cached), else Horovod's own check."""
    found = _libraries()
    if found is not None:
        ops, tf_dir, tf_libs = found
        key = [[str(p), (st := p.stat()).st_size, st.st_mtime_ns] for p in (ops, *tf_libs)]
        path = cache_dir() / "horovod-gloo.json"
        try:
            cached = json.loads(path.read_text())
            if cached.get("key") == key:
                return bool(cached["gloo_built"])
        except (OSError, ValueError, KeyError, AttributeError):
            pass
        answer = _probe(ops, tf_dir)
        if answer is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}")
                tmp.write_text(json.dumps({"key": key, "gloo_built": answer}))
                os.replace(tmp, path)
            except OSError:
                pass
            return answer
    from horovod.common import util

    return util.gloo_built(verbose=verbose)


def main(argv: list[str] | None = None) -> int:
    """horovodrun's command line, with :func:`gloo_built` in place of its check."""
    from horovod.runner import launch

    launch.gloo_built = gloo_built
    sys.argv = ["horovodrun", *(sys.argv[1:] if argv is None else argv)]
    return launch.run_commandline() or 0


if __name__ == "__main__":
    sys.exit(main())
