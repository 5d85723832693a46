"""Package layout (the rest of the metadata is in pyproject.toml).

data_samples/ stays at the top of the repository, where the README, notebooks and docs point, and
ships inside the wheel as ``workbench/data_samples`` (one copy in git, mapped here), so a
non-editable install finds the samples from any directory (workbench/config/samples.py).
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["workbench", "workbench.*"]) + ["workbench.data_samples"],
    package_dir={"workbench.data_samples": "data_samples"},
    package_data={
        "workbench.data_samples": [
            "*.md",
            "*/*.md",
            "*/*.json",
            "*/*.jsonl",
            "*/*.txt",
            "*/images/*.png",
            # notebook 07's recorded text-agent episodes
            "*/episodes/*/*.json*",
            "*/episodes/*/screens/*/*.png",
        ],
        "workbench.config.recipes": ["*.yaml"],
    },  # `workbench recipes`: the packaged recipes
)
