"""``workbench onnx-chat EXPORT_DIR PROMPT``: a greedy answer from an ONNX export through onnxruntime (registered by
workbench.cli.main)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config.arguments import CommandInputError


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "onnx-chat",
        help="greedy chat with an ONNX export (onnxruntime)",
        description="The greedy answer of an ONNX export (`workbench export --target onnx`) to "
        "one user message, through the export's chat template.",
    )
    p.add_argument("export_dir")
    p.add_argument("prompt")
    p.add_argument("--max-tokens", type=int, default=40)
    p.add_argument("--model-file", help="the graph to run (default: the manifest's, else model.onnx)")
    return p


def run(args) -> int:
    from ..export.onnx_runner import MODEL_FILE, OnnxCausalLM

    folder = Path(args.export_dir)
    if not (folder / (args.model_file or MODEL_FILE)).is_file() and not (folder / "manifest.json").is_file():
        raise CommandInputError(f"{args.export_dir} holds no ONNX export")
    print(OnnxCausalLM(args.export_dir, args.model_file).chat(args.prompt, args.max_tokens))
    return 0
