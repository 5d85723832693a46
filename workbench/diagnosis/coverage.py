"""Autocast coverage: the share of matmul FLOPs that actually ran in low precision.

Forward hooks on every nn.Linear and convolution record output dtype x FLOPs (Linear: 2*in*out*tokens; an output
projection that ``forward.head`` ran only at labelled positions counts those rows).
A LoRA layer is counted in parts, as peft builds it from plain Linears: its base_layer (group of the
layer) and its lora_A/lora_B (group "lora"). The hooks are registered only for a sampled step and
removed right after it, so unsampled steps pay nothing. Attention's QK^T and AV products are not
modules and are not counted; they run in the dtype of the projections that feed them. Backward
FLOPs (about twice the forward) run in the same dtypes, so the forward share is the step's share.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from ..dtypes import dtype_name
from ..forward.head import PROJECTED
from ..models.groups import module_group
from ..precision.module_rules import short_name

LOW_PRECISION = (torch.float16, torch.bfloat16)
_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)


def _flops(module: torch.nn.Module, out: torch.Tensor) -> int:
    if isinstance(module, torch.nn.Linear):
        return 2 * module.in_features * out.numel()  # out.numel() = tokens * out_features
    per_output = (module.in_channels // module.groups) * math.prod(module.kernel_size)
    return 2 * per_output * out.numel()


class CoverageSampler:
    def __init__(self, model: torch.nn.Module, fp32_cap: int = 20):
        self.targets = [
            (name, m, module_group(name))
            for name, m in model.named_modules()
            if isinstance(m, (torch.nn.Linear,) + _CONVS)
        ]
        self.fp32_cap = fp32_cap
        self._handles: list = []
        self._acc: dict = {}

    @property
    def armed(self) -> bool:
        return bool(self._handles)

    def arm(self) -> None:
        if self._handles:
            return
        self._acc = defaultdict(lambda: defaultdict(int))  # module index -> dtype -> flops
        for i, (_, module, _) in enumerate(self.targets):
            self._handles.append(module.register_forward_hook(self._hook(i)))

    def _hook(self, index: int):
        acc = self._acc

        def hook(module, args, out):
            # Training forwards only: eval forwards of the same step (model.eval()) are not the step's cost.
            if not (module.training and isinstance(out, torch.Tensor)):
                return
            if out.dim() == 0 and getattr(module, PROJECTED, None):  # a loss head (forward.head): its real work
                rows, dtype = getattr(module, PROJECTED)
                acc[index][dtype] += 2 * module.in_features * module.out_features * rows
            else:
                acc[index][out.dtype] += _flops(module, out)

        return hook

    def disarm(self) -> dict | None:
        """Remove the hooks; the sample's report, or None if no training forward ran while armed."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if not self._acc:
            return None
        groups: dict = defaultdict(lambda: defaultdict(int))
        fp32_modules = []
        total = low = 0
        for index, by_dtype in self._acc.items():
            name, _, group = self.targets[index]
            for dtype, flops in by_dtype.items():
                groups[group][dtype] += flops
                total += flops
                low += flops if dtype in LOW_PRECISION else 0
                if dtype == torch.float32 and len(fp32_modules) < self.fp32_cap:
                    fp32_modules.append(short_name(name))
        self._acc = {}
        report_groups = {}
        for group, by_dtype in sorted(groups.items()):
            g_total = sum(by_dtype.values())
            g_low = sum(f for d, f in by_dtype.items() if d in LOW_PRECISION)
            report_groups[group] = {
                "flops": g_total,
                "low_precision_share": g_low / g_total if g_total else None,
                "dtypes": {dtype_name(d): f for d, f in by_dtype.items()},
            }
        return {
            "low_precision_share": low / total if total else None,
            "flops": total,
            "groups": report_groups,
            "fp32_modules": fp32_modules,
        }
