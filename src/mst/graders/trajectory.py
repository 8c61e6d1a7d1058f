"""Opt-in trajectory analyses (docs/graders.md, "Defaults, opt-ins"): enabled only by configuration, bounded inputs.

The trajectory is the main agent's correlated tool calls, in order (from the shared lookups).
A *state* is a call: its tool name, or its tool name and arguments (``config.symbols`` chooses;
each analysis documents its default). Reference evidence comes only from the case's
``expected`` mapping, in these shapes (anything else means the analysis is unavailable or, for
a malformed reference, an error):

* ``expected.toolCalls``: a list of tool names or ``{name, arguments?, server?}`` objects (the
  calls a good trajectory makes; ``arguments`` omitted means any arguments).
* ``expected.states``: the reference trajectory, items shaped like ``toolCalls``.
* ``expected.objectives``: a list of objectives, each a tool name, ``{tool, arguments?,
  server?, id?}`` (a *successful* call of that tool whose arguments contain the given ones), or
  ``{answerContains, id?}`` (the agent's final answer contains the text).

Every input collection is capped at :data:`MAX_ITEMS` items; beyond that the result is
unavailable, which bounds the cost of the analyses that are not linear. Complexities: recurrence
rate, determinism, entropy rate and revisit probability are O(n) (determinism counts equal
k-grams instead of building the recurrence matrix); Lempel-Ziv is O(n²) worst case (n ≤ 5,000);
nDTW is O(n·m) and is additionally capped at :data:`MAX_DTW_CELLS`; objective coverage is
O(n·k) worst case for k tool objectives all naming the same tool.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from mst.graders.base import BuiltinGrader, ConfigCheck, GraderInput, Measurement, measured, unavailable
from mst.session.events import ASSISTANT_MESSAGE, SESSION_RESULT
from mst.session.lookups import ToolCall, canonical_key, event_data, is_main_agent, normalise_tool_name

MAX_ITEMS = 5_000
MAX_DTW_CELLS = 4_000_000

RefState = tuple[str, str | None]


# ---------------------------------------------------------------------------------------------
# Inputs


def _check_symbols(value: Any) -> str | None:
    if value in ("tool", "call"):
        return None
    return "must be 'tool' (tool names) or 'call' (names and arguments)"


def _check_min_line(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 2 <= value <= 100
    return None if ok else "must be an integer from 2 to 100"


def _calls(inp: GraderInput, need: int) -> tuple[ToolCall, ...] | Measurement:
    calls = inp.lookups.tool_calls
    if len(calls) > MAX_ITEMS:
        return unavailable(f"{len(calls)} tool calls exceed the bound of {MAX_ITEMS}")
    if len(calls) < need:
        return unavailable(f"needs at least {need} tool calls, found {len(calls)}")
    return calls


def _symbols(inp: GraderInput, default: str, need: int = 2) -> list[int] | Measurement:
    """The trajectory as small integers, one per distinct state."""
    calls = _calls(inp, need)
    if isinstance(calls, Measurement):
        return calls
    by_call = inp.config.get("symbols", default) == "call"
    ids: dict[Hashable, int] = {}
    return [ids.setdefault((c.name, c.args_key) if by_call else c.name, len(ids)) for c in calls]


def _equal_pairs(seq: Sequence[int], k: int) -> int:
    """Pairs i < j whose k-grams starting at i and j are equal."""
    grams = Counter(tuple(seq[i : i + k]) for i in range(len(seq) - k + 1))
    return sum(c * (c - 1) // 2 for c in grams.values())


# ---------------------------------------------------------------------------------------------
# Reference-free analyses


def recurrence_rate(inp: GraderInput) -> Measurement:
    """RQA RR on categorical states: the share of ordered pairs of distinct steps (i ≠ j) that are
    in the same state. The identity line is excluded because it recurs by definition."""
    seq = _symbols(inp, "call")
    if isinstance(seq, Measurement):
        return seq
    n = len(seq)
    pairs = _equal_pairs(seq, 1)
    return measured(pairs / (n * (n - 1) / 2), f"{pairs} recurrent pairs among {n} states")


def recurrence_determinism(inp: GraderInput) -> Measurement:
    """RQA DET: the share of recurrence points lying on diagonal lines of length ≥ L.

    With P_k the number of pairs of equal k-grams, a maximal diagonal run of length m ≥ L
    contributes m = L·(m-L+1) - (L-1)·(m-L) points, so the line points are L·P_L - (L-1)·P_{L+1}:
    O(n·L) instead of the O(n²) matrix. No recurrence at all makes DET undefined → unavailable.
    """
    seq = _symbols(inp, "call")
    if isinstance(seq, Measurement):
        return seq
    min_line = int(inp.config.get("minLine", 2))
    points = _equal_pairs(seq, 1)
    if points == 0:
        return unavailable("no recurrent states: determinism is undefined")
    on_lines = min_line * _equal_pairs(seq, min_line) - (min_line - 1) * _equal_pairs(seq, min_line + 1)
    msg = f"{on_lines} of {points} recurrence points on lines of length ≥ {min_line}"
    return measured(on_lines / points, msg)


def event_entropy_rate(inp: GraderInput) -> Measurement:
    """Conditional entropy H(next | current) of the empirical first-order chain, normalised by
    log2 of the alphabet size so that 0 is fully predictable and 1 is maximally erratic. A
    single-symbol trajectory is perfectly predictable: 0."""
    seq = _symbols(inp, "tool")
    if isinstance(seq, Measurement):
        return seq
    alphabet = len(set(seq))
    if alphabet < 2:
        return measured(0.0, "one distinct state: fully predictable")
    firsts = Counter(seq[:-1])
    bigrams = Counter(itertools.pairwise(seq))
    total = len(seq) - 1
    h = sum(n / total * math.log2(firsts[a] / n) for (a, _), n in bigrams.items())
    return measured(h / math.log2(alphabet), f"{h:.4f} bits/step over {alphabet} states")


def _lz76(seq: Sequence[int]) -> int:
    """Kaspar-Schuster LZ76 phrase count (needs len ≥ 2); O(n²) worst case, n ≤ MAX_ITEMS."""
    n = len(seq)
    c, start, i, k, k_max = 1, 1, 0, 1, 1
    while True:
        if seq[i + k - 1] == seq[start + k - 1]:
            k += 1
            if start + k > n:
                return c + 1
        else:
            k_max = max(k, k_max)
            i += 1
            if i == start:
                c += 1
                start += k_max
                if start + 1 > n:
                    return c
                i, k, k_max = 0, 1, 1
            else:
                k = 1


def _max_phrases(n: int, k: int) -> int:
    """An upper bound of the LZ76 phrase count of any sequence of length ``n`` over ``k`` symbols.

    Every phrase but the last is a word that did not occur before it, so those phrases are
    distinct words whose lengths sum to at most ``n``. The most distinct words that fit are the
    shortest ones: all ``k`` words of length 1, then the ``k²`` of length 2, and so on (greedy).
    """
    remaining, length, count = n, 1, 0
    while remaining >= length:
        fit = min(k**length, remaining // length)
        count += fit
        remaining -= fit * length
        length += 1
    return count + 1  # the last phrase may repeat an earlier word


def lempel_ziv_complexity(inp: GraderInput) -> Measurement:
    """LZ76 complexity normalised to [0, 1]: the phrase count c divided by the most phrases any
    trajectory of the same length over the same states can have (:func:`_max_phrases`).

    One repeated state is 0 (nothing new ever happens); the more new sub-sequences a trajectory
    keeps producing, the closer to 1. Unlike the asymptotic c·log_k(n)/n, which short trajectories
    push above 1 and which gives 1 to a single repeated symbol of length 2, the bound holds for
    every length, so values of short and long trajectories share one scale.
    """
    seq = _symbols(inp, "tool")
    if isinstance(seq, Measurement):
        return seq
    n, k = len(seq), len(set(seq))
    if k < 2:
        return measured(0.0, f"one distinct state over {n} steps: fully repetitive")
    phrases, bound = _lz76(seq), _max_phrases(n, k)
    return measured(phrases / bound, f"{phrases} LZ76 phrases over {n} states (at most {bound} possible)")


def state_revisit_probability(inp: GraderInput) -> Measurement:
    """Share of state visits that revisit an already visited state: (n - distinct) / n."""
    seq = _symbols(inp, "call")
    if isinstance(seq, Measurement):
        return seq
    distinct = len(set(seq))
    return measured((len(seq) - distinct) / len(seq), f"{len(seq) - distinct} revisits in {len(seq)} visits")


# ---------------------------------------------------------------------------------------------
# Reference-dependent analyses


def _reference(expected: Any, key: str) -> list[Any] | Measurement:
    if not isinstance(expected, Mapping) or key not in expected:
        return unavailable(f"the case's expected value has no '{key}' reference")
    items = expected[key]
    if not isinstance(items, list):
        raise ValueError(f"expected.{key} must be a list")
    if len(items) > MAX_ITEMS:
        return unavailable(f"expected.{key} has {len(items)} items, over the bound of {MAX_ITEMS}")
    return items


def _ref_state(item: Any, where: str) -> RefState:
    """A reference call: normalised name, and canonical arguments or None (= any arguments)."""
    if isinstance(item, str) and item:
        return normalise_tool_name(item, None), None
    if isinstance(item, Mapping):
        name = item.get("name", item.get("tool", item.get("toolName")))
        server = item.get("server")
        if isinstance(name, str) and name and (server is None or isinstance(server, str)):
            args = canonical_key(item["arguments"]) if "arguments" in item else None
            return normalise_tool_name(name, server or None), args
    raise ValueError(f"{where} must be a tool name or an object with a 'name'")


def _trajectory_calls(inp: GraderInput) -> tuple[ToolCall, ...] | Measurement:
    """The calls, where zero calls is an observation only in a completed session."""
    calls = _calls(inp, 0)
    if not isinstance(calls, Measurement) and not calls and not inp.lookups.completed:
        return unavailable("no tool calls and no completion record: the trajectory is unknown")
    return calls


def tool_wise_score(inp: GraderInput) -> Measurement:
    """F1 between the calls made and ``expected.toolCalls``, matched as multisets: references with
    arguments match an identical call first, then name-only references match any remaining call of
    that tool (this greedy order gives the maximum matching). Both empty → 1."""
    refs = _reference(inp.expected, "toolCalls")
    if isinstance(refs, Measurement):
        return refs
    calls = _trajectory_calls(inp)
    if isinstance(calls, Measurement):
        return calls
    states = [_ref_state(item, f"expected.toolCalls[{i}]") for i, item in enumerate(refs)]
    if not states and not calls:
        return measured(1.0, "no calls expected and none made")
    exact = Counter((c.name, c.args_key) for c in calls)
    by_name = Counter(c.name for c in calls)
    matched = 0
    for name, args in sorted(states, key=lambda s: s[1] is None):
        if args is not None and exact[(name, args)] > 0:
            exact[(name, args)] -= 1
        elif args is not None or by_name[name] <= 0:
            continue
        by_name[name] -= 1
        matched += 1
    score = 2 * matched / (len(calls) + len(states))
    return measured(score, f"{matched} of {len(states)} reference calls matched by {len(calls)} calls")


def _dtw(query: Sequence[tuple[str, str]], ref: Sequence[RefState]) -> int:
    """Dynamic time warping with 0/1 state distance, one row at a time (O(n·m), O(m) memory)."""
    inf = len(query) + len(ref) + 1
    prev = [0] + [inf] * len(ref)
    for name, args in query:
        cur = [inf] * (len(ref) + 1)
        for j, (rname, rargs) in enumerate(ref, start=1):
            cost = 0 if rname == name and (rargs is None or rargs == args) else 1
            cur[j] = cost + min(prev[j], cur[j - 1], prev[j - 1])
        prev = cur
    return prev[-1]


def trajectory_ndtw(inp: GraderInput) -> Measurement:
    """nDTW (Ilharco et al. 2019) = exp(-DTW / |reference|) with 0/1 distance between states,
    1 for a perfect path and towards 0 as it diverges. An empty reference is unusable → error;
    no calls in a completed session → 0 (no path at all)."""
    refs = _reference(inp.expected, "states")
    if isinstance(refs, Measurement):
        return refs
    if not refs:
        raise ValueError("expected.states is empty: nDTW needs at least one reference state")
    states = [_ref_state(item, f"expected.states[{i}]") for i, item in enumerate(refs)]
    calls = _trajectory_calls(inp)
    if isinstance(calls, Measurement):
        return calls
    if not calls:
        return measured(0.0, "no calls: no path to align with the reference")
    if len(calls) * len(states) > MAX_DTW_CELLS:
        return unavailable(f"{len(calls)}×{len(states)} alignment exceeds the bound of {MAX_DTW_CELLS} cells")
    distance = _dtw([(c.name, c.args_key) for c in calls], states)
    return measured(math.exp(-distance / len(states)), f"DTW {distance} over {len(states)} reference states")


def _final_answer(inp: GraderInput) -> str | None:
    """The main agent's last ``session.result`` answer, else its last assistant message."""
    for etype, key in ((SESSION_RESULT, "answer"), (ASSISTANT_MESSAGE, "content")):
        for pos in reversed(inp.lookups.positions(etype)):
            event = inp.session[pos]
            value = event_data(event).get(key)
            if is_main_agent(event) and isinstance(value, str):
                return value
    return None


def _contains(arguments: Any, subset: Mapping[str, Any]) -> bool:
    if not isinstance(arguments, Mapping):
        return not subset
    return all(k in arguments and canonical_key(arguments[k]) == canonical_key(v) for k, v in subset.items())


def _objective(item: Any, i: int) -> tuple[str, str, Any]:
    """(label, kind, spec) for one objective; kind is 'tool' or 'answer'."""
    where = f"expected.objectives[{i}]"
    if isinstance(item, str) and item:
        return item, "tool", (normalise_tool_name(item, None), {})
    if isinstance(item, Mapping):
        label = str(item.get("id", i))
        text = item.get("answerContains")
        if isinstance(text, str) and text:
            return label, "answer", text
        name, _ = _ref_state({k: v for k, v in item.items() if k != "arguments"}, where)
        args = item.get("arguments", {})
        if isinstance(args, Mapping):
            return label, "tool", (name, args)
    raise ValueError(f"{where} must be a tool name, {{tool, arguments?}} or {{answerContains}}")


def objective_coverage(inp: GraderInput) -> Measurement:
    """Share of ``expected.objectives`` the session evidences. Tool objectives need a successful
    call (a failed attempt does not achieve anything); answer objectives read the final answer.
    Before the agent completed, an unmet objective might still have been met: unavailable."""
    refs = _reference(inp.expected, "objectives")
    if isinstance(refs, Measurement):
        return refs
    if not refs:
        raise ValueError("expected.objectives is empty: coverage needs at least one objective")
    objectives = [_objective(item, i) for i, item in enumerate(refs)]
    calls = _trajectory_calls(inp)
    if isinstance(calls, Measurement):
        return calls
    if not inp.lookups.completed:
        return unavailable("no completion record: objectives may still have been met")
    successful: dict[str, list[Any]] = {}
    for call in calls:
        if call.success:
            successful.setdefault(call.name, []).append(call.arguments)
    answer = _final_answer(inp) or ""
    unmet = [
        label
        for label, kind, spec in objectives
        if not (spec in answer if kind == "answer" else any(_contains(a, spec[1]) for a in successful.get(spec[0], ())))
    ]
    met = len(objectives) - len(unmet)
    note = f"; unmet: {', '.join(unmet[:5])}" if unmet else ""
    return measured(met / len(objectives), f"{met} of {len(objectives)} objectives met{note}")


_SYMBOLS: dict[str, ConfigCheck] = {"symbols": _check_symbols}

TRAJECTORY_GRADERS: tuple[BuiltinGrader, ...] = (
    BuiltinGrader(
        "recurrence-rate", "Recurrence rate", "RQA RR: share of step pairs in the same state",
        "ratio", "lower", recurrence_rate, False, min=0.0, max=1.0, config=_SYMBOLS,
    ),
    BuiltinGrader(
        "recurrence-determinism", "Recurrence determinism",
        "RQA DET: share of recurrence points on diagonal lines (repeated sub-sequences)",
        "ratio", "lower", recurrence_determinism, False, min=0.0, max=1.0,
        config={**_SYMBOLS, "minLine": _check_min_line},
    ),
    BuiltinGrader(
        "event-entropy-rate", "Event entropy rate",
        "Normalised conditional entropy of the next tool given the current one",
        "ratio", "lower", event_entropy_rate, False, min=0.0, max=1.0, config=_SYMBOLS,
    ),
    BuiltinGrader(
        "lempel-ziv-trajectory-complexity", "Lempel-Ziv trajectory complexity",
        "LZ76 complexity of the tool sequence, normalised to [0, 1] by the most phrases possible",
        "ratio", "lower", lempel_ziv_complexity, False, min=0.0, max=1.0, config=_SYMBOLS,
    ),
    BuiltinGrader(
        "state-revisit-probability", "State revisit probability",
        "Share of state visits that revisit an earlier state",
        "ratio", "lower", state_revisit_probability, False, min=0.0, max=1.0, config=_SYMBOLS,
    ),
    BuiltinGrader(
        "tool-wise-score", "Tool-wise score", "F1 of the calls made against expected.toolCalls",
        "ratio", "higher", tool_wise_score, False, min=0.0, max=1.0,
    ),
    BuiltinGrader(
        "trajectory-ndtw", "Trajectory nDTW", "Normalised DTW similarity to expected.states",
        "ratio", "higher", trajectory_ndtw, False, min=0.0, max=1.0,
    ),
    BuiltinGrader(
        "objective-coverage", "Objective coverage", "Share of expected.objectives met",
        "ratio", "higher", objective_coverage, False, min=0.0, max=1.0,
    ),
)  # fmt: skip
