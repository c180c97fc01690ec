"""Load a script of tools/ as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module (not left in sys.modules, where its dataclasses look their module up
    while it loads)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module
