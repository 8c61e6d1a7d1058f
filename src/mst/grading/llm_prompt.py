"""What an LLM judge sees: the prompt of one trial, or of one pairwise order (docs/grading.md).

``sees`` decides what is shown, nothing else is; a prompt over the judge's token budget is cut —
the long supporting material first, each in its middle — with a visible marker, never silently.
Pairwise prompts name the sides "Response 1" and "Response 2" and nothing of which variant is which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from mst.config.judge_llm import PLACEHOLDER, TEMPLATE_FIELDS, LlmJudgeConfig, Sees
from mst.grading.judges import CaseView, TrialView
from mst.session.io import TranscriptError
from mst.session.render import render_transcript

CHARS_PER_TOKEN: Final = 4  # the budget's estimate; a cut that is a little early is harmless
_CUT: Final = "[… {n} characters cut: {what} over the judge's budget …]"

SCALE_ASK: Final[dict[str, str]] = {
    "pass-fail": 'Decide whether the response passes the rubric: {"passed": true|false, "reason": "..."}.',
    "score": 'Score how well the response meets the rubric, from 0 (not at all) to 1 (fully): '
             '{"score": 0..1, "reason": "..."}.',
    "likert-5": 'Rate how well the response meets the rubric from 1 (very poorly) to 5 (excellently): '
                '{"rating": 1..5, "reason": "..."}.',
    "pairwise": 'Decide which response better meets the rubric: {"preference": "1"|"2"|"tie", "reason": "..."}.',
}
_TITLES: Final[dict[Sees, str]] = {
    "prompt": "Task given to the agent", "answer": "Final answer", "expected": "Expected answer",
    "tool-calls": "Tool calls", "transcript": "Transcript", "artifacts": "Artifacts", "metadata": "Case metadata",
}
# Cut first when over budget: the long, supporting material before the answer itself.
_CUT_ORDER: Final[tuple[Sees, ...]] = ("transcript", "artifacts", "tool-calls", "metadata", "prompt",
                                       "expected", "answer")


def _budget(llm: LlmJudgeConfig) -> int:
    """Characters the trial's material may take: the token budget, less room for the rubric and ask."""
    return max(llm.maxInputTokens * CHARS_PER_TOKEN - 1000, llm.maxInputTokens * 2)


def _clip(text: str, budget: int, what: str) -> str:
    if len(text) <= budget:
        return text
    keep = max(budget - 80, 0)
    head, tail = text[: keep // 2], text[len(text) - keep // 2:] if keep else ""
    return f"{head}\n{_CUT.format(n=len(text) - len(head) - len(tail), what=what)}\n{tail}"


def _value_text(value: Any) -> str:
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS,
                                                              default=str).decode()


def _artifacts(trial: TrialView, budget: int) -> str:
    """The trial's artifact files: their paths and sizes, and the text of small text files."""
    root = trial.artifacts_dir
    if root is None or not root.is_dir():
        return "(no artifacts)"
    parts: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel, size = path.relative_to(root).as_posix(), path.stat().st_size
        parts.append(f"--- {rel} ({size} bytes)")
        if size <= budget:
            try:
                parts.append(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                parts.append("(binary)")
    return "\n".join(parts) if parts else "(no artifacts)"


def _field(item: Sees, trial: TrialView, case: CaseView, budget: int) -> str:
    """One thing the judge sees, as text within ``budget`` characters."""
    if item == "prompt":
        return case.prompt
    if item == "answer":
        return trial.answer if trial.answer is not None else "(no final answer)"
    if item == "expected":
        return _value_text(case.expected)
    if item == "metadata":
        return _value_text(dict(case.metadata))
    if item == "artifacts":
        return _artifacts(trial, budget)
    try:
        if item == "tool-calls":
            return _value_text(trial.tool_calls) if trial.tool_calls else "(no tool calls)"
        return render_transcript(trial.events, budget_chars=budget)
    except TranscriptError as exc:
        return f"(unavailable: {exc})"


def _fit(fields: dict[Sees, str], budget: int) -> dict[Sees, str]:
    """Cut the fields, longest-supporting first, until they fit the budget (visibly)."""
    over = sum(map(len, fields.values())) - budget
    for item in _CUT_ORDER:
        if over <= 0:
            break
        if item in fields:
            text = fields[item]
            target = max(len(text) - over, 200)
            clipped = _clip(text, target, _TITLES[item].lower())
            over -= len(text) - len(clipped)
            fields[item] = clipped
    return fields


def _seen(llm: LlmJudgeConfig, trial: TrialView, case: CaseView, shown: Sequence[Sees],
          budget: int) -> dict[Sees, str]:
    return {item: _field(item, trial, case, budget) for item in shown}


def _render(template: str, values: Mapping[str, str], metadata: Mapping[str, Any]) -> str:
    def one(m: Any) -> str:
        whole = m.group(0)
        if whole in ("{{", "}}"):
            return str(whole[0])
        name, key = m.group(1), m.group(2)
        if name == "metadata" and key is not None:
            return _value_text(metadata.get(key))
        return values.get(name, "")

    return PLACEHOLDER.sub(one, template)


def _template_values(fields: Mapping[Sees, str], rubric: str) -> dict[str, str]:
    values = {name: fields[item] for name, item in TEMPLATE_FIELDS.items() if item in fields}
    return {**values, "rubric": rubric}


def trial_prompt(llm: LlmJudgeConfig, trial: TrialView, case: CaseView) -> str:
    """The prompt a case judge sends for one trial."""
    budget = _budget(llm)
    shown = llm.shown()
    fields = _fit(_seen(llm, trial, case, shown, budget), budget)
    if llm.template is not None:
        return _render(llm.template, _template_values(fields, llm.rubric), case.metadata)
    body = "\n\n".join(f"## {_TITLES[item]}\n{fields[item]}" for item in shown)
    return f"## Rubric\n{llm.rubric}\n\n{body}\n\n{SCALE_ASK[llm.scale]}"


def pair_prompt(llm: LlmJudgeConfig, case: CaseView, first: TrialView, second: TrialView) -> str:
    """The prompt of one pairwise call: the sides are "Response 1" and "Response 2", nothing else."""
    budget = _budget(llm) // 2
    shown = llm.shown(pairwise=True)
    shared = [s for s in shown if s in ("prompt", "expected", "metadata")]
    own = [s for s in shown if s not in shared]
    sides = [_fit(_seen(llm, t, case, own, budget), budget) for t in (first, second)]
    common: dict[Sees, str] = {item: _field(item, first, case, budget) for item in shared}
    if llm.template is not None:  # the template is shown once per side
        per_side = [_render(llm.template, _template_values({**common, **s}, llm.rubric), case.metadata)
                    for s in sides]
        return "\n\n".join(f"# Response {i}\n{text}" for i, text in enumerate(per_side, 1)) + (
            f"\n\n{SCALE_ASK['pairwise']}")
    head = "\n\n".join(f"## {_TITLES[item]}\n{common[item]}" for item in shared)
    blocks = [f"# Response {i}\n" + "\n\n".join(f"## {_TITLES[item]}\n{s[item]}" for item in own)
              for i, s in enumerate(sides, 1)]
    return "\n\n".join([f"## Rubric\n{llm.rubric}", *([head] if head else []), *blocks, SCALE_ASK["pairwise"]])


__all__ = ["CHARS_PER_TOKEN", "SCALE_ASK", "pair_prompt", "trial_prompt"]
