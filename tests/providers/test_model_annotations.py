"""The settings models a 1-case `mst run` builds keep evaluated annotations.

Why: pydantic evaluates every string annotation of a model when it builds the model's schema, at
each start of `mst`; a module with ``from __future__ import annotations`` makes every field a
string (bench/perf16_startup.md, session 9: the mock, provider and agent settings). This guards
against the postponed form coming back to these modules.
"""

import importlib
import inspect

import pytest
from pydantic import BaseModel

_MODULES = [
    "mst.config.models",
    "mst.config.judge_llm",
    "mst.config.judge_agentic",
    "mst.config.judge_limits",
    "mst.providers.mock",
    "mst.providers.settings",
    "mst.clients.agent",
]


def _models(module_name: str) -> list[type[BaseModel]]:
    module = importlib.import_module(module_name)
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == module_name
    ]


@pytest.mark.parametrize("module_name", _MODULES)
def test_model_fields_are_not_strings(module_name: str) -> None:
    models = _models(module_name)
    assert models, f"{module_name} defines no pydantic model"
    for model in models:
        strings = {name: hint for name, hint in vars(model).get("__annotations__", {}).items()
                   if isinstance(hint, str)}
        assert not strings, f"{model.__name__}: postponed annotations {strings}"
