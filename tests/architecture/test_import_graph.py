"""voicelat's import graph has no circle, and no module of it imports the package root.

A circle (a imports b, b imports a, directly or around a longer loop) means two modules are one
unit in disguise and the layers cannot be read bottom-up. Imports inside functions and under
``TYPE_CHECKING`` count: they are hidden circles, not broken ones. The graph is grimp's, the
one import-linter checks the layer contracts on (pyproject.toml, ``lint-imports``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grimp

ROOT = "voicelat"


def strongly_connected(
    nodes: Iterable[str], successors: Callable[[str], Iterable[str]]
) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    for root in sorted(nodes):
        if root in index:
            continue
        # Iterative depth-first search: (node, its successors still to visit).
        work = [(root, iter(sorted(successors(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            child = next(todo, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return found


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(ROOT, cache_dir=None)


def test_no_import_circle() -> None:
    graph = _graph()
    circles = strongly_connected(graph.modules, graph.find_modules_directly_imported_by)
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_no_module_imports_the_package_root() -> None:
    # The root re-exports the public API (it imports the engine, the stages...): a module of
    # the package importing it would close a circle through all of them.
    assert _graph().find_modules_that_directly_import(ROOT) == set()


def test_the_circle_finder_finds_circles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert strongly_connected(edges, lambda n: edges[n]) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected({"x": {"y"}, "y": set()}, lambda n: {"x": {"y"}, "y": set()}[n]) == []
