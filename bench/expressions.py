"""What bounding expressions costs, and how long the worst expression can run.

    python -m bench.expressions [--repeat N]

Section 1 evaluates typical bindings side by side, in one run: raw jsonata
(the parsed instance, no meter, jsonata's own input walk on) against
``expressions.evaluate`` (RE2, the evaluation meter, guarded natives, the
bounded JSON conversion). Section 2 times hostile expressions from parse to
refusal: the longest any single binding can hold a worker (in workflow code
the whole plan's budget must stay well under Temporal's 2 s deadlock timeout).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jsonata

from bench._report import command_line, machine_line, markdown_table
from durable_plan import expressions
from durable_plan.language.plan_limits import DEFAULT_LIMITS

SCOPE: dict[str, Any] = {
    "steps": {
        "lookup": {"name": "goblin", "hp": 7, "armour": 15},
        "attack": {"roll": 18, "hits": True, "damage": 6},
        "log": {"actions": [{"player": p, "target": "ogre"} for p in ("aria", "brom", "cyra")]},
        "items": {"list": [{"price": n, "qty": n % 3} for n in range(200)]},
    }
}
TYPICAL = {
    "path": "steps.lookup.armour",
    "array": "[steps.attack.damage, steps.lookup.hp]",
    "condition": 'steps.lookup.hp > 5 and steps.lookup.name = "goblin"',
    "index": "steps.log.actions[1].player",
    "aggregate": "$sum(steps.items.list.(price * qty))",
    "regex": "$contains(steps.lookup.name, /gob/i)",
}
HOSTILE = {
    "tail call forever": "($f := function($n){$f($n+1)}; $f(0))",
    "catastrophic regex": "$contains('" + "a" * 3000 + "!', /^(a+)+$/)",
    "10M range": "$sum([1..10000000])",
    "string doubling": "$reduce([1..40], function($a, $x){$a & $a}, 'a')",
    "deep value": "$reduce([1..12000], function($a, $x){{'a': $a}}, 0)",
    "quadratic append": "$reduce([1..5000], function($a, $x){$append($a, $x)}, [])",
}


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def raw_evaluator(source: str, *, walk_input: bool = True) -> Callable[[], Any]:
    compiled = jsonata.Jsonata(source)
    compiled.set_validate_input(walk_input)

    def run() -> Any:
        jsonata.Jsonata.CURRENT.jsonata = compiled
        return compiled.evaluate(SCOPE)

    return run


def bounded_evaluator(source: str) -> Callable[[], Any]:
    parsed = expressions.parse(source)
    return lambda: expressions.evaluate(parsed, SCOPE, deterministic=True)


def section_overhead(repeat: int) -> list[float]:
    print(f"1. Typical bindings, microseconds (median of {repeat}, interleaved)\n")
    print("raw: jsonata as before (walks its whole input each time); raw-nowalk: without")
    print("that walk; bounded: expressions.evaluate (meter, guards, bounded JSON)\n")
    rows: list[list[object]] = []
    ratios = []
    for name, source in TYPICAL.items():
        runners = [
            raw_evaluator(source),
            raw_evaluator(source, walk_input=False),
            bounded_evaluator(source),
        ]
        samples: list[list[float]] = [[], [], []]
        for _ in range(3):  # interleaved rounds, so load shifts hit all three
            for i, run in enumerate(runners):
                samples[i] += timed(run, repeat // 3)
        raw, nowalk, bounded = (statistics.median(s) for s in samples)
        ratios.append(bounded / nowalk)
        rows.append([name, raw, nowalk, bounded, f"{bounded / nowalk:.2f}x"])
    print(markdown_table(["expression", "raw", "raw-nowalk", "bounded", "meter cost"], rows))
    return ratios


def section_hostile() -> float:
    print("\n2. Hostile bindings: time from evaluation to refusal (or answer), seconds\n")
    rows: list[list[object]] = []
    worst = 0.0
    for name, source in HOSTILE.items():
        started = time.perf_counter()
        try:
            _, value = expressions.evaluate(expressions.parse(source), {}, deterministic=True)
            outcome = f"answer {value!r}"[:40]
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:60]}"
        elapsed = time.perf_counter() - started
        worst = max(worst, elapsed)
        rows.append([name, f"{elapsed:.3f}", outcome.replace("|", "\\|")])
    print(markdown_table(["binding", "seconds", "outcome"], rows))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=600)
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    print("## Bounded expressions: what the meter costs, and hostile bindings\n")
    print(f"`{command_line('bench.expressions')}`\n")
    print(machine_line(load_start, extra="no server") + "\n")
    ratios = section_overhead(args.repeat)
    worst = section_hostile()
    limits = DEFAULT_LIMITS
    print("\n3. Targets")
    ratio = statistics.median(ratios)
    verdict = "PASS" if ratio < 3.0 else "MISS"
    print(f"{verdict}  bounded / raw-nowalk median {ratio:.2f}x (target < 3x: the meter is cheap)")
    verdict = "PASS" if worst < 1.0 else "MISS"
    print(
        f"{verdict}  worst hostile binding {worst:.3f} s (target < 1 s; per-evaluation budget "
        f"{limits.max_steps} steps, plan budget {limits.max_plan_steps})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
