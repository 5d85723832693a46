"""After the fine-tune: a run's adapter exported as a merged transformers model, int8 (torchao) or ONNX,
each in its own directory with a manifest, and accepted only when it passes parity with the unexported
model (``docs/export.md``).

    from workbench.export import export
    result = export("runs/NAME", "int8")          # -> runs/NAME/exports/int8-dynamic
    result.parity["greedy_agreement"]
"""

from .exporter import ExportResult, export, read_manifest, verify
from .parity import ParityFailed, ParityGate, ParityReport
from .source import ExportInputError
from .targets import DTYPES, INT8_MODES, TARGETS

__all__ = [
    "ExportResult",
    "export",
    "read_manifest",
    "verify",
    "ParityFailed",
    "ParityGate",
    "ParityReport",
    "ExportInputError",
    "DTYPES",
    "INT8_MODES",
    "TARGETS",
]
