"""Values the docs state, held to the code and the files they describe: a change to either fails here, naming the
page to correct."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, SAMPLES

USER_TEXTS = [
    "README.md",
    *(f"docs/{p.name}" for p in sorted((REPO / "docs").glob("*.md"))),
    *(f"notebooks/{p.name}" for p in sorted((REPO / "notebooks").glob("*.ipynb"))),
    "workbench/models/loading.py",
    "workbench/models/tiny.py",
    *(f"workbench/config/recipes/{p.name}" for p in sorted((REPO / "workbench/config/recipes").glob("*.yaml"))),
]


def _text(page: str) -> str:
    text = (REPO / page).read_text(encoding="utf-8")
    if page.endswith(".ipynb"):  # the cells' text, as a reader sees it
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
    return text


def test_the_tiny_screenshot_models_parameter_count_is_the_one_every_page_states():
    from workbench.models.tiny import tiny_glm4v_agent

    model, _ = tiny_glm4v_agent()
    millions = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)  # 1,587,648: 1.6 M
    stated = {
        (page, float(m)) for page in USER_TEXTS for m in re.findall(r"\b(\d\.\d) M[-\s]+param", _text(page))
    }  # the only model of a few millions
    assert stated, "no page states the tiny screenshot model's size"
    assert {page for page, m in stated if m != millions} == set(), f"{millions} M parameters, pages say: {stated}"


def _sample_tables() -> list[tuple[str, str]]:
    """(file, rows as the table says) of every JSONL file data_samples/README.md lists."""
    text = (SAMPLES / "README.md").read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^\| `([\w/]+\.jsonl)` \| ([^|]+) \|", text, re.M)]


@pytest.mark.parametrize("name,stated", _sample_tables())
def test_each_sample_files_row_count_is_the_one_data_samples_readme_states(name, stated):
    rows = [json.loads(line) for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    assert int(re.match(r"\d+", stated).group(0)) == len(rows), f"data_samples/README.md: {name} has {len(rows)} rows"
    languages = re.search(r"\((\d+) en, (\d+) zh\)", stated)
    if languages:  # the identity rows: the language of each answer
        zh = sum(bool(re.search(r"[\u4e00-\u9fff]", r["messages"][-1]["content"])) for r in rows)
        assert (int(languages.group(1)), int(languages.group(2))) == (len(rows) - zh, zh), name


def test_the_sample_readme_lists_every_sample_folder():
    text = (SAMPLES / "README.md").read_text(encoding="utf-8")
    folders = {p.name for p in SAMPLES.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert {f for f in folders if f"## {f}/" not in text} == set()


def test_the_docs_name_the_format_marker_recorded_rows_carry():
    from workbench.phone.conversation import FORMAT_NAME

    for page in ("docs/agent.md", "data_samples/README.md"):
        stated = re.findall(r"`meta` holds `format:\s*\"([^\"]+)\"", _text(page))
        assert stated == [FORMAT_NAME], f"{page}: recorded rows carry meta.format {FORMAT_NAME!r}, it says {stated}"


def test_workbench_train_help_says_what_precision_auto_picks_on_each_device():
    """The flag's help (the schema's description) names each choice ``resolve_policy`` makes for ``auto``."""
    from workbench.config import PrecisionSection
    from workbench.hardware import Hardware
    from workbench.precision.policy import resolve_policy

    help_text = PrecisionSection.model_fields["mode"].description
    picks = {
        "on a GPU bf16 where it supports it": (Hardware.gpu(bf16=True), "bf16"),
        "else fp16": (Hardware.gpu(bf16=False), "fp16"),
        "on a CPU bf16 with native bf16": (Hardware("cpu", bf16=True, fast_bf16=True), "bf16"),
        "else fp32": (Hardware("cpu", bf16=True, fast_bf16=False), "fp32"),
    }
    for phrase, (hardware, mode) in picks.items():
        assert phrase in help_text, f"precision.mode's description should say '{phrase}': {help_text}"
        assert resolve_policy(PrecisionSection(mode="auto"), hardware, lora_enabled=True).mode == mode, phrase


# The AutoGLM-Phone-9B recipes are written with their guide (docs/autoglm_phone_9b.md), which holds them
RECIPES_HELD_ELSEWHERE = "autoglm-phone-9b-"


@pytest.mark.parametrize(
    "recipe",
    [
        p.name
        for p in sorted((REPO / "workbench/config/recipes").glob("*.yaml"))
        if not p.name.startswith(RECIPES_HELD_ELSEWHERE)
    ],
)
def test_a_recipe_carries_its_figures_and_one_results_page_not_its_history(recipe):
    """`workbench recipes show NAME` prints the file: no issue numbers, no dated lab notes (a date is a setting's
    value or a results page's name), at most one results page, and that page exists."""
    text = (REPO / "workbench/config/recipes" / recipe).read_text(encoding="utf-8")
    assert not re.search(r"\b[Ii]ssue\s*\d+", text), f"{recipe}: an issue number"
    links = re.findall(r"docs/results/([\w.-]+\.md)", text)
    assert len(set(links)) <= 1, f"{recipe}: {len(set(links))} results pages; link the one that holds its figures"
    assert all((REPO / "docs/results" / page).is_file() for page in links), links
    dates = [
        line
        for line in text.splitlines()
        if re.search(r"\b20\d\d-\d\d-\d\d\b", re.sub(r"docs/results/[\w.-]+\.md", "", line))
        and not re.match(r'\s*date: "20\d\d-\d\d-\d\d"', line)
    ]
    assert not dates, f"{recipe}: dated history: {dates}"


def _anchors(page) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them (code blocks left out)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_link_of_the_docs_resolves_to_a_file_and_heading():
    pages = [
        REPO / "README.md",
        *(REPO / "docs").rglob("*.md"),
        *SAMPLES.rglob("README.md"),
        REPO / "extensions" / "README.md",
    ]
    broken = []
    for page in pages:
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path, _, anchor = link.partition("#")
            if link.startswith(("http://", "https://")):
                continue
            target = (page.parent / path).resolve() if path else page
            if not target.exists() or (anchor and target.suffix == ".md" and anchor not in _anchors(target)):
                broken.append(f"{page.relative_to(REPO)}: {link}")
    assert not broken, broken
