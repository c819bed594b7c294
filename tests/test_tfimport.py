"""rlgen.runtime.tfimport: TensorFlow without Keras, and XLA's compile cache keyed per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

PROBE = """
import json, os, sys
import rlgen.runtime
before = os.environ.get("TF_XLA_FLAGS")
import tensorflow as tf
loaded = "keras" in sys.modules
dense = tf.keras.layers.Dense(3)(tf.ones((1, 2))).shape.as_list()  # the lazy tf.keras still works
print(json.dumps({"before": before, "flags": os.environ.get("TF_XLA_FLAGS"), "keras_at_import": loaded,
                  "dense": dense, "matplotlib": "matplotlib" in sys.modules}))
"""


def probe(**env: str) -> dict:
    inherited = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "RLGEN_XLA_CACHE_SET")}
    full = {**inherited, **env}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


def test_tensorflow_loads_without_keras_which_still_imports_on_demand(tmp_path):
    out = probe(RLGEN_CACHE_DIR=str(tmp_path))
    assert out["keras_at_import"] is False and out["dense"] == [1, 3]
    assert out["matplotlib"] is False  # Keras' own import skipped matplotlib too
    assert probe(RLGEN_CACHE_DIR=str(tmp_path), RLGEN_TF_KERAS="1")["keras_at_import"] is True


def test_the_xla_cache_is_set_when_tensorflow_loads_and_keyed_by_each_process(tmp_path):
    out = probe(RLGEN_CACHE_DIR=str(tmp_path / "a"))
    assert out["before"] is None  # nothing is computed for a process that never loads TensorFlow
    (flag,) = out["flags"].split()
    directory = Path(flag.split("=", 1)[1])
    assert directory.parent == tmp_path / "a" / "xla" and directory.is_dir()
    # a child inherits its parent's flag: it replaces it with its own (here: another cache root)
    inherited = {"TF_XLA_FLAGS": f"--tf_xla_auto_jit=0 {flag}", "RLGEN_XLA_CACHE_SET": str(directory)}
    child = probe(RLGEN_CACHE_DIR=str(tmp_path / "b"), **inherited)["flags"].split()
    assert child[0] == "--tf_xla_auto_jit=0"
    assert child[1].startswith(f"--tf_xla_persistent_cache_directory={tmp_path}/b/")
    assert child[1] != flag.replace("/a/", "/b/")  # the user's own XLA flags are part of the key
    # a cache directory the user chose is kept; RLGEN_XLA_CACHE=0 adds none
    assert probe(TF_XLA_FLAGS=f"{flag}")["flags"] == flag
    assert probe(RLGEN_CACHE_DIR=str(tmp_path / "c"), RLGEN_XLA_CACHE="0")["flags"] is None


def test_the_xla_cache_forgets_old_entries_and_keeps_under_its_size(tmp_path, monkeypatch):
    from rlgen.runtime import tfimport

    monkeypatch.setattr(tfimport, "XLA_CACHE_BYTES", 3000)
    now = time.time()
    ages_days = {"stale": 40, "old": 3, "older": 5, "new": 0, "newer": 0.1}
    for name, days in ages_days.items():
        path = tmp_path / name
        path.write_bytes(b"x" * 1000)
        os.utime(path, (now - days * 86400, now - days * 86400))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    monkeypatch.delenv("RLGEN_XLA_CACHE_SET", raising=False)
    tfimport.enable_xla_cache(tmp_path)
    # past 30 days goes; then the oldest until 3000 bytes are left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "newer", "old"]
    assert os.environ["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path}"
