"""``workbench export RUN --target merged|int8|onnx|onnx-int8|gguf`` and ``workbench export --verify EXPORT_DIR``.

Exit codes: 0 exported (or verified), 1 the export failed its parity gate (the figures are printed and
kept in OUT.failed/manifest.json), 2 bad input (missing run, no adapter, unsupported target or option).
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .targets import DTYPES, INT8_MODES, TARGETS

    p = subparsers.add_parser(
        "export",
        help="export a run's adapter: merged model, int8, ONNX, GGUF (checked for parity)",
        description="Merge a run's LoRA adapter into its base and write it as a deployable directory with a "
        "manifest.json; the export is read back and compared with the unexported model (fp32 base + "
        "adapter) on held-out examples, and a parity failure fails the export (exit 1).",
    )
    p.add_argument("run_dir", nargs="?", metavar="RUN", help="the run directory (runs/NAME)")
    p.add_argument("--target", default="merged", help=f"one of {', '.join(TARGETS)} (default: merged)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: RUN/exports/<target>)")
    p.add_argument("--dtype", default="float32", help=f"merged: weights dtype, one of {', '.join(DTYPES)}")
    p.add_argument(
        "--int8-mode",
        default="dynamic",
        help=f"int8: {' or '.join(INT8_MODES)} (int8 dynamic activations + int8 weights, or int8 weights only)",
    )
    p.add_argument(
        "--quant",
        default="f16",
        help="gguf: the GGUF's quantization, one of f16, q8_0, q4_k_m (llama-quantize; default f16)",
    )
    p.add_argument("--heldout", metavar="FILE", help="held-out JSONL for parity (default: the run's data.eval)")
    p.add_argument("--max-examples", type=int, default=16, help="held-out examples compared (default 16)")
    p.add_argument("--max-logit-diff", type=float, help="gate: largest |logit diff| (default: the target's)")
    p.add_argument("--min-agreement", type=float, help="gate: least greedy-token agreement (default: the target's)")
    p.add_argument(
        "--max-loss-increase", type=float, help="gate: held-out loss increase allowed (default: the target's)"
    )
    p.add_argument(
        "--device",
        default="auto",
        help="where the fp32 reference (and a merged export) compute the "
        "parity logits: auto (the first CUDA GPU when one is visible, else the CPU), cpu, cuda or cuda:N",
    )
    p.add_argument("--force", action="store_true", help="overwrite an existing output directory")
    p.add_argument("--verify", metavar="EXPORT_DIR", help="re-check an existing export against its source run instead")
    p.add_argument("--json", action="store_true", help="print the manifest (or parity figures) as JSON")
    p.add_argument(
        "--progress",
        action="store_true",
        help="print each phase to stderr as it starts "
        "('[i/N] what'; a watcher such as the runs panel's Export section reads them)",
    )
    p.set_defaults(func=run)
    return p


def _gate(args, target: str, dtype: str, int8_mode: str, quant: str):
    from .parity import ParityGate
    from .targets import TargetSpec

    given = {
        "max_logit_diff": args.max_logit_diff,
        "min_agreement": args.min_agreement,
        "max_loss_increase": args.max_loss_increase,
    }
    if all(v is None for v in given.values()):
        return None
    default = TargetSpec(target, dtype, int8_mode, quant).default_gate().to_dict()
    return ParityGate(**{k: default[k] if v is None else v for k, v in given.items()})


# Loggers that tell library maintainers about their own internals (torchao's skipped C++ kernels, torch's pytree
# registrations, the ONNX exporter's missing torchvision ops): kept off the terminal of `workbench export`.
QUIET_LOGGERS = ("torchao", "torch.utils._pytree", "torch.onnx._internal.exporter._registration")


def _quiet_third_party_logs() -> None:
    import logging

    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def _print_phase(i: int, what: str) -> None:
    from .exporter import PHASES

    print(f"workbench export: [{i}/{len(PHASES)}] {what}", file=sys.stderr, flush=True)


def run(args) -> int:
    _quiet_third_party_logs()
    from .exporter import export, verify
    from .parity import ParityFailed
    from .source import ExportInputError
    from .targets import DTYPES, GGUF_QUANTS, INT8_MODES, TARGETS

    try:
        if args.verify:
            if args.run_dir:
                raise ExportInputError("give either RUN (to export) or --verify EXPORT_DIR, not both")
            report = verify(args.verify, device=args.device)
            print(
                json.dumps(report.to_dict(), indent=2)
                if args.json
                else f"{args.verify}: parity passed: {report.summary()}"
            )
            return 0
        if not args.run_dir:
            raise ExportInputError("name the run to export: workbench export runs/NAME --target merged")
        # checked before the gate is built from them, so a bad value is an input error, not a KeyError
        if (
            args.target not in TARGETS
            or args.dtype not in DTYPES
            or args.int8_mode not in INT8_MODES
            or args.quant not in GGUF_QUANTS
        ):
            gate = None
        else:
            gate = _gate(args, args.target, args.dtype, args.int8_mode, args.quant)
        result = export(
            args.run_dir,
            args.target,
            args.out,
            dtype=args.dtype,
            int8_mode=args.int8_mode,
            quant=args.quant,
            heldout=args.heldout,
            max_examples=args.max_examples,
            gate=gate,
            overwrite=args.force,
            progress=_print_phase if args.progress else None,
            device=args.device,
        )
    except ExportInputError as err:
        print(f"workbench export: error: {err}", file=sys.stderr)
        return 2
    except ParityFailed as err:
        print(f"workbench export: {err}", file=sys.stderr)
        print(json.dumps(err.report.to_dict(), indent=2), file=sys.stderr)
        return 1
    m = result.manifest
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    sizes, parity = m["sizes"], m["parity"]
    print(f"exported {m['target']} ({m['precision']}) to {result.path}")
    print(
        f"  size on disk {sizes['total_bytes'] / 1e6:.1f} MB (weights {sizes['weights_bytes'] / 1e6:.1f} MB; "
        f"fp32 merged {sizes['reference_fp32_bytes'] / 1e6:.1f} MB)"
    )
    print(
        f"  parity passed: max |logit diff| {parity['max_logit_diff']:.3g}, greedy agreement "
        f"{parity['greedy_agreement']:.4f}, held-out loss {parity['export_loss']:.4f} "
        f"(reference {parity['reference_loss']:.4f}), {parity['examples']} examples"
    )
    if actions := parity.get("actions"):
        from .parity import ActionParity

        print(f"  {ActionParity(**actions).summary()}")
    print(f"  wall: write {m['wall_s']['write_s']:.1f} s, parity {m['wall_s']['parity_s']:.1f} s")
    return 0
