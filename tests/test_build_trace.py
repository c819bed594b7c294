"""Every generated module imports, and every ``tf.function`` traces with its declared signature."""

from __future__ import annotations

import importlib
import sys

import pytest

tf = pytest.importorskip("tensorflow")

from buildcases import CASES, IDS, build_importable  # noqa: E402

from conftest import ROOT  # noqa: E402


@pytest.fixture(scope="module")
def horovod():
    hvd = pytest.importorskip("horovod.tensorflow")
    hvd.init()
    return hvd


@pytest.mark.parametrize(("example", "policy", "workers"), CASES, ids=IDS)
def test_generated_modules_import_and_trace(example, policy, workers, tmp_path, monkeypatch, horovod):
    name = example.name.removesuffix(".rl.yaml").replace("-", "_")
    unique = f"rlgen_trace_{name}_{policy.replace('-', '_')}"
    unique, done = build_importable(example, policy, workers, tmp_path / "build", unique, monkeypatch)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # custom_nets, as `rlgen run` would need
    try:
        main = importlib.import_module(f"{unique}.main")
        assert set(main.RUNNERS) == {r.role for r in done.fdg.ranks}
        traced = 0
        for frag in done.fdg.fragments:
            module = importlib.import_module(f"{unique}.{frag.name}")
            cls = getattr(module, "".join(p.capitalize() for p in frag.name.split("_")) + "Fragment")
            if frag.kind == "env":
                assert hasattr(cls, "__init__")  # env workers need gymnasium only at run time
                continue
            instance = cls(0)
            assert instance.weights(), "a compute fragment holds network variables"
            for step in frag.steps:
                fn = getattr(instance, step.name)
                if step.kind == "compute":
                    concrete = fn.get_concrete_function()
                    assert len(concrete.structured_input_signature[0]) == len(fn.input_signature)
                    assert isinstance(fn.function, tf.types.experimental.PolymorphicFunction)
                    traced += 1
        assert traced == sum(s.kind == "compute" for f in done.fdg.fragments for s in f.steps)
    finally:
        for name in [m for m in sys.modules if m.startswith(unique)]:
            del sys.modules[name]
