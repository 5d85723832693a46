#!/usr/bin/env bash
# llama.cpp for `workbench export --target gguf|gguf-lora` and `workbench serve --engine llama-cpp`, built from the
# pinned llama-cpp-python sdist on the package index (its vendor/llama.cpp is a whole llama.cpp): only the
# binaries workbench runs (llama-server, llama-mtmd-cli, llama-quantize; CPU, CUDA where nvidia-smi works), and
# llama.cpp's own converter scripts with the gguf-py they import, into a cache keyed by the version
# (workbench/export/llama_cpp.py finds it there). A second run finds the stamp and returns at once.
#   bash scripts/setup_llama_cpp.sh        (or: bash scripts/setup.sh --llama-cpp)
# WORKBENCH_LLAMA_CPP_HOME overrides the cache (CI sets a new one each run, so it builds from nothing); BUILD_JOBS the parallel compile jobs.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36   # keep equal to workbench/export/llama_cpp.py LLAMA_CPP_PYTHON_VERSION
HOME_DIR=${WORKBENCH_LLAMA_CPP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/workbench/llama.cpp/$VERSION}
STAMP="$HOME_DIR/.complete"
if [ -f "$STAMP" ]; then
  echo "llama.cpp (llama-cpp-python $VERSION) is set up in $HOME_DIR"
  exit 0
fi
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$HOME_DIR"
WORK="$HOME_DIR/src"
mkdir -p "$WORK"
SDIST="$WORK/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$WORK"
fi
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -d "$SRC" ] || tar xzf "$SDIST" -C "$WORK"

CUDA=OFF
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then
  CUDA=ON
fi
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
# Static, so the three binaries run from bin/ alone; no tests, examples, web UI download or HTTPS.
cmake -S "$SRC" -B "$WORK/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DGGML_CUDA=$CUDA -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$WORK/cmake.log"
cmake --build "$WORK/build" -j "${BUILD_JOBS:-2}" --target llama-server llama-mtmd-cli llama-quantize
mkdir -p "$HOME_DIR/bin"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/llama-mtmd-cli" "$WORK/build/bin/llama-quantize" "$HOME_DIR/bin/"
# The converter: its two scripts, the conversion package they import and the vendored gguf-py (newer than PyPI's
# gguf; the scripts put it first on sys.path themselves).
rm -rf "$HOME_DIR/convert"
mkdir -p "$HOME_DIR/convert"
cp -r "$SRC/convert_hf_to_gguf.py" "$SRC/convert_lora_to_gguf.py" "$SRC/conversion" "$SRC/gguf-py" "$HOME_DIR/convert/"
echo "llama-cpp-python $VERSION (vendor/llama.cpp), CUDA=$CUDA" >"$STAMP"
# The sources and the build tree are only needed again for another build.
[ -n "${WORKBENCH_LLAMA_CPP_KEEP_BUILD:-}" ] || rm -rf "$WORK"
echo "llama.cpp (llama-cpp-python $VERSION) is set up in $HOME_DIR"
