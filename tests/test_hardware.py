"""The machine's facts (workbench.hardware): the CPU class that an fp32 recipe's figures depend on, recorded by every run."""

import torch

from workbench.hardware import cpu_class, describe_hardware

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu sse2 avx2 {extra}\n\nprocessor\t: 1\n"


def test_the_widest_vector_unit_is_named_after_the_model():
    assert cpu_class(EPYC.format(extra="")) == "AMD EPYC 9R14 (AVX2)"
    assert cpu_class(EPYC.format(extra="avx512f")) == "AMD EPYC 9R14 (AVX-512)"
    assert cpu_class(EPYC.format(extra="avx512f avx512_bf16")) == "AMD EPYC 9R14 (AVX-512 BF16)"
    assert cpu_class(EPYC.format(extra="avx512f avx512_bf16 amx_tile amx_bf16")) == "AMD EPYC 9R14 (AMX)"


def test_a_flag_is_matched_whole_and_a_bare_cpuinfo_still_answers():
    # avx2 must not be read out of a longer flag, nor a model name out of nothing
    assert cpu_class("model name : X\nflags : avx2_like sse\n") == "X (no AVX2)"
    assert cpu_class("") == "unknown CPU (no AVX2)"


def test_every_run_records_its_cpu_class():
    assert describe_hardware(torch.device("cpu"))["cpu"] == cpu_class()
