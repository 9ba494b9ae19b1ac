"""The web layer's seams, read from the source: the doors sit over the host, never over each other or
the page; nothing in the web layer reaches the model runtime but through the core's local endpoint;
no function in the page or the web layer is too long to read at once."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB = sorted((ROOT / "webui").rglob("*.py"))
MAX_FUNCTION_LINES = 80


def imported(path: Path) -> set[str]:
    """Every module `path` imports, relative imports made absolute."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.level and node.module else node.module or base
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def test_no_door_imports_another_door_or_the_page():
    shared = {"__init__", "calls", "api_files", "openai_messages"}  # what the doors share
    doors = [p for p in WEB if p.parent.name == "doors" and p.stem not in shared]
    assert {p.stem for p in doors} >= {"openai_api", "mcp_tools"}
    for door in doors:
        others = {f"webui.doors.{p.stem}" for p in doors if p != door}
        names = imported(door)
        assert not names & others, f"{door.name} imports another door"
        assert not any(n == "app" or n.startswith(("webui.chat.", "webui.page.")) for n in names), door.name


def _web_module(name: str) -> Path | None:
    """The file of the web layer's module `name` (a package's __init__), None for any other name."""
    path = ROOT.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if name.startswith("webui.") and candidate.exists():
            return candidate
    return None


def reached(path: Path) -> set[str]:
    """Every web-layer module `path` imports, directly or through the modules it imports."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        for name in imported(todo.pop()):
            found = _web_module(name)
            if found is not None and name not in seen:
                seen.add(name)
                todo.append(found)
    return seen


def test_the_host_imports_nothing_of_the_chat_the_doors_or_the_page():
    """The host holds what every door shares; conversations are the chat engine's (webui.chat.engine)."""
    for path in (ROOT / "webui" / "host").glob("*.py"):
        names = reached(path)
        assert all(n.startswith("webui.host") for n in names), (path.name, sorted(names))


def test_the_doors_stand_directly_on_the_host():
    """Each door reaches only the host and the doors' shared modules: no chat engine, no page."""
    for path in (ROOT / "webui" / "doors").glob("*.py"):
        names = reached(path)
        assert all(n.startswith(("webui.host", "webui.doors")) for n in names), (path.name, sorted(names))
    assert any(n.startswith("webui.host") for n in reached(ROOT / "webui" / "doors" / "openai_api.py"))


def test_the_web_layer_reaches_the_model_runtime_only_through_the_core():
    for path in [*WEB, ROOT / "app.py"]:
        assert not any(n.split(".")[0] == "models_local" for n in imported(path)), path.name


def test_no_function_of_the_page_or_the_web_layer_is_over_80_lines():
    long = []
    for path in [*WEB, ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert not long


def test_no_two_modules_of_the_core_import_each_other():
    """cli and replay, events and selection, pipeline and request_run once did (lazily, or for types);
    a package's __init__ gathering its own modules is not a cycle."""
    core = ROOT / "hugginggpt"
    modules = {}
    for path in core.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    deps = {name: {m for m in imported(path) if m in modules and m != name} for name, path in modules.items()}
    both = {
        tuple(sorted((a, b)))
        for a in deps
        for b in deps[a]
        if a in deps[b] and not (b.startswith(a + ".") or a.startswith(b + "."))
    }
    assert not both


def test_no_import_cycles_counting_type_only_imports():
    """tools/import_cycles.py reads every import, those under TYPE_CHECKING and in functions too."""
    import runpy

    found = runpy.run_path(str(ROOT / "tools" / "import_cycles.py"))
    assert found["cycles"](found["graph"](["hugginggpt", "webui", "models_local"])) == []
    assert found["cycles"]({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_folder_holds_more_than_20_modules_side_by_side():
    """Modules are grouped by job into packages (docs/layout.md), each with a docstring saying what
    lives there, so that a folder's listing tells a newcomer where a change belongs."""
    crowded, undocumented = [], []
    for top in ("hugginggpt", "webui", "models_local"):
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            modules = list(folder.glob("*.py"))
            if len(modules) > 20:
                crowded.append(f"{folder.relative_to(ROOT)} ({len(modules)})")
            init = folder / "__init__.py"
            if init.exists() and not ast.get_docstring(ast.parse(init.read_text())):
                undocumented.append(str(folder.relative_to(ROOT)))
    assert not crowded and not undocumented
