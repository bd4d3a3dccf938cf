"""Delivering a process's spans and metrics before it leaves.

Our entry points leave with ``os._exit`` (``connection.exit_now``: the Temporal runtime's
native threads can crash the interpreter's finalization), which skips ``atexit``, where
the OpenTelemetry SDK shuts its providers down. A ``BatchSpanProcessor`` (the default of
``tracing_plugin``, and the one a network exporter needs) still holds every span of its
last few seconds there, and a periodic metric reader every metric since its last export:
a short script, a command or a worker stopped by SIGTERM delivered none of them.

``flush_telemetry`` is the one place that delivers them, called by ``exit_now``: every
provider ``keep_flushed`` registered (``tracing_plugin``'s) and the process's global
tracer, meter and logger providers an application set, each flushed and then shut down,
all within one bounded time. A collector that does not answer costs at most
``FLUSH_TIMEOUT_S``; then the process leaves anyway and says, in one line, what it dropped.
"""

from __future__ import annotations

import contextlib
import sys
import threading

FLUSH_TIMEOUT_S = 5.0
"""How long leaving waits for the exporters: the SDK's own ``force_flush`` ignores its
timeout (open-telemetry/opentelemetry-python#4568), so the wait is bounded here."""

_KEPT: list[object] = []
_KEPT_LOCK = threading.Lock()


def keep_flushed(provider: object) -> None:
    """Flush and shut ``provider`` down when the process leaves through ``exit_now``, even
    when it is not (or no longer) the global one."""
    with _KEPT_LOCK:
        if not any(kept is provider for kept in _KEPT):
            _KEPT.append(provider)


def telemetry_providers() -> list[object]:
    """The providers to deliver before leaving: the kept ones, then the global tracer,
    meter and logger providers, each once. The API's defaults (a proxy or a no-op, what a
    process that set nothing has) neither flush nor shut down, so what can is what an
    application set. Nothing is imported for a process that never imported OpenTelemetry:
    it set no provider."""
    with _KEPT_LOCK:
        found = list(_KEPT)
    for module, getter in (
        ("opentelemetry.trace", "get_tracer_provider"),
        ("opentelemetry.metrics", "get_meter_provider"),
        ("opentelemetry._logs", "get_logger_provider"),
    ):
        api = sys.modules.get(module)
        if api is None:
            continue
        provider = getattr(api, getter)()
        if _flushable(provider) and not any(provider is seen for seen in found):
            found.append(provider)
    return found


def _flushable(provider: object) -> bool:
    return callable(getattr(provider, "force_flush", None)) or callable(
        getattr(provider, "shutdown", None)
    )


def flush_telemetry(timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
    """Flush and shut down every telemetry provider (``telemetry_providers``) within
    ``timeout_s``; True when all of them finished.

    The providers run on a daemon thread, so an exporter stuck on a collector that does
    not answer is left behind when the process leaves; a second Ctrl-C while waiting
    leaves at once. A provider that fails is named on stderr, and so is a timeout: spans
    lost on the way out are a visible ending, never a silent one."""
    providers = telemetry_providers()
    if not providers:
        return True
    done = threading.Event()

    def deliver() -> None:
        for provider in providers:
            for method in ("force_flush", "shutdown"):
                call = getattr(provider, method, None)
                if not callable(call):
                    continue
                try:
                    call()
                except Exception as exc:  # one provider's failure must not keep the rest
                    _say(f"{method} of {type(provider).__name__} failed: {exc}")
                    break
        done.set()

    threading.Thread(target=deliver, name="durable-plan-telemetry-flush", daemon=True).start()
    try:
        if done.wait(timeout_s):
            return True
    except KeyboardInterrupt:  # a second Ctrl-C: the person wants out now
        _say("interrupted while exporting spans and metrics; what was still queued is dropped")
        return False
    _say(
        f"spans and metrics not exported within {timeout_s:g} s are dropped on exit "
        "(does the OpenTelemetry collector answer?)"
    )
    return False


def _say(text: str) -> None:
    # A closed stderr (a reader that left): nothing is left to tell.
    with contextlib.suppress(OSError, ValueError):
        print(f"durable-plan: telemetry: {text}", file=sys.stderr, flush=True)
