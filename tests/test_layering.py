"""Import layering: the tables of ``docs/architecture.md`` ("Import layers"), checked on every
module under ``pcreg/``.

Every ``pcreg`` import counts (module level, inside functions, under ``if TYPE_CHECKING:``,
relative, and ``importlib.import_module`` / ``__import__`` with a literal name): a lazy import
is still a dependency. The checker is plain functions over source text so that the tests at the
bottom can feed it synthetic modules and prove it reports what it should.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO / "pcreg"
DOC = REPO / "docs" / "architecture.md"
SECTION = "Import layers"
ROOT = "pcreg"
#: the top-level name of ``pcreg/__init__.py`` in the layer table
ROOT_INIT = "__init__"


# ----------------------------------------------------------------------------- the tables
@dataclass(frozen=True)
class Layering:
    floors: dict[str, int]  # top-level name -> floor
    forbidden: dict[tuple[str, str], str]  # (from, to) -> why


def _section(text: str, title: str) -> str:
    match = re.search(rf"^##\s+{re.escape(title)}\s*$", text, flags=re.M)
    if match is None:
        raise ValueError(f"no '## {title}' section")
    rest = text[match.end() :]
    end = re.search(r"^##\s", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def _tables(text: str) -> list[list[list[str]]]:
    """Markdown tables in ``text`` as rows of cells (header first, the ``|---|`` row dropped)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        if current is None:
            current = []
            tables.append(current)
        current.append(cells)
    return tables


def _names(cell: str) -> list[str]:
    """Backticked module names in a cell (``commands/`` -> ``commands``)."""
    return [n.strip().rstrip("/").removesuffix(".py") for n in re.findall(r"`([^`]+)`", cell)]


def parse_layering(text: str) -> Layering:
    """The floor table (header ``floor | packages``) and the forbidden-import table (header
    ``from | to | ...``) of the "Import layers" section; exactly one of each."""
    section = _section(text, SECTION)
    layer_tables, forbidden_tables = [], []
    for table in _tables(section):
        header = [c.lower() for c in table[0]]
        if header[:2] == ["floor", "packages"]:
            layer_tables.append(table[1:])
        elif header[:2] == ["from", "to"]:
            forbidden_tables.append(table[1:])
        else:
            raise ValueError(f"unexpected table in '{SECTION}': {table[0]}")
    if len(layer_tables) != 1 or len(forbidden_tables) != 1:
        raise ValueError(
            f"'{SECTION}' must hold one floor table and one forbidden table, found "
            f"{len(layer_tables)} and {len(forbidden_tables)}"
        )
    floors: dict[str, int] = {}
    for cells in layer_tables[0]:
        floor = int(cells[0])
        for name in _names(cells[1]):
            if not name.isidentifier():
                raise ValueError(f"floor {floor}: {name!r} is not a module name")
            if name in floors:
                raise ValueError(f"{name!r} is on floors {floors[name]} and {floor}")
            floors[name] = floor
    forbidden: dict[tuple[str, str], str] = {}
    for cells in forbidden_tables[0]:
        why = cells[2] if len(cells) > 2 else ""
        for src in _names(cells[0]):
            for dst in _names(cells[1]):
                for name in (src, dst):
                    if name not in floors:
                        raise ValueError(f"forbidden pair names {name!r}, which has no floor")
                forbidden[(src, dst)] = why
    return Layering(floors, forbidden)


# ----------------------------------------------------------------------------- the imports
@dataclass(frozen=True)
class Import:
    source: str  # dotted name of the importing module
    path: str  # its file, relative to the repository
    line: int
    target: str  # dotted name as imported (relative imports resolved)
    module: str | None  # the pcreg module (file) it loads, when there is one

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    rel = path.relative_to(package_dir.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Dotted name -> file of every module under ``package_dir``."""
    return {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}


def top_level(dotted: str) -> str:
    """``pcreg.engine.train`` -> ``engine``; ``pcreg`` -> ``__init__``."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else ROOT_INIT


def _resolve(dotted: str, modules: Iterable[str]) -> str | None:
    """The module file that importing ``dotted`` names: itself, else its longest prefix."""
    parts = dotted.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _relative_base(source: str, is_package: bool, level: int) -> str:
    parts = source.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    if not parts:
        raise ValueError(f"relative import beyond the top of {source}")
    return ".".join(parts)


def imports_in(
    source_text: str, source: str, path: str, is_package: bool, modules: Iterable[str]
) -> list[Import]:
    """Every import of ``pcreg`` in one module's source (anywhere in its syntax tree)."""
    modules = set(modules)
    found: list[tuple[int, str, str | None]] = []

    def add(line: int, dotted: str, module: str | None = None) -> None:
        if dotted == ROOT or dotted.startswith(ROOT + "."):
            found.append((line, dotted, module or _resolve(dotted, modules)))

    for node in ast.walk(ast.parse(source_text, filename=path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _relative_base(source, is_package, node.level)
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if alias.name != "*" and sub in modules:
                    add(node.lineno, sub, sub)  # `from pcreg.engine import train`: a module
                else:
                    add(node.lineno, base)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            if name in {"import_module", "__import__"} and literal:
                add(node.lineno, arg.value)
    # `from pcreg.a import x, y` is one import of pcreg.a, not two
    return [Import(source, path, line, dotted, mod) for line, dotted, mod in sorted(set(found))]


def collect_imports(package_dir: Path = PACKAGE_DIR) -> list[Import]:
    modules = package_modules(package_dir)
    out: list[Import] = []
    for name, file in modules.items():
        rel = file.relative_to(package_dir.parent).as_posix()
        out += imports_in(file.read_text(), name, rel, file.name == "__init__.py", modules)
    return out


# ----------------------------------------------------------------------------- the checks
def unplaced(top_levels: Iterable[str], layering: Layering) -> list[str]:
    return sorted(set(top_levels) - set(layering.floors))


def layering_violations(imports: Iterable[Import], layering: Layering) -> list[str]:
    """One line per upward or forbidden import, ``file:line: a (floor) -> b (floor): ...``."""
    floors, out = layering.floors, []
    for imp in imports:
        src, dst = top_level(imp.source), top_level(imp.target)
        if src == dst:
            continue
        head = f"{imp.where}: {src} -> {dst} ({imp.target})"
        if src not in floors or dst not in floors:
            missing = sorted({n for n in (src, dst) if n not in floors})
            out.append(f"{head}: {', '.join(missing)} not in the layer table")
        elif floors[dst] > floors[src]:
            out.append(f"{head}: upward, floor {floors[src]} imports floor {floors[dst]}")
        elif (src, dst) in layering.forbidden:
            out.append(f"{head}: forbidden ({layering.forbidden[(src, dst)]})")
    return out


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def _describe(components: list[list[str]], edges: Mapping[tuple[str, str], list[Import]]):
    out = []
    for comp in components:
        members = set(comp)
        links = [
            f"{imp.where} imports {imp.target}"
            for (a, b), imps in sorted(edges.items())
            if a in members and b in members
            for imp in imps
        ]
        out.append(f"{' <-> '.join(comp)}:\n    " + "\n    ".join(links))
    return out


def module_cycles(imports: Iterable[Import], paths: Mapping[str, str]) -> list[str]:
    """Cycles between modules (files), named by their paths, with every import in them."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        if imp.module is not None and imp.module != imp.source:
            a, b = paths.get(imp.source, imp.source), paths.get(imp.module, imp.module)
            edges.setdefault((a, b), []).append(imp)
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    return _describe(_strongly_connected(graph), edges)


def package_cycles(imports: Iterable[Import], layering: Layering) -> list[str]:
    """Cycles between top-level packages on one floor (across floors one edge is upward)."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        a, b = top_level(imp.source), top_level(imp.target)
        if a != b and layering.floors.get(a, -1) == layering.floors.get(b, -2):
            edges.setdefault((a, b), []).append(imp)
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    return _describe(_strongly_connected(graph), edges)


# ----------------------------------------------------------------------------- the package
@pytest.fixture(scope="module")
def layering() -> Layering:
    return parse_layering(DOC.read_text())


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return collect_imports()


def _fail(title: str, lines: list[str]) -> None:
    if lines:
        pytest.fail(f"{len(lines)} {title}:\n" + "\n".join(lines), pytrace=False)


def test_layer_table_names_the_design_floors(layering):
    assert layering.floors["errors"] == 0 and layering.floors["config"] == 0
    assert layering.floors["models"] == layering.floors["data"] == 1
    assert layering.floors["engine"] == 2 and layering.floors["api"] == 3
    assert layering.floors["cli"] == max(layering.floors.values())
    assert {("data", "viz"), ("viz", "data"), ("engine", "viz")} <= set(layering.forbidden)


def test_every_top_level_module_is_placed(layering):
    tops = {top_level(name) for name in package_modules()}
    _fail(
        f"top-level modules of pcreg/ are not in the table of {DOC.name} (add them)",
        unplaced(tops, layering),
    )


def test_no_upward_or_forbidden_imports(layering, imports):
    _fail(
        f"imports break the layers of {DOC.name} '{SECTION}'",
        layering_violations(imports, layering),
    )


def test_no_import_cycles_between_modules(imports):
    paths = {name: file.relative_to(REPO).as_posix() for name, file in package_modules().items()}
    _fail("import cycles between modules of pcreg/", module_cycles(imports, paths))


def test_no_import_cycles_between_packages_of_one_floor(layering, imports):
    _fail("import cycles between packages of one floor", package_cycles(imports, layering))


# ----------------------------------------------------------------------------- the checker
_TABLE = """
## Import layers

| floor | packages |
|---|---|
| 0 | `ops`, `config` (a leaf) |
| 1 | `models`, `data`, `viz` |
| 2 | `engine` |
| 4 | `cli`, `commands/` |

| from | to | why |
|---|---|---|
| `engine` | `viz` | no pictures |
| `data` | `viz` | apart |

## Next section

| floor | packages |
|---|---|
| 0 | `ignored` |
"""

_MODULES = {
    "pcreg.ops",
    "pcreg.ops.fake",
    "pcreg.ops.other",
    "pcreg.models",
    "pcreg.models.net",
    "pcreg.data",
    "pcreg.data.sub",
    "pcreg.data.sub.thing",
    "pcreg.viz",
    "pcreg.viz.render",
    "pcreg.engine",
    "pcreg.engine.train",
    "pcreg.cli",
}


def _check(source_text: str, module: str, is_package: bool = False) -> list[str]:
    path = module.replace(".", "/") + ("/__init__.py" if is_package else ".py")
    found = imports_in(source_text, module, path, is_package, _MODULES)
    return layering_violations(found, parse_layering(_TABLE))


def test_parser_reads_only_its_section_and_both_tables():
    layering = parse_layering(_TABLE)
    assert layering.floors == {
        "ops": 0, "config": 0, "models": 1, "data": 1, "viz": 1, "engine": 2, "cli": 4,
        "commands": 4,
    }  # fmt: skip
    assert set(layering.forbidden) == {("engine", "viz"), ("data", "viz")}
    with pytest.raises(ValueError, match="one floor table"):
        parse_layering("## Import layers\n\n| floor | packages |\n|---|---|\n| 0 | `a` |\n")
    with pytest.raises(ValueError, match="has no floor"):
        parse_layering(_TABLE.replace("| `engine` | `viz` |", "| `engine` | `nowhere` |"))


def test_checker_reports_a_synthetic_upward_import():
    (line,) = _check("import torch\n\nfrom pcreg.cli import main\n", "pcreg.ops.fake")
    assert line.startswith("pcreg/ops/fake.py:3: ops -> cli (pcreg.cli): upward")


def test_checker_counts_lazy_type_checking_and_dynamic_imports():
    text = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pcreg.engine.train import Trainer\n"
        "def f():\n"
        "    import pcreg.cli\n"
        "    return importlib.import_module('pcreg.engine')\n"
    )
    lines = _check(text, "pcreg.models.net")
    assert [ln.split(": ")[0] for ln in lines] == [
        "pcreg/models/net.py:3",
        "pcreg/models/net.py:5",
        "pcreg/models/net.py:6",
    ]
    assert all("upward" in ln for ln in lines)


def test_checker_resolves_relative_imports():
    # pcreg/data/sub/thing.py: `from ...viz import render` is pcreg.viz.render (forbidden),
    # `from . import x` stays in data, `from ..ops` inside pcreg/data/ is pcreg.ops (fine)
    text = "from ...viz import render\nfrom . import x\nfrom ...ops import other\n"
    (line,) = _check(text, "pcreg.data.sub.thing")
    assert line.startswith("pcreg/data/sub/thing.py:1: data -> viz (pcreg.viz.render): forbidden")
    (line,) = _check("from ..cli import main\n", "pcreg.data", is_package=True)
    assert "data -> cli (pcreg.cli): upward" in line


def test_checker_reports_forbidden_same_floor_and_unplaced_modules():
    assert (
        "forbidden (no pictures)"
        in _check("def f():\n    from pcreg.viz import render\n", "pcreg.engine.train")[0]
    )
    assert _check("from pcreg.models.net import Net\n", "pcreg.engine.train") == []
    (line,) = _check("from pcreg.newthing import x\n", "pcreg.engine.train")
    assert "newthing not in the layer table" in line
    assert unplaced({"ops", "newthing"}, parse_layering(_TABLE)) == ["newthing"]


def test_checker_reports_cycles():
    sources = {
        "pcreg.engine.train": "from pcreg.engine import parallel\n",
        "pcreg.engine.parallel": "def f():\n    from pcreg.engine.train import x\n",
        "pcreg.engine.other": "from pcreg.engine.train import x\n",
        "pcreg.models.net": "from pcreg.viz.render import draw\n",
        "pcreg.viz.render": "from pcreg.models import net\n",
    }
    modules = set(sources) | {"pcreg.engine", "pcreg.models", "pcreg.viz"}
    found = [
        imp
        for name, text in sources.items()
        for imp in imports_in(text, name, name.replace(".", "/") + ".py", False, modules)
    ]
    cycles = module_cycles(found, {})
    assert [c.splitlines()[0] for c in cycles] == [
        "pcreg.engine.parallel <-> pcreg.engine.train:",
        "pcreg.models.net <-> pcreg.viz.render:",
    ]
    assert "pcreg/engine/parallel.py:2 imports pcreg.engine.train" in cycles[0]
    (cycle,) = package_cycles(found, parse_layering(_TABLE))
    assert cycle.startswith("models <-> viz:")
