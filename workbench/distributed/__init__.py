"""Multi-process training behind the same RunConfig: DDP, FSDP2 (zero2/zero3) and DeepSpeed ZeRO 1-3,
launched through torchrun (``workbench.distributed.launcher``), observed through the same events.
See docs/distributed.md."""

from .context import DistContext, init_distributed
from .ds_config import to_deepspeed_config

__all__ = ["DistContext", "init_distributed", "to_deepspeed_config"]
