"""The plan's graph: cycles, named as a path of edges, and the levels steps run in."""

from __future__ import annotations

from collections.abc import Mapping


def _find_cycles(deps: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """Each distinct cycle once, as a path, found by an iterative depth-first search."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for root in deps:
        if color[root] != white:
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(deps[root]))]
        path = [root]
        color[root] = grey
        while stack:
            node, todo = stack[-1]
            if not todo:
                color[node] = black
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop(0)
            if nxt not in color:
                continue
            if color[nxt] == grey:
                cycle = path[path.index(nxt) :]
                key = _rotate(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append(list(key))
            elif color[nxt] == white:
                color[nxt] = grey
                stack.append((nxt, sorted(deps[nxt])))
                path.append(nxt)
    return cycles


def _rotate(cycle: list[str]) -> tuple[str, ...]:
    start = cycle.index(min(cycle))
    return tuple(cycle[start:] + cycle[:start])


def _levels(deps: Mapping[str, frozenset[str]]) -> dict[str, int]:
    """Longest-path depth of each step (Kahn's order); the graph is acyclic here."""
    level: dict[str, int] = {}
    remaining = {sid: set(d) for sid, d in deps.items()}
    dependents: dict[str, list[str]] = {sid: [] for sid in deps}
    for sid, d in deps.items():
        for dep in d:
            dependents[dep].append(sid)
    frontier = [sid for sid, d in remaining.items() if not d]
    for sid in frontier:
        level[sid] = 0
    while frontier:
        nxt: list[str] = []
        for sid in frontier:
            for child in dependents[sid]:
                level[child] = max(level.get(child, 0), level[sid] + 1)
                remaining[child].discard(sid)
                if not remaining[child]:
                    nxt.append(child)
        frontier = nxt
    return level
