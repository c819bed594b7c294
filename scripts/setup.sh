#!/usr/bin/env bash
# Install rlgen and everything it needs into ./.venv, idempotently.
#
#   scripts/setup.sh          install only
#   scripts/setup.sh main     install, then build + train the example (single policy)
#   scripts/setup.sh test     install, then run the test suite
#
# Horovod 0.28.1 ships only as an sdist that does not compile against
# TensorFlow >= 2.16 as shipped (its optional XLA op includes moved headers).
# We build it once without that op and cache the wheel in
# ${RLGEN_WHEEL_CACHE:-~/.cache/rlgen/wheels}; later installs reuse it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
VENV="${RLGEN_VENV:-$ROOT/.venv}"
CACHE="${RLGEN_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlgen/wheels}"
HOROVOD_VERSION=0.28.1
TF_PACKAGE="${RLGEN_TF_PACKAGE:-tensorflow-cpu==2.21.0}"

log() { printf '[setup] %s\n' "$*" >&2; }

command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
  || { log "rlgen needs Python 3.11 (set PYTHON=/path/to/python3.11)"; exit 2; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check -q)

stamp="$VENV/.rlgen-deps-$(sha256sum "$ROOT/setup.cfg" "$0" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  log "installing TensorFlow and dependencies ($TF_PACKAGE)"
  "${PIP[@]}" install --upgrade pip setuptools wheel
  # tensorflow-cpu 2.21 no longer pulls in TensorBoard, which writes the run's event files.
  "${PIP[@]}" install "$TF_PACKAGE" tensorboard==2.21.0 cmake packaging
fi

# --- Horovod: build once, cache the wheel -----------------------------------
if ! "$PY" -c "import horovod.tensorflow" >/dev/null 2>&1; then
  mkdir -p "$CACHE"
  wheel="$(ls "$CACHE"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
  if [ -z "$wheel" ]; then
    log "building Horovod $HOROVOD_VERSION against TensorFlow (about 7 minutes on 2 cores, once)"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    "${PIP[@]}" download --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
    tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
    src="$work/horovod-$HOROVOD_VERSION"
    # Drop the optional XLA op, whose includes moved in TF 2.16+.
    sed -i '/xla_mpi_ops\.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
      HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo \
      MAKEFLAGS="-j$(nproc)" \
      "$PY" -m pip wheel --no-build-isolation --no-deps -w "$work/dist" "$src" >"$work/build.log" 2>&1 \
      || { tail -n 60 "$work/build.log" >&2; log "Horovod build failed (log above)"; exit 1; }
    cp "$work"/dist/horovod-*.whl "$CACHE"/
    wheel="$(ls "$CACHE"/horovod-"$HOROVOD_VERSION"-*.whl | head -n1)"
  else
    log "reusing cached Horovod wheel $(basename "$wheel")"
  fi
  "${PIP[@]}" install --no-deps "$wheel"
  "${PIP[@]}" install cloudpickle psutil pyyaml packaging  # Horovod's runtime deps
fi

if [ ! -f "$stamp" ]; then
  # Not the envpool extra (`backend: envpool`): envpool 1.2.5 pulls in about 600 MB of assets for
  # its other suites; `pip install -e '.[envpool]'` adds it, and its tests skip without it.
  log "installing rlgen (editable) with the test, mujoco, box2d, marl, atari, plot, completion, video and tune extras"
  "${PIP[@]}" install -e "$ROOT[test,mujoco,box2d,marl,atari,plot,completion,video,tune]"
  rm -f "$VENV"/.rlgen-deps-*
  touch "$stamp"
fi

# Graphviz draws `rlgen graph --format svg|png` (everything else works without it).
if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing Graphviz (apt-get install graphviz) for rlgen graph --format svg|png"
    apt-get install -y -q graphviz >/dev/null 2>&1 \
      || log "could not install Graphviz; rlgen graph --format dot still works (install graphviz to draw)"
  else
    log "note: rlgen graph --format svg|png needs Graphviz (apt-get install graphviz, brew install graphviz)"
  fi
fi

case "${1:-}" in
  "") log "done: activate with 'source $VENV/bin/activate'" ;;
  main)
    shift
    # The main job: validate every example, then build and train the PPO CartPole
    # example under the embedded default policy (`single`, in this process).
    cd "$ROOT"
    "$VENV/bin/rlgen" validate examples/*.rl.yaml
    exec "$VENV/bin/rlgen" run examples/ppo-cartpole.rl.yaml "$@"
    ;;
  test) shift; cd "$ROOT"; exec "$PY" -m pytest tests "$@" ;;
  *) log "unknown command '$1' (use: main | test)"; exit 2 ;;
esac
