"""How an rlgen process sets TensorFlow up before importing it: without what rlgen never uses,
and with XLA's compiled programs kept across runs.

**Keras and matplotlib are not imported** (about 1.3 s less per process).

``import tensorflow`` eagerly imports Keras 3 (``keras.src.optimizers``, which pulls in all of
Keras), and Keras imports ``matplotlib.pyplot`` where matplotlib is installed: 1.3 of the 5.1 s
the import takes on the reference machine (``python -X importtime -c 'import tensorflow'``).
rlgen uses neither in a rank. Both imports are guarded by ``except ImportError`` upstream, so a
finder that declines a module *only while the importing package's own ``__init__`` runs* skips
them:

* ``keras`` while ``tensorflow`` initialises (TensorFlow's eager Keras import; single-process
  runs and ``rlgen eval`` then never load Keras);
* ``matplotlib`` while ``keras`` initialises (Keras' image-gallery helper; ranks still load
  Keras, because ``horovod.tensorflow`` subclasses a Keras layer at import).

Afterwards both import as usual for any code that asks for them (the lazy ``tf.keras``, a
custom env factory, ``rlgen plot``). The spec is the real one, so ``importlib.util.find_spec``
still locates Keras for TensorFlow's ``tf.keras`` wiring.

**XLA's persistent compile cache** (TensorFlow's ``--tf_xla_persistent_cache_directory``):
the first call of every ``jit_compile`` step (the PPO update, the in-graph rollout) compiles
for 1-2 s per function here, in every run; with the cache only the first run on this machine
does, and later runs load the program. TensorFlow keys an entry by the function's signature
and the fingerprint of its HLO program and checks the program on load, so a changed network,
batch or hyper-parameter compiles anew. What the fingerprint does not cover is kept apart by
directory: :func:`xla_cache_dir` is keyed by the TensorFlow version, the CPU (model and
feature flags: XLA compiles for the host's instructions) and any ``XLA_FLAGS`` /
``TF_XLA_FLAGS`` the user set, so that a cached program is always the one a fresh compile
would produce (``tests/test_run_e2e.py`` runs the same seed with an empty and a filled
cache and compares). Entries unused for :data:`XLA_CACHE_DAYS` days are removed, and the
oldest while a directory holds more than :data:`XLA_CACHE_BYTES`.
``RLGEN_XLA_CACHE=0`` turns the cache off; a ``TF_XLA_FLAGS`` that already names a cache
directory is left as it is.

**TensorFlow's native log lines at import stay off the user's terminal.** On some CPUs
(AVX-512 ones among them) TensorFlow's libraries write an absl warning ("All log messages
before absl::InitializeLog() is called are written to STDERR") and a oneDNN notice to file
descriptor 2 while ``import tensorflow`` runs, once per library that carries its own absl:
``TF_CPP_MIN_LOG_LEVEL`` filters neither. So the import runs with descriptor 2 pointed at a
temporary file (:class:`_Quiet`); afterwards what was written goes to ``$RLGEN_TF_LOG`` (the
run's ``ranks/launch.log``, where the launcher names one) or nowhere, and to the terminal as
it was if the import failed (it is the reason). ``RLGEN_DEBUG=1`` or ``RLGEN_TF_VERBOSE=1``
(``rlgen run --verbose``) leave descriptor 2 alone. ``TF_CPP_MIN_LOG_LEVEL`` defaults to 2
here too, for what TensorFlow logs later, for every process rlgen starts.

**Temporary files of a TensorFlow process go with it.** Autograph writes the source of every
function it converts to a temporary file and deletes it in an exit handler, which a process
ending with ``os._exit`` (rlgen's commands and its evaluator, to skip TensorFlow's 0.6 s
teardown) never runs: a few files were left in ``/tmp`` by every run. So when ``tensorflow`` is
about to load, the process takes a temporary directory of its own (``tempfile.tempdir``), and
:func:`fast_exit` removes it before ``os._exit``; a normal exit removes it too. A forked child
(the evaluator) takes its own with :func:`own_temporary_directory` and never removes its
parent's.

All of this is installed by ``rlgen.runtime``'s ``__init__``, which every generated rank and
every command that runs TensorFlow imports before TensorFlow. ``RLGEN_TF_KERAS=1`` leaves the
Keras and matplotlib imports alone.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from rlgen.machine import cache_dir, cpu, gpu_models, tensorflow_version

#: Cached XLA programs not used (modified) for this many days are removed.
XLA_CACHE_DAYS = 30
#: At most this many bytes of cached programs per directory (the oldest go first); a PPO update
#: for a small network is about 1 MB.
XLA_CACHE_BYTES = 1 << 30
_XLA_FLAG = "--tf_xla_persistent_cache_directory"
_OURS = "RLGEN_XLA_CACHE_SET"  # the directory this module added to TF_XLA_FLAGS (not the user)

# module declined -> the package whose initialisation it is declined during
DECLINED_DURING = {"keras": "tensorflow", "matplotlib": "keras"}


class _Declined(importlib.abc.Loader):
    def __init__(self, name: str, during: str) -> None:
        self.name, self.during = name, during

    def create_module(self, spec):  # noqa: ANN001, ANN201 (loader protocol)
        return None

    def exec_module(self, module):  # noqa: ANN001, ANN201 (loader protocol)
        raise ImportError(f"{self.name} is not imported while {self.during} initialises (RLGEN_TF_KERAS=1 allows it)")


#: Where the native lines TensorFlow's import writes go (a file, appended to); unset: nowhere.
TF_LOG_ENV = "RLGEN_TF_LOG"


def verbose() -> bool:
    """TensorFlow's native lines are shown where they are written (``RLGEN_DEBUG``, ``rlgen run --verbose``)."""
    return bool(os.environ.get("RLGEN_DEBUG")) or os.environ.get("RLGEN_TF_VERBOSE") == "1"


class _Quiet(importlib.abc.Loader):
    """``tensorflow``'s own loader, run with file descriptor 2 pointed at a temporary file (see
    the module docstring); every other attribute is the real loader's."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def __getattr__(self, name: str):  # noqa: ANN204 - the real loader's resource readers and the like
        return getattr(self.real, name)

    def create_module(self, spec):  # noqa: ANN001, ANN201 (loader protocol)
        return self.real.create_module(spec)

    def exec_module(self, module):  # noqa: ANN001, ANN201 (loader protocol)
        with native_stderr_aside(os.environ.get(TF_LOG_ENV)):
            self.real.exec_module(module)


@contextlib.contextmanager
def native_stderr_aside(log: str | None, replay_on_error: bool = True) -> Iterator[None]:
    """Run the body with file descriptor 2 pointed at a temporary file; then append what was
    written to ``log`` (or drop it), or, if the body raised and ``replay_on_error``, write it to
    descriptor 2 as it was. Under ``RLGEN_DEBUG=1`` or ``RLGEN_TF_VERBOSE=1``, just the body."""
    if verbose():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            with contextlib.suppress(ValueError, OSError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            aside.seek(0)
            text = aside.read()
            if text and failed and replay_on_error:
                os.write(2, text)
            elif text and log:
                with contextlib.suppress(OSError), open(log, "ab") as out:
                    out.write(text)


class _BeforeTensorFlow(importlib.abc.MetaPathFinder):
    """Sees every import first: sets XLA's cache and TensorFlow's log level up when
    ``tensorflow`` is about to load (so that a process that never imports it, ``rlgen
    validate``, never pays for that) and runs that import with its native log lines aside, and
    declines :data:`DECLINED_DURING` while their importers initialise."""

    def __init__(self, skip: bool) -> None:
        self.skip, self.prepared = skip, False

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 (finder protocol)
        if fullname == "tensorflow" and not self.prepared:
            self.prepared = True
            own_temporary_directory()
            _prepare_xla_cache()
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            if verbose():
                return None
            real = importlib.machinery.PathFinder.find_spec(fullname, path)
            if real is not None and real.loader is not None:
                real.loader = _Quiet(real.loader)
            return real
        during = DECLINED_DURING.get(fullname) if self.skip else None
        if during is None:
            return None
        spec = getattr(sys.modules.get(during), "__spec__", None)
        if spec is None or not getattr(spec, "_initializing", False):
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is not None:
            real.loader = _Declined(fullname, during)
        return real


_TEMPORARY: dict[int, str] = {}  # process id -> the temporary directory it made for itself


def own_temporary_directory() -> str:
    """This process's own temporary directory (made once per process), as ``tempfile``'s
    default; removed by :func:`fast_exit` or at a normal exit, by this process only."""
    pid = os.getpid()
    if pid not in _TEMPORARY:
        _TEMPORARY[pid] = tempfile.mkdtemp(prefix="rlgen-tmp-")
        atexit.register(_remove_temporary, pid)
    tempfile.tempdir = _TEMPORARY[pid]
    return _TEMPORARY[pid]


def _remove_temporary(pid: int) -> None:
    if pid == os.getpid() and pid in _TEMPORARY:  # never a parent's, from a forked child
        shutil.rmtree(_TEMPORARY.pop(pid), ignore_errors=True)


def fast_exit(code: int) -> NoReturn:
    """``os._exit(code)`` (no exit handlers, no TensorFlow teardown) after removing this
    process's own temporary directory."""
    _remove_temporary(os.getpid())
    os._exit(code)


def install() -> None:
    """The finder first on ``sys.meta_path`` (once; nothing once TensorFlow is imported)."""
    if "tensorflow" in sys.modules or any(isinstance(f, _BeforeTensorFlow) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _BeforeTensorFlow(skip=os.environ.get("RLGEN_TF_KERAS") != "1"))


def _prepare_xla_cache() -> None:
    # a parent rlgen process's cache flag is inherited by its children (ranks, possibly on other
    # hosts, tests' subprocesses): each process keys its own directory
    inherited = os.environ.pop(_OURS, None)
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if inherited:
        flags = " ".join(f for f in flags.split() if f != f"{_XLA_FLAG}={inherited}")
        os.environ["TF_XLA_FLAGS"] = flags
    if os.environ.get("RLGEN_XLA_CACHE", "1") != "0" and _XLA_FLAG not in flags:
        enable_xla_cache(xla_cache_dir())


def xla_cache_dir() -> Path:
    """``<cache>/xla/<key>``: one directory per TensorFlow version, CPU, GPU models and user XLA flags."""
    model, flags = cpu()
    key = {
        "tensorflow": tensorflow_version(),
        "cpu": model,
        "cpu_flags": flags,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "TF_XLA_FLAGS": os.environ.get("TF_XLA_FLAGS", ""),
    }
    gpus = gpu_models()
    if gpus:  # only where there are GPUs: CPU machines keep their cache
        key["gpu"] = gpus
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "xla" / f"tf{key['tensorflow'] or 'unknown'}-{digest}"


def enable_xla_cache(directory: str | os.PathLike[str]) -> None:
    """Keep XLA-compiled programs in ``directory`` and reuse them in later runs (set before
    TensorFlow compiles anything). Entries unused for :data:`XLA_CACHE_DAYS` days go, and the
    oldest go while the directory holds more than :data:`XLA_CACHE_BYTES`."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        _prune(path)
    except OSError:  # an unwritable cache costs the compile time, never the run
        return
    os.environ["TF_XLA_FLAGS"] = f"{os.environ.get('TF_XLA_FLAGS', '')} {_XLA_FLAG}={path}".strip()
    os.environ[_OURS] = str(path)


def _prune(path: Path) -> None:
    horizon = time.time() - XLA_CACHE_DAYS * 86400
    entries = []
    for entry in os.scandir(path):
        if entry.is_file():
            st = entry.stat()
            entries.append((st.st_mtime, st.st_size, Path(entry.path)))
    entries.sort()
    total = sum(size for _, size, _ in entries)
    for mtime, size, file in entries:
        if mtime >= horizon and total <= XLA_CACHE_BYTES:
            break
        file.unlink(missing_ok=True)
        total -= size
