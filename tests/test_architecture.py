"""The import rules between the project's packages, read from the source with `ast` (every import
counts, also one inside a function or under TYPE_CHECKING):

- `ragchat.services` (the RAG core) imports no Django (nor channels/daphne) and no other package of
  the project;
- no import cycle between the packages: the apps (chat, documents, routing, access, …), the core
  `ragchat.services`, and the project package `ragchat`;
- no import cycle between any two modules of the project either (a circle inside a package is as
  hard to follow, and works only while one of its imports stays inside a function);
- the project package's entry points (settings, URLconfs, ASGI, its views and admin, management
  commands and the tools they run) are loaded by Django or the command line by name and wire the
  apps together: they may import any package, and no package imports them.

A failure names every offending import with its file and line.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = "ragchat.services"
PROJECT = "ragchat"
# The project package's modules that nothing imports: Django or the command line load them by name.
ENTRY_POINTS = (
    "ragchat.settings",
    "ragchat.urls",
    "ragchat.ws_urls",
    "ragchat.asgi",
    "ragchat.wsgi",
    "ragchat.views",
    "ragchat.admin",
    "ragchat.management",
    "ragchat.bench",
    "ragchat.evaluation",
)
FRAMEWORK = ("django", "channels", "daphne")


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module (or package), dotted
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def packages() -> list[str]:
    """The project's top-level packages: folders with an __init__.py, tests excepted."""
    return sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name not in {"tests", "build"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    """Every import in one file, relative ones resolved; `from pkg import mod` names the module."""
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [Import(source, alias.name, where) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append(Import(source, candidate if is_module(candidate) else base, where))
    return found


def project_files() -> list[Path]:
    return sorted(f for name in packages() for f in (ROOT / name).rglob("*.py"))


def all_imports() -> list[Import]:
    return [imp for f in project_files() for imp in imports_of(f)]


def within(dotted: str, prefix: str) -> bool:
    return dotted == prefix or dotted.startswith(prefix + ".")


def node_of(dotted: str) -> str | None:
    """The package a module belongs to for the cycle rule; None outside the project."""
    top = dotted.split(".")[0]
    if top not in packages():
        return None
    if within(dotted, CORE):
        return CORE
    if any(within(dotted, entry) for entry in ENTRY_POINTS):
        return "ragchat (entry points)"
    return top


def find_cycles(edges: dict[tuple[str, str], list[Import]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def package_edges(imports: list[Import]) -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in imports:
        a, b = node_of(imp.source), node_of(imp.target)
        if a and b and a != b:
            edges[(a, b)].append(imp)
    return edges


def cycle_report(imports: list[Import]) -> list[str]:
    edges = package_edges(imports)
    lines = []
    for group in find_cycles(edges):
        lines.append(f"import cycle between {', '.join(group)}; the imports that close it:")
        for (a, b), evidence in sorted(edges.items()):
            if a in group and b in group:
                lines.append(f"  {a} -> {b}:")
                lines += [f"    {imp}" for imp in evidence]
    return lines


def module_of(dotted: str) -> str | None:
    """The project module an import loads (`from chat.models import Message`: chat.models); None
    outside the project."""
    if node_of(dotted) is None:
        return None
    while dotted and not is_module(dotted):
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def module_edges(imports: list[Import]) -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in imports:
        a, b = module_of(imp.source), module_of(imp.target)
        if a and b and a != b and all(seen.where != imp.where for seen in edges[(a, b)]):
            edges[(a, b)].append(imp)
    return edges


def a_cycle(group: list[str], edges: dict[tuple[str, str], list[Import]]) -> list[str]:
    """One shortest circle through the group's first module, start repeated at the end."""
    start = group[0]
    came_from: dict[str, str] = {}
    queue = [start]
    while queue:
        here = queue.pop(0)
        for a, b in sorted(edges):
            if a != here or b not in group:
                continue
            if b == start:
                path = [here]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if b not in came_from:
                came_from[b] = here
                queue.append(b)
    raise AssertionError(f"no circle through {start}")  # a strongly connected group always has one


def module_cycle_report(imports: list[Import]) -> list[str]:
    edges = module_edges(imports)
    lines = []
    for group in find_cycles(edges):
        circle = a_cycle(group, edges)
        lines.append(f"import cycle {' -> '.join(circle)}:")
        for a, b in zip(circle, circle[1:]):
            lines += [f"    {imp}" for imp in edges[(a, b)]]
        if len(group) > len(circle) - 1:
            lines.append(f"  (one circle of the group {', '.join(group)})")
    return lines


# ------------------------------------------------------------------------------------- the checks


def test_the_detector_resolves_every_import_form(tmp_path):
    # The rules below are only worth something if the reader sees every form of import.
    imports = {(i.source, i.target) for i in imports_of(ROOT / "ragchat" / "services" / "rag_service.py")}
    assert ("ragchat.services.rag_service", "ragchat.services.routing") in imports  # from .routing import …
    runtime = {i.target for i in imports_of(ROOT / "ragchat" / "runtime.py")}
    assert "ragchat.services.vector_store" in runtime
    assert node_of("documents.selectors") == "documents"
    assert node_of("ragchat.services.vector_store.edge") == CORE
    assert node_of("ragchat.runtime") == PROJECT
    assert node_of("ragchat.urls") == "ragchat (entry points)"
    assert node_of("django.db") is None
    # An import inside a function counts like one at the top.
    prepare = {i.target for i in imports_of(ROOT / "chat" / "turn_prepare.py")}
    assert "access.policy" in prepare and "documents.selectors" in prepare
    assert module_of("chat.models.Message") == "chat.models"
    assert module_of("ragchat.services.vector_store.edge") == "ragchat.services.vector_store.edge"
    assert module_of("django.db") is None


def test_the_cycle_finder_reports_the_imports_that_close_a_cycle():
    fake = [
        Import("documents.services", "ragchat.runtime", "documents/services.py:28"),
        Import("ragchat.runtime", "documents.selectors", "ragchat/runtime.py:83"),
        Import("chat.turns", "ragchat.runtime", "chat/turns.py:36"),
    ]
    report = "\n".join(cycle_report(fake))
    assert "import cycle between documents, ragchat" in report
    assert "ragchat/runtime.py:83: ragchat.runtime imports documents.selectors" in report
    assert "documents/services.py:28" in report
    assert "chat/turns.py" not in report  # chat -> ragchat alone is no cycle


def test_the_module_cycle_finder_names_the_cycle_and_its_imports():
    fake = [
        Import("chat.consumers", "chat.turns", "chat/consumers.py:25"),
        Import("chat.turns", "chat.turn_fragments", "chat/turns.py:30"),
        Import("chat.turn_fragments", "chat.consumers", "chat/turn_fragments.py:40"),  # inside a function
        Import("chat.turns", "chat.models.Message", "chat/turns.py:28"),
        Import("chat.models", "django.db", "chat/models.py:3"),
    ]
    report = "\n".join(module_cycle_report(fake))
    assert "import cycle chat.consumers -> chat.turns -> chat.turn_fragments -> chat.consumers:" in report
    assert "chat/turn_fragments.py:40: chat.turn_fragments imports chat.consumers" in report
    assert "chat.models" not in report  # imported, but in no circle
    assert not module_cycle_report(fake[:2] + fake[3:])


def test_the_core_imports_no_framework_and_no_other_project_package():
    offenders = [
        str(imp)
        for imp in all_imports()
        if within(imp.source, CORE)
        and (
            any(within(imp.target, name) for name in FRAMEWORK)
            or (node_of(imp.target) is not None and not within(imp.target, CORE))
        )
    ]
    assert not offenders, "ragchat.services must stay framework-free and import only itself:\n" + "\n".join(offenders)


def test_no_import_cycle_between_packages():
    report = cycle_report(all_imports())
    assert not report, "\n" + "\n".join(report)


def test_no_import_cycle_between_modules():
    report = module_cycle_report(all_imports())
    assert not report, "\n" + "\n".join(report)


def test_nothing_imports_the_entry_points():
    offenders = [
        str(imp)
        for imp in all_imports()
        if node_of(imp.target) == "ragchat (entry points)" and node_of(imp.source) != "ragchat (entry points)"
    ]
    assert not offenders, (
        "the project's entry points (settings, URLconfs, ASGI, views, admin, commands, bench, evaluation) "
        "are loaded by name; import what they use from where it lives instead:\n" + "\n".join(offenders)
    )
