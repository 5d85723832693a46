"""The activation bench prints one row per case, predicted beside measured (the figures docs/memory_planner.md
quotes); the measurements themselves are held to their tolerances in tests/plan/test_activations.py and
test_images.py."""

from workbench.bench import activations as bench


def test_the_bench_prints_every_case_with_its_difference(capsys):
    assert bench.main(["--cases", "tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["case", "predicted", "B", "measured", "B", "predicted", "-", "measured"]
    rows = {c.label: next(line for line in lines[1:] if line.startswith(c.label + " ")) for c in bench.TINY_CASES}
    assert len(rows) == len(bench.TINY_CASES) == len(lines) - 1
    assert rows["tiny-glm4 bf16 LoRA dropout 0.05 2x48"].endswith("exact")  # LoRA: to the byte
    full = rows["tiny-glm4 fp32 full 2x48"].split()
    predicted, measured = (int(v.replace(",", "")) for v in full[4:6])
    assert predicted != measured and f"({predicted - measured:+,} B)" in rows["tiny-glm4 fp32 full 2x48"]
