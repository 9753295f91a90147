#!/usr/bin/env python3
"""Read aiot's source (without importing it) and measure its floor plan.

Prints one line per measure and, with ``--json FILE``, writes them. ``--check`` exits 1 when a
measure is over the house's limits (issue 30): import cycles (imports inside functions included,
``TYPE_CHECKING`` blocks excluded, since they never run), imports from the lower layers into
``aiot.host``, loose modules in ``host/``, modules over 600 lines, functions other than CLI commands
over 12 parameters, in-function imports of aiot's own modules (issue 30), functions defined twice
and imports against the order of host's wings (issue 36).

Standard library only, so CI and a fresh clone can run it before anything is installed.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Source folders and the aiot sub-package each one installs as.
PACKAGES = {
    "core": "aiot.core",
    "host": "aiot.host",
    "converters": "aiot.converters",
    "models": "aiot.models",
    "device_agent": "aiot.device_agent",
}
LOWER_LAYERS = ("aiot.core", "aiot.converters", "aiot.models", "aiot.device_agent")
LIMITS = {
    "import_cycles": 0,
    "lower_to_host_imports": 0,
    "loose_host_modules": 10,
    "modules_over_600_lines": 0,
    "functions_over_12_params": 0,
    # Issue 30 asked for ≤ 250 (from 915); it reached 84, and the limit holds the gain. Decided
    # in issue 52 to keep it at 100, not to raise it: an aiot import inside a function is kept
    # only where it defers torch, a runtime or a toolchain so that `--help` and the CLI's start
    # stay cheap (bench/cli_startup.py); a new one pays for itself by removing another, or by
    # making the module it defers cheap to import at the top. Issue 53 raised it to 110 for
    # exactly that: every --help page costs at most 2× the CPU of `aiot --help`, so a command
    # whose work needs the engine or NumPy keeps only its options in its module and imports
    # its work (host/cli/*_run.py) in its body, one import per command.
    "in_function_aiot_imports": 110,
    "functions_defined_twice": 0,
    "wing_back_edges": 0,
}

# host's wings from the bottom up: a wing imports only wings before it (and the layers below
# host). Why each stands where it does is written once, in docs/architecture.md ("Host's
# wings, and their order"); the same order is import-linter's layers contract inside host
# (pyproject.toml), and tests/test_house.py holds the two to one order.
WINGS = ("transports", "devices", "native", "app", "emulator", "store", "scores", "training",
         "engine", "lab", "report", "robust", "labview", "predict", "cli")
#: Fewer AST nodes than this in a function's body is too little to call a copy (``return x``).
MIN_TWICE_NODES = 12


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    lines: int
    imports: list[tuple[str, bool]] = field(default_factory=list)  # (target, inside a function)


def module_name(path: Path) -> str | None:
    rel = path.relative_to(ROOT)
    top = rel.parts[0]
    if top not in PACKAGES:
        return None
    parts = [PACKAGES[top], *rel.parts[1:]]
    parts[-1] = parts[-1][: -len(".py")]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def collect() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for top in PACKAGES:
        folder = ROOT / top
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            name = module_name(path)
            text = path.read_text(encoding="utf-8")
            modules[name] = Module(name, path, path.name == "__init__.py", text.count("\n") + 1)
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: Module, node: ast.AST, known: dict[str, Module]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _resolve(module, node)
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in known else base)
    return out


def read_imports(modules: dict[str, Module]) -> None:
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        _walk(module, tree, False, modules)


def _walk(module: Module, node: ast.AST, in_function: bool, known: dict[str, Module]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for sub in child.orelse:
                _walk(module, sub, in_function, known)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            for target in _targets(module, child, known):
                if target == "aiot" or target.startswith("aiot."):
                    module.imports.append((_nearest(target, known), in_function))
            continue
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        _walk(module, child, inner, known)


def _nearest(target: str, known: dict[str, Module]) -> str:
    parts = target.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) or target


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {name: sorted({t for t, _ in m.imports if t in modules and t != name}) for name, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def long_signatures(modules: dict[str, Module]) -> list[str]:
    """Functions over 12 parameters, Typer commands (under ``host/cli``, decorated) excepted."""
    found = []
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        registered = _registered_commands(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
            count -= bool(args.args and args.args[0].arg in ("self", "cls"))
            if count <= 12 or _is_command(module, node, registered):
                continue
            found.append(f"{module.name}.{node.name} ({count})")
    return sorted(found)


def _registered_commands(tree: ast.AST) -> set[str]:
    """Names passed to ``app.command(...)(name)``: commands registered outside a decorator."""
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Call)
            and isinstance(node.func.func, ast.Attribute)
            and node.func.func.attr in ("command", "callback")
        ):
            names.update(arg.id for arg in node.args if isinstance(arg, ast.Name))
    return names


def _is_command(module: Module, node: ast.FunctionDef, registered: set[str]) -> bool:
    if not module.name.startswith("aiot.host.cli"):
        return False
    if node.name in registered:
        return True
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr in ("command", "callback"):
            return True
    return False


def _own_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def defined_twice(modules: dict[str, Module]) -> list[str]:
    """Module-level functions defined in two modules or more: the same parameters and body
    (docstring dropped, the functions' own names ignored), of at least ``MIN_TWICE_NODES`` AST
    nodes. A body that reads a name its own module defines is not a copy: it is one module's
    entry point of a protocol (each agent backend's ``open`` returns its own ``Session``)."""
    bodies: dict[str, list[str]] = {}
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        own = _own_names(tree)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            shape = ast.Module(body=body, type_ignores=[])
            nodes = list(ast.walk(shape))
            reads_own = any(isinstance(n, ast.Name) and n.id in own for n in nodes)
            if len(nodes) < MIN_TWICE_NODES or reads_own:
                continue
            text = ast.dump(node.args, annotate_fields=False) + ast.dump(shape, annotate_fields=False)
            bodies.setdefault(text, []).append(f"{module.name}.{node.name}")
    return sorted(" = ".join(names) for names in bodies.values() if len(names) > 1)


def _wing(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["aiot", "host"] else None


def wing_back_edges(modules: dict[str, Module]) -> list[str]:
    """Imports from one of host's wings into a wing above it in ``WINGS``."""
    rank = {wing: i for i, wing in enumerate(WINGS)}
    found = []
    for module in modules.values():
        source = _wing(module.name)
        for target, _ in module.imports:
            wing = _wing(target)
            if source in rank and wing in rank and rank[wing] > rank[source]:
                found.append(f"{module.name} -> {target}")
    return sorted(set(found))


def measure() -> dict:
    modules = collect()
    read_imports(modules)
    found_cycles = cycles(modules)
    lower_to_host = sorted(
        f"{m.name} -> {t}"
        for m in modules.values()
        if m.name.startswith(LOWER_LAYERS)
        for t, _ in m.imports
        if t == "aiot.host" or t.startswith("aiot.host.")
    )
    loose = sorted(
        p.name for p in (ROOT / "host").glob("*.py") if p.name != "__init__.py"
    )
    big = sorted(f"{m.name} ({m.lines})" for m in modules.values() if m.lines > 600)
    in_function = sum(inner for m in modules.values() for _, inner in m.imports)
    return {
        "modules": len(modules),
        "lines": sum(m.lines for m in modules.values()),
        "import_cycles": len(found_cycles),
        "cycle_sizes": [len(c) for c in found_cycles],
        "cycles": found_cycles,
        "lower_to_host_imports": len(lower_to_host),
        "lower_to_host": lower_to_host,
        "loose_host_modules": len(loose),
        "loose_host": loose,
        "modules_over_600_lines": len(big),
        "big_modules": big,
        "functions_over_12_params": len(long_signatures(modules)),
        "long_signatures": long_signatures(modules),
        "in_function_aiot_imports": in_function,
        "aiot_imports": sum(len(m.imports) for m in modules.values()),
        "functions_defined_twice": len(twice := defined_twice(modules)),
        "defined_twice": twice,
        "wing_back_edges": len(back := wing_back_edges(modules)),
        "back_edges": back,
    }


def over_limits(result: dict) -> list[str]:
    return [f"{key}: {result[key]} > {limit}" for key, limit in LIMITS.items() if result[key] > limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the measures to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 when a measure is over its limit")
    parser.add_argument("-v", "--verbose", action="store_true", help="list what each measure counts")
    args = parser.parse_args(argv)
    result = measure()
    for key in ("modules", "lines", "aiot_imports", *LIMITS):
        limit = f"  (limit {LIMITS[key]})" if key in LIMITS else ""
        print(f"{key:28} {result[key]}{limit}")
    if args.verbose:
        for key in ("cycles", "lower_to_host", "loose_host", "big_modules", "long_signatures",
                    "defined_twice", "back_edges"):
            print(f"\n{key}:")
            for item in result[key]:
                print(f"  {item}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.check and (problems := over_limits(result)):
        print("over the house's limits: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
