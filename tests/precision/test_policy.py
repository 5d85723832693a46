import warnings

import pytest
import torch

from workbench.config import ConfigError, load_config
from workbench.hardware import resolve_device
from workbench.precision import PrecisionWarning, resolve_precision

CPU = torch.device("cpu")


def policy(**dotted):
    dotted.setdefault("data.eval", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionWarning)
        return resolve_precision(load_config(None, dotted), CPU)


@pytest.mark.parametrize(
    "mode,autocast,base,trainable,scaler",
    [
        ("fp32", None, torch.float32, torch.float32, False),
        ("fp16", torch.float16, torch.float16, torch.float32, True),
        ("bf16", torch.bfloat16, torch.bfloat16, torch.float32, False),
        ("pure-bf16", None, torch.bfloat16, torch.bfloat16, False),
    ],
)
def test_lora_policies(mode, autocast, base, trainable, scaler):
    p = policy(**{"precision.mode": mode})
    assert (p.autocast_dtype, p.base_dtype, p.trainable_dtype, p.use_grad_scaler) == (autocast, base, trainable, scaler)
    assert (p.make_grad_scaler() is not None) == scaler


@pytest.mark.parametrize("fast_bf16,mode", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cpu_follows_native_bf16_support(monkeypatch, fast_bf16, mode):
    monkeypatch.setattr("workbench.hardware.cpu_has_fast_bf16", lambda: fast_bf16)
    p = policy(**{"precision.mode": "auto"})
    assert p.mode == mode and p.requested == "auto"
    assert ("no native bf16" in " ".join(p.notes)) == (not fast_bf16)


def test_full_finetune_keeps_fp32_master_weights():
    p = policy(**{"precision.mode": "fp16", "lora.enabled": False})
    assert p.base_dtype == p.trainable_dtype == torch.float32 and p.autocast_dtype == torch.float16


def test_explicit_storage_dtype_wins():
    assert policy(**{"precision.mode": "bf16", "model.dtype": "float32"}).base_dtype == torch.float32


def test_fp16_scaler_settings_are_passed_through():
    p = policy(
        **{
            "precision.mode": "fp16",
            "precision.init_scale": 1024,
            "precision.growth_factor": 1.5,
            "precision.backoff_factor": 0.25,
            "precision.growth_interval": 7,
        }
    )
    s = p.make_grad_scaler()
    assert (s.get_scale(), s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (
        1024,
        1.5,
        0.25,
        7,
    )


def test_fp16_on_cpu_warns():
    with pytest.warns(PrecisionWarning, match="slower than bf16"):
        resolve_precision(load_config(None, {"precision.mode": "fp16", "data.eval": None}), CPU)


def test_policy_serialises_for_events():
    d = policy(**{"precision.mode": "bf16"}).to_dict()
    assert d["autocast_dtype"] == "bfloat16" and d["trainable_dtype"] == "float32" and d["mode"] == "bf16"


def test_cuda_without_gpu_names_the_device_field(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the no-GPU error, on any machine
    with pytest.raises(ConfigError) as exc:
        resolve_device("cuda")
    assert exc.value.problems[0][0] == "device"
