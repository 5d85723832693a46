#!/usr/bin/env bash
# Set up Workbench in ./.venv on a fresh machine: the right torch build, the package with its export extra, and
# (with --test) the test tools. Safe to re-run: finished steps are skipped by pip.
#   bash scripts/setup.sh          # to use it
#   bash scripts/setup.sh --test   # to run the test suite too
set -euo pipefail
cd "$(dirname "$0")/.."

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
# DeepSpeed (extra 'distributed') and adbutils (extra 'phone', a real phone) stay optional: asked for without them,
# workbench says in one line what to install.
EXTRAS="[export]"
[ "${1:-}" = "--test" ] && EXTRAS="[export,test]"
# The JupyterLab extension (extensions/jupyterlab: server routes + the prebuilt side panel, no Node needed) in the
# same pip call, so that its "workbench" dependency is this checkout. Its install puts the frontend in
# $VENV/share/jupyter/labextensions and enables the server extension in $VENV/etc/jupyter.
"${PIP[@]}" install -q -e ".$EXTRAS" -e extensions/jupyterlab
echo "workbench is set up in $VENV (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
# JupyterLab defaults for a workbench session (no news prompt, no web fetches): workbench/cli/lab_settings.py
"$VENV/bin/python" -m workbench lab-settings
