"""Field defaults for mst's pydantic models that keep building the models cheap at startup.

Pydantic inspects every ``default_factory``'s signature when it builds a model (a factory may
take the validated data). For the builtin ``list`` that means parsing its text signature with
:mod:`tokenize`, whose first use compiles a large regular expression: about 8 ms of every
``mst run`` before anything is validated, and 0.2 ms per field after that. A plain function has a
real signature, read without parsing. Imports nothing (any package's models may use it).
"""

from __future__ import annotations

from typing import Any


def empty_list() -> list[Any]:
    """A new empty list: ``Field(default_factory=empty_list)`` where ``list`` would do."""
    return []
