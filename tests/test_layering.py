"""The layering of DESIGN.md, read from the source with ``ast`` (imports inside functions count):

* the core (everything outside ``tinyscope.studies``) never imports ``tinyscope.studies``;
* a study imports the core and never another study;
* no import cycles between modules.
"""
import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "tinyscope"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str) -> set[str]:
    """Every tinyscope module ``name`` imports, at any depth of its body (TYPE_CHECKING blocks
    excluded: they are annotations, never executed)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve(name, path.name == "__init__.py", node)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:  # `import tinyscope.x.y` names a module; `from m import obj` names m
                t = t.rpartition(".")[0]
            if t.startswith("tinyscope") and t != name:
                out.add(t)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def study_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" else None


def test_the_layout_has_a_core_and_the_seven_studies():
    studies = {p.name for p in (PKG / "studies").iterdir() if (p / "__init__.py").exists()}
    assert studies == {"minimal", "spatial_induction", "tracerelay", "circuits", "log_icot", "ncffn", "theia"}
    for core in ("models", "tasks", "train", "runs", "interp", "report", "sweep", "commands"):
        assert (PKG / core / "__init__.py").exists(), core


def test_the_core_never_imports_a_study():
    bad = sorted((m, t) for m, ts in GRAPH.items() if study_of(m) is None and m != "tinyscope.studies"
                 for t in ts if study_of(t) is not None or t == "tinyscope.studies")
    assert bad == [], "core modules importing a study: " + ", ".join(f"{m} -> {t}" for m, t in bad)


def test_no_study_imports_another_study():
    bad = sorted((m, t) for m, ts in GRAPH.items() if study_of(m) for t in ts
                 if study_of(t) and study_of(t) != study_of(m))
    assert bad == [], "cross-study imports: " + ", ".join(f"{m} -> {t}" for m, t in bad)


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of the module graph with more than one module.

    A module's edge to its own parent package is left out (importing ``a.b`` runs ``a`` first;
    a package re-exporting its submodules is not a cycle with them)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in (w for w in graph[v] if not v.startswith(w + ".")):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return cycles


def test_there_is_no_import_cycle():
    assert import_cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("source, offender", [
    ("from tinyscope.studies.minimal import task\n", "tinyscope.studies.minimal.task"),
    ("def f():\n    import tinyscope.studies.theia.model\n", "tinyscope.studies.theia.model"),
])
def test_the_checker_sees_imports_at_any_depth(tmp_path, monkeypatch, source, offender):
    """The checker itself: an import inside a function of a core module is found."""
    fake = PKG / "report" / "_layering_probe.py"
    monkeypatch.setitem(MODULES, "tinyscope.report._layering_probe", tmp_path / "probe.py")
    (tmp_path / "probe.py").write_text(source)
    assert offender in imports_of("tinyscope.report._layering_probe")
    assert not fake.exists()
