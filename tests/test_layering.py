"""Apps import in one direction: a lower app never imports a higher one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ["annotation", "sampling", "pooling", "judging", "agreement", "evaluation"]
# annotation still imports upward (its demo loader and project page); it joins when it stops.
CHECKED = ["pooling", "judging", "agreement", "evaluation"]


def imported_apps(app: str) -> dict[str, set[str]]:
    """Every app imported anywhere in `app` (function-level imports included), by file."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / app).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize("app", CHECKED)
def test_it_imports_no_higher_app(app: str) -> None:
    higher = LAYERS[LAYERS.index(app) + 1 :]
    imported = imported_apps(app)
    assert {name: sorted(imported[name]) for name in higher if name in imported} == {}
