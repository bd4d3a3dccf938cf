"""Break-even: a plain tool-calling loop vs one plan, for chains of depth 1-6.

    python -m bench.breakeven                    # default: 1.5 s per model call, 5 repeats
    python -m bench.breakeven --quick            # depths 1, 2, 3, 6; 0.3 s per call; 2 repeats
    python -m bench.breakeven --live --model ID  # a real Bedrock model instead of the script

Every arm is the same ``TemporalAgent`` on a dev server this benchmark starts itself
(``DevServer``, tuned defaults, in memory) with an in-process worker. The chain's six
tools (``bench/_breakeven_chain.py``) each sleep 250 ms; the question at depth D needs
the first D of them, each argument coming from the previous result. Arms:

  loop        no plugin: the model calls one tool per model call, then answers
              (D + 1 model calls)
  plan        ``WorkflowPlanPlugin``: one ``submit_workflow_plan`` call carrying the chain,
              marked final, so its results end the turn (1 model call, as the demo)
  plan+prose  the same plan with ``honor_final=False``: the model reads the plan's
              results and answers in words (2 model calls)

Offline, the model is ``ScriptedModel`` (a real Strands model; the real agent loop and
``invoke_model`` activities run), answering from a script after a simulated latency
per call (``--model-latency``).

**Model round trip** = one model call: one ``invoke_model`` activity in the
conversation's workflow history (counted there, and checked against Strands'
``cycle_count``, which is what the demo prints as "model round trips").

**Input tokens** = what the model was sent, summed over the conversation's model
calls: the system prompt, the messages and the tool specs, exactly as each
``invoke_model`` activity received them (read back from the workflow history), counted
with the tokenizer the table names (``bench/_tokens.py``). ``--live`` adds the
provider's own count.

**Spec tokens** = the plan tool's spec alone (its name, description and input schema,
as sent), which the plan arms pay on every model call (``bench/spec_size.py`` sets it
beside the seed plan tool's). **Break-even depth** = the first measured depth at which
the plan arm's median tokens are fewer than the loop's.

Prints a Markdown table (medians over ``--repeats``; runs interleaved in a shuffled order)
with the machine and the exact command. Never asserts timings; a run whose tools or
answer are wrong is listed under the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strands.models import Model
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Worker

from bench import _breakeven_chain as chain
from bench._breakeven_workflow import BreakEvenInput, BreakEvenOutput, BreakEvenWorkflow
from bench._report import server_version
from bench._tokens import TokenCounter, TokenizerChoice, token_counter
from bench.spec_size import PLAN_TOOL, spec_text
from durable_plan import plan_worker
from durable_plan.server.connection import exit_now
from durable_plan.server.devserver import DevServer
from durable_plan.testing import ScriptedModel
from durable_plan.testing.scripted_model import MODEL_ACTIVITY_NAMES

DEFAULT_MODEL_LATENCY_S = 1.5
QUICK_MODEL_LATENCY_S = 0.3
DEFAULT_TOOL_LATENCY_S = 0.25
DEFAULT_REPEATS = 5
QUICK_REPEATS = 2
QUICK_DEPTHS = (1, 2, 3, 6)
LIVE_MODEL = "live"


@dataclass(frozen=True)
class Arm:
    """One way of answering: a plain loop, or a plan (ending the turn, or then prose)."""

    name: str
    plan: bool
    honor_final: bool = True


ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("loop", plan=False),
        Arm("plan", plan=True),
        Arm("plan+prose", plan=True, honor_final=False),
    )
}


@dataclass(frozen=True)
class Run:
    """One conversation, measured."""

    arm: str
    depth: int
    wall_s: float
    round_trips: int
    """Model calls: ``invoke_model`` activities in the conversation's history."""
    cycle_count: int
    """Strands' own count of model calls (what the demo prints)."""
    input_tokens: int
    """System prompt + messages + tool specs sent, summed over calls, by the bench's counter."""
    reported_input_tokens: int
    """The model's own ``inputTokens`` (the provider's count when live)."""
    used_plan: bool
    tools_ran: tuple[str, ...]
    correct: bool
    answer: str
    error: str | None = None
    spec_tokens: int = 0
    """The plan tool's spec as sent in the first model call (0: the agent had none)."""


# -- models, client, worker ------------------------------------------------------------------


def scripted_models(latency_s: float) -> dict[str, Callable[[], Model]]:
    """One scripted model per arm (their scripts differ for the same prompt), each with
    ``latency_s`` of simulated latency per call."""
    builds: dict[str, Callable[[int], list[Any]]] = {
        "loop": chain.loop_script,
        "plan": lambda d: chain.plan_script(d, prose=False),
        "plan+prose": lambda d: chain.plan_script(d, prose=True),
    }

    def factory(build: Callable[[int], list[Any]]) -> Callable[[], Model]:
        return lambda: ScriptedModel(
            scripts=chain.scripts(build), latency_s=latency_s, name="scripted-breakeven"
        )

    return {model_name(arm, live=False): factory(build) for arm, build in builds.items()}


def bedrock_model(model_id: str) -> Callable[[], Model]:
    """A Bedrock model with botocore retries off (Temporal retries the model activity)."""

    def build() -> Model:
        from botocore.config import Config  # type: ignore[import-untyped]
        from strands.models.bedrock import BedrockModel

        return BedrockModel(
            model_id=model_id, boto_client_config=Config(retries={"max_attempts": 0})
        )

    return build


def model_name(arm: str, *, live: bool) -> str:
    """The ``StrandsPlugin`` model name an arm's agent uses."""
    return LIVE_MODEL if live else f"scripted-{arm}"


def check_live_credentials() -> None:
    """Stop with one line before anything starts when no AWS credentials are found."""
    import boto3  # type: ignore[import-untyped]

    if boto3.Session().get_credentials() is None:
        raise SystemExit(
            "--live needs AWS credentials with Bedrock access: export AWS_PROFILE=... "
            "(or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and AWS_REGION=..."
        )


async def connect(target: str, models: dict[str, Callable[[], Model]]) -> Client:
    """A client carrying the Strands plugin: its models and pydantic converter."""
    return await Client.connect(target, plugins=[StrandsPlugin(models=models)])


def breakeven_worker(client: Client, task_queue: str) -> Worker:
    """The plan workflows, the chain tools' activities and the benchmark's agent workflow."""
    return plan_worker(
        client, task_queue=task_queue, registry=chain.CHAIN_TOOLS, workflows=[BreakEvenWorkflow]
    )


# -- one conversation -------------------------------------------------------------------------


def model_inputs(history: Any) -> list[dict[str, Any]]:
    """What each model call was sent: the decoded input of every model activity."""
    inputs: list[dict[str, Any]] = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attrs = event.activity_task_scheduled_event_attributes
        if attrs.activity_type.name not in MODEL_ACTIVITY_NAMES:
            continue
        payload = attrs.input.payloads[0]
        encoding = payload.metadata.get("encoding", b"").decode()
        if encoding != "json/plain":
            raise ValueError(
                f"model activity input is {encoding!r}, not json/plain: token counting reads "
                "plain JSON payloads (run without a payload codec)"
            )
        inputs.append(json.loads(payload.data))
    return inputs


def sent_text(model_input: dict[str, Any]) -> str:
    """The text of one model call: system prompt, messages and tool specs (compact JSON)."""

    def compact(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    parts = [
        model_input.get("system_prompt") or "",
        compact(model_input.get("messages") or []),
        compact(model_input.get("tool_specs") or []),
    ]
    return "\n".join(parts)


def plan_spec_tokens(model_input: dict[str, Any], counter: TokenCounter) -> int:
    """Tokens of the plan tool's spec within one model call's tool specs (0 if absent)."""
    for spec in model_input.get("tool_specs") or []:
        if isinstance(spec, dict) and spec.get("name") == PLAN_TOOL:
            return counter.count(spec_text(spec))
    return 0


def _normalized(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def is_correct(depth: int, answer: str, ran: Sequence[tuple[str, dict[str, Any], Any]]) -> bool:
    """The chain's last tool gave the expected result, and the answer carries it."""
    last = chain.LINKS[depth - 1].name
    results = [result for tool, _args, result in ran if tool == last]
    return chain.final_result(depth) in results and _normalized(
        chain.expected_text(depth)
    ) in _normalized(answer)


async def run_once(
    client: Client,
    task_queue: str,
    arm: Arm,
    depth: int,
    *,
    counter: TokenCounter,
    live: bool = False,
) -> Run:
    """One conversation at ``depth`` in ``arm``: its wall clock, model calls and tokens."""
    request = BreakEvenInput(
        prompt=chain.prompt(depth),
        model=model_name(arm.name, live=live),
        plan=arm.plan,
        honor_final=arm.honor_final,
    )
    first_tool = len(chain.TOOL_LOG)
    started = time.perf_counter()
    handle = await client.start_workflow(
        BreakEvenWorkflow.run,
        request,
        id=f"breakeven-{arm.name.replace('+', '-')}-d{depth}-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
    )
    error: str | None = None
    try:
        output = await handle.result()
    except WorkflowFailureError as exc:
        if not live:
            raise  # the script and the tools are ours: a failure is a bug, not a data point
        error = f"{exc.cause or exc}"
        output = BreakEvenOutput(answer="", cycle_count=0, plans=0, reported_input_tokens=0)
    wall = time.perf_counter() - started
    ran = chain.TOOL_LOG[first_tool:]
    inputs = model_inputs(await handle.fetch_history())
    return Run(
        arm=arm.name,
        depth=depth,
        wall_s=wall,
        round_trips=len(inputs),
        cycle_count=output.cycle_count,
        input_tokens=sum(counter.count(sent_text(i)) for i in inputs),
        reported_input_tokens=output.reported_input_tokens,
        used_plan=output.plans > 0,
        tools_ran=tuple(tool for tool, _args, _result in ran),
        correct=error is None and is_correct(depth, output.answer, ran),
        answer=output.answer,
        error=error,
        spec_tokens=plan_spec_tokens(inputs[0], counter) if inputs else 0,
    )


async def sweep(
    client: Client,
    task_queue: str,
    arms: Sequence[Arm],
    depths: Sequence[int],
    repeats: int,
    *,
    counter: TokenCounter,
    live: bool = False,
    seed: int = 14,
    progress: Callable[[str], None] | None = None,
) -> list[Run]:
    """Every (arm, depth) ``repeats`` times, shuffled within each repeat so a noisy,
    shared machine hits all cells alike."""
    rng = random.Random(seed)
    cells = [(arm, depth) for depth in depths for arm in arms]
    runs: list[Run] = []
    for repeat in range(repeats):
        order = cells[:]
        rng.shuffle(order)
        for arm, depth in order:
            run = await run_once(client, task_queue, arm, depth, counter=counter, live=live)
            runs.append(run)
            if progress is not None:
                progress(
                    f"repeat {repeat + 1}/{repeats} {arm.name:<10} depth {depth}: "
                    f"{run.wall_s:.2f} s, {run.round_trips} round trips"
                    + ("" if run.correct else "  (NOT CORRECT)")
                )
    return runs


# -- the report -------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _trips(runs: Sequence[Run]) -> str:
    trips = [r.round_trips for r in runs]
    low, high = min(trips), max(trips)
    middle = f"{_median(trips):g}"
    return middle if low == high else f"{middle} ({low}-{high})"


def _change(ours: float, base: float) -> str:
    return f"{(ours - base) / base:+.0%}" if base else "n/a"


def break_even_depth(runs: Sequence[Run], depths: Sequence[int]) -> int | None:
    """The first measured depth at which the plan sends fewer tokens than the loop (medians)."""
    for depth in sorted(depths):
        loop = [r.input_tokens for r in runs if r.arm == "loop" and r.depth == depth]
        plan = [r.input_tokens for r in runs if r.arm == "plan" and r.depth == depth]
        if loop and plan and _median(plan) < _median(loop):
            return depth
    return None


def spec_line(runs: Sequence[Run], depths: Sequence[int]) -> str | None:
    """The plan tool's spec tokens per model call, and the break-even depth, in one line."""
    spec = sorted({r.spec_tokens for r in runs if r.spec_tokens})
    if not spec:
        return None
    tokens = "/".join(str(t) for t in spec)
    line = f"plan tool's spec: {tokens} tokens, sent with every model call of the plan arms"
    if not ({"loop", "plan"} <= {r.arm for r in runs}):
        return line + "."
    depth = break_even_depth(runs, depths)
    measured = ", ".join(str(d) for d in sorted(depths))
    where = f"from depth {depth}" if depth is not None else "at no measured depth"
    return f"{line}; the plan sends fewer tokens than the loop {where} (measured: {measured})."


def table(runs: Sequence[Run], arms: Sequence[Arm], depths: Sequence[int], *, live: bool) -> str:
    """The Markdown table: per depth, each arm's median wall, round trips and tokens."""
    cells = {
        (a.name, d): [r for r in runs if r.arm == a.name and r.depth == d]
        for a in arms
        for d in depths
    }
    header = ["depth"]
    for arm in arms:
        header += [f"{arm.name} wall s", f"{arm.name} trips", f"{arm.name} tokens"]
        if live:
            header += [f"{arm.name} provider tokens"]
        if live and arm.plan:
            header += [f"{arm.name} planned"]
    compare = "plan" in {a.name for a in arms} and "loop" in {a.name for a in arms}
    if compare:
        header += ["plan vs loop: wall, tokens"]
    lines = ["| " + " | ".join(header) + " |", "|" + " ---: |" * len(header)]
    for depth in depths:
        row = [str(depth)]
        for arm in arms:
            xs = cells[arm.name, depth]
            row += [
                f"{_median([r.wall_s for r in xs]):.2f}",
                _trips(xs),
                f"{_median([r.input_tokens for r in xs]):.0f}",
            ]
            if live:
                row += [f"{_median([r.reported_input_tokens for r in xs]):.0f}"]
            if live and arm.plan:
                row += [f"{sum(r.used_plan for r in xs)}/{len(xs)}"]
        if compare:
            loop, plan = cells["loop", depth], cells["plan", depth]
            wall = _change(_median([r.wall_s for r in plan]), _median([r.wall_s for r in loop]))
            tokens = _change(
                _median([r.input_tokens for r in plan]), _median([r.input_tokens for r in loop])
            )
            row += [f"{wall}, {tokens}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Setting:
    """What the report states about how it was measured."""

    command: str
    live_model: str | None
    model_latency_s: float
    tool_latency_s: float
    repeats: int
    counter: str
    version: str
    load_start: float
    load_end: float
    elapsed_s: float


def report(runs: Sequence[Run], arms: Sequence[Arm], depths: Sequence[int], s: Setting) -> str:
    """The whole printed report: heading, command, machine, definitions, table, problems."""
    live = s.live_model is not None
    model = (
        f"Bedrock `{s.live_model}` (live)"
        if live
        else f"scripted model, {s.model_latency_s:g} s simulated latency per call"
    )
    lines = [
        "### Break-even: loop vs plan",
        "",
        f"`{s.command}`",
        "",
        f"machine: {os.cpu_count()} cores, load {s.load_start:.1f} at start / {s.load_end:.1f} "
        f"at end, Python {platform.python_version()}, {s.version}; dev server started by the "
        f"bench (DevServer tuned defaults, in memory), in-process worker; {s.elapsed_s:.0f} s",
        "",
        f"{model}; tools {s.tool_latency_s * 1000:g} ms each; TemporalAgent in both arms; "
        f"median of {s.repeats} runs per cell, interleaved. *trips*: model round trips = model "
        "calls (`invoke_model` activities in the history; Strands' `cycle_count`, as the demo "
        f"prints). *tokens*: input tokens sent to the model summed over its calls (system "
        f"prompt + messages + tool specs), counted as {s.counter}."
        + (" *provider tokens*: the provider's own `inputTokens`." if live else ""),
        "",
        table(runs, arms, depths, live=live),
    ]
    spec = spec_line(runs, depths)
    if spec is not None:
        lines += ["", spec]
    mismatched = [r for r in runs if r.error is None and r.cycle_count != r.round_trips]
    wrong = [r for r in runs if not r.correct]
    if mismatched:
        lines += ["", f"Round trips differ from Strands' cycle_count in {len(mismatched)} runs."]
    if wrong:
        lines += ["", f"Not correct ({len(wrong)} of {len(runs)} runs):"]
        lines += [
            f"- {r.arm} depth {r.depth}: {r.error or 'answer ' + repr(r.answer[:120])}; "
            f"tools ran: {', '.join(r.tools_ran) or 'none'}"
            for r in wrong
        ]
    return "\n".join(lines)


# -- command line -----------------------------------------------------------------------------


def _depths(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    bad = [v for v in values if not 1 <= v <= chain.MAX_DEPTH]
    if not values or bad:
        raise argparse.ArgumentTypeError(
            f"depths must be a comma-separated list within 1..{chain.MAX_DEPTH}, got {text!r}"
        )
    return values


def _arms(text: str) -> list[Arm]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in ARMS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"arms are some of {', '.join(ARMS)}; got {text!r}")
    return [ARMS[n] for n in names]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.breakeven", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="depths 1,2,3,6; 0.3 s; 2 repeats")
    parser.add_argument("--depths", type=_depths, help="comma-separated (default 1,2,3,4,5,6)")
    parser.add_argument("--arms", type=_arms, default=list(ARMS.values()), help=",".join(ARMS))
    parser.add_argument("--repeats", type=int, help=f"runs per cell (default {DEFAULT_REPEATS})")
    parser.add_argument(
        "--model-latency",
        type=float,
        help=f"seconds per scripted model call (default {DEFAULT_MODEL_LATENCY_S})",
    )
    parser.add_argument("--tool-latency", type=float, default=DEFAULT_TOOL_LATENCY_S)
    parser.add_argument(
        "--tokens",
        choices=["auto", "o200k", "chars"],
        default="auto",
        help="o200k (bpe-openai, the bench extra) or characters / 4; auto: o200k if installed",
    )
    parser.add_argument("--live", action="store_true", help="a real Bedrock model (needs --model)")
    parser.add_argument("--model", help="Bedrock model or inference-profile id, with --live")
    args = parser.parse_args(argv)
    if args.live and not args.model:
        parser.error("--live needs --model ID (a Bedrock model or inference-profile id)")
    if args.model and not args.live:
        parser.error("--model is for --live runs; offline runs use the scripted model")
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.depths is None:
        args.depths = list(QUICK_DEPTHS) if args.quick else list(range(1, chain.MAX_DEPTH + 1))
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if args.model_latency is None:
        args.model_latency = QUICK_MODEL_LATENCY_S if args.quick else DEFAULT_MODEL_LATENCY_S
    return args


async def main_async(args: argparse.Namespace, command: str) -> str:
    """Start the dev server and worker, warm up, sweep, and return the report."""
    tokenizer: TokenizerChoice = args.tokens
    counter = token_counter(tokenizer)
    chain.set_tool_latency(args.tool_latency)
    models = (
        {LIVE_MODEL: bedrock_model(args.model)}
        if args.live
        else scripted_models(args.model_latency)
    )
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    with DevServer(headless=True) as server:
        client = await connect(server.target, models)
        task_queue = f"breakeven-{uuid.uuid4().hex[:8]}"
        async with breakeven_worker(client, task_queue):
            for arm in args.arms:  # warm-up: imports, connections, caches; not recorded
                await run_once(client, task_queue, arm, 1, counter=counter, live=args.live)
            runs = await sweep(
                client,
                task_queue,
                args.arms,
                args.depths,
                args.repeats,
                counter=counter,
                live=args.live,
                progress=lambda line: print(line, file=sys.stderr, flush=True),
            )
        version = server_version(server.binary)
    setting = Setting(
        command=command,
        live_model=args.model if args.live else None,
        model_latency_s=args.model_latency,
        tool_latency_s=args.tool_latency,
        repeats=args.repeats,
        counter=counter.name,
        version=version,
        load_start=load_start,
        load_end=os.getloadavg()[0],
        elapsed_s=time.perf_counter() - started,
    )
    return report(runs, args.arms, args.depths, setting)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.live:
        check_live_credentials()
    shown = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python -m bench.breakeven", *shown])
    print(asyncio.run(main_async(args, command)))
    return 0


if __name__ == "__main__":
    exit_now(main())  # no interpreter finalization: temporalio/sdk-python#300
