"""The committed, prebuilt frontend is the build of the committed sources: the build (npm run build) stamps a hash
of src/, style/, schema/, package.json and tsconfig.json into the built package.json (scripts/stamp.js); changing
any of them without rebuilding fails here."""

from __future__ import annotations

import hashlib
import json

from tests.conftest import REPO

EXT = REPO / "extensions" / "jupyterlab"
BUILT = EXT / "workbench_jupyterlab" / "labextension"


def sources_hash() -> tuple[str, int]:
    """The hash scripts/stamp.js writes: sorted relative paths, each followed by its bytes."""
    files = sorted(
        [p.relative_to(EXT).as_posix() for d in ("src", "style", "schema") for p in (EXT / d).rglob("*") if p.is_file()]
        + ["package.json", "tsconfig.json"]
    )
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0" + (EXT / f).read_bytes() + b"\0")
    return h.hexdigest(), len(files)


def test_the_built_frontend_matches_its_sources():
    built = json.loads((BUILT / "package.json").read_text())
    digest, count = sources_hash()
    assert built["workbench"] == {"sourcesHash": digest, "files": count}, (
        "extensions/jupyterlab: the TypeScript/CSS/schema sources changed since the committed build; rebuild it "
        "(cd extensions/jupyterlab && npm ci && PATH=../../.venv/bin:$PATH npm run build) and commit "
        "workbench_jupyterlab/labextension"
    )


def test_the_built_package_is_complete_and_holds_no_stale_bundle():
    built = json.loads((BUILT / "package.json").read_text())
    source = json.loads((EXT / "package.json").read_text())
    assert built["name"] == source["name"] == "workbench-jupyterlab" and built["version"] == source["version"]
    entry = BUILT / built["jupyterlab"]["_build"]["load"]
    assert entry.is_file(), f"{entry} named by the built package.json is missing"
    # every chunk in static/ is reachable from this build (a rebuild that left old hashed files behind would ship them)
    text = entry.read_text()
    chunks = {p.name for p in (BUILT / "static").glob("*.js") if p.name not in (entry.name, "style.js")}
    assert all(name.split(".")[0] in text for name in chunks), f"stale chunks in {BUILT / 'static'}: {sorted(chunks)}"
    assert json.loads((BUILT / "schemas" / "workbench-jupyterlab" / "plugin.json").read_text()) == json.loads(
        (EXT / "schema" / "plugin.json").read_text()
    )
