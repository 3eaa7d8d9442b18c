"""ragchat/services is the stateless core: it must never import Django (DESIGN.md, issue 2)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ragchat.services

SERVICES_DIR = Path(ragchat.services.__file__).parent
REPO_ROOT = SERVICES_DIR.parent.parent


def django_imports(source: str) -> list[str]:
    """Every `import django...` / `from django... import` in the source, however nested."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "django" or a.name.startswith("django.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "django" or node.module.startswith("django."):
                found.append(node.module)
    return found


def service_files() -> list[Path]:
    return sorted(SERVICES_DIR.rglob("*.py"))


def test_detector_catches_django_imports():
    # The check below is only worth something if it can fail.
    assert django_imports("import django") == ["django"]
    assert django_imports("def f():\n    from django.conf import settings\n") == ["django.conf"]
    assert django_imports("import os, django.db.models as m") == ["django.db.models"]
    assert django_imports("from . import djangoish\nimport djangoish") == []


def test_services_do_not_import_django():
    files = service_files()
    assert len(files) >= 10  # the core is there, not an empty folder
    offenders = {
        str(p.relative_to(REPO_ROOT)): names for p in files if (names := django_imports(p.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_importing_services_does_not_load_django():
    modules = sorted(
        "ragchat.services." + ".".join(p.relative_to(SERVICES_DIR).with_suffix("").parts)
        for p in service_files()
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "print('DJANGO:', loaded)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(Path.home())},
    )
    assert proc.returncode == 0, proc.stderr
    assert "DJANGO: []" in proc.stdout
