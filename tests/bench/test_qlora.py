"""python -m workbench.bench.qlora: the base's weights and the step time over nf4 and int8 bases against bf16."""

from __future__ import annotations

import pytest

from workbench.bench import qlora


@pytest.mark.slow  # three engine runs in three processes
def test_the_bench_prints_each_base_beside_bf16(capsys):
    tiny = ["--set", "model.source=tiny-glm4", "--set", "data.max_length=64", "--set", "schedule.micro_batch_size=2"]
    assert qlora.main(["--recipe", "identity-demo", "--steps", "2", "--warmup", "1", *tiny]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:5]}
    assert set(rows) == {"bf16", "nf4", "int8"}
    assert rows["bf16"][1] == "0" and rows["nf4"][1] == rows["int8"][1] == "12"  # quantized layers
    ratio = {k: float(v[3]) for k, v in rows.items()}  # base weights x bf16
    assert ratio["bf16"] == 1.0 and ratio["nf4"] < ratio["int8"] < 1.0
