"""Tools modules: how the command line finds the tools a plan file names.

A tools module is an importable module, or a ``.py`` file, with a module-level
``registry`` (a ``ToolRegistry``, with each tool's timeouts, retries and approval
gates) or, failing that, ``tools`` (a list of tools, registered with defaults).
``MODULE:NAME`` picks another attribute holding either. The worker a plan runs on
and the command that checks and starts it load the same module, so both agree on
the tool table.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from durable_plan.tools.registry import ToolRegistry

DEFAULT_ATTRIBUTES = ("registry", "tools")


class ToolsModuleError(ValueError):
    """The tools module cannot be loaded; the message is one line with the fix."""


def load_tools(spec: str) -> ToolRegistry:
    """The registry of ``spec``: ``package.module``, ``path/to/file.py``, either ``:NAME``."""
    target, _, attribute = spec.partition(":")
    if not target:
        raise ToolsModuleError(f"--tools {spec!r}: name a module, e.g. examples.plan_tools")
    module = import_user_module(target, spec)
    names = (attribute,) if attribute else DEFAULT_ATTRIBUTES
    for name in names:
        if hasattr(module, name):
            return _as_registry(getattr(module, name), f"{target}:{name}")
    if attribute:
        raise ToolsModuleError(f"tools module {target!r} has no attribute {attribute!r}")
    raise ToolsModuleError(
        f"tools module {target!r} defines neither `registry` (a ToolRegistry) nor `tools` "
        "(a list of tools); define one, or name the attribute as MODULE:NAME"
    )


def import_user_module(target: str, spec: str) -> ModuleType:
    """``package.module`` or ``path/to/file.py``, importable from where the command runs;
    every failure a `ToolsModuleError` in one line (also for `replay --workflows`)."""
    # Like `python -m`: modules next to where the command runs are importable.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if target.endswith(".py") or os.sep in target:
            return _import_file(Path(target))
        return importlib.import_module(target)
    except ToolsModuleError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and target.startswith(exc.name):
            raise ToolsModuleError(
                f"cannot import tools module {target!r}: no module named {exc.name!r} "
                f"(run from the directory that holds it, or pass a path to a .py file)"
            ) from None
        raise ToolsModuleError(f"importing tools module {target!r} failed: {exc}") from None
    except SystemExit as exc:
        # sys.exit() at import time (a script's main() run unguarded) would end the command
        # with the module's status: `validate` exited 0 without validating anything.
        raise ToolsModuleError(
            f"importing tools module {spec!r} called sys.exit({exc.code!r}); a tools module "
            "must define its tools, not run a program: put the script's code under "
            "`if __name__ == '__main__':`"
        ) from None
    except Exception as exc:
        raise ToolsModuleError(
            f"importing tools module {spec!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ToolsModuleError(f"no tools file {str(path)!r}")
    name = f"durable_plan_tools_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ToolsModuleError(f"cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def _as_registry(value: Any, where: str) -> ToolRegistry:
    if isinstance(value, ToolRegistry):
        return value
    if isinstance(value, list | tuple):
        try:
            return ToolRegistry(value)
        except (TypeError, ValueError) as exc:
            raise ToolsModuleError(f"{where}: cannot register these tools: {exc}") from None
    raise ToolsModuleError(
        f"{where} is a {type(value).__name__}; it must be a ToolRegistry or a list of tools"
    )
