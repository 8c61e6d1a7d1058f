"""Grading: assertions, judges, deterministic graders and pairwise comparisons (docs/grading.md).

The public surface a collector, a regrade and a shard worker use. ``grading`` reads
transcripts and writes verdicts; it knows nothing of collecting, clients or runners.
"""

from mst.grading.assertions import (
    AssertionConfigError,
    assertion_identity,
    assertion_name,
    compile_path,
    evaluate,
    json_equal,
    select,
)
from mst.grading.context import CasePlan, GradingContext, judge_sets
from mst.grading.grade import (
    case_view,
    combine_orders,
    compare_pairwise,
    grade_trial,
    grader_names,
)
from mst.grading.judges import (
    ENTRY_POINT_GROUP,
    CaseView,
    JudgeLoadError,
    JudgeReturnError,
    Preference,
    TranscriptUnavailable,
    TrialView,
    Verdict,
    judge_identity,
    load_callable,
    resolve_judge,
    to_preference,
    to_verdict,
)
from mst.grading.sources import (
    AssertionOutcome,
    GradersOutcome,
    GradingSource,
    JudgeOutcome,
    LiveSource,
    PairOutcome,
)
from mst.runs.grading_records import (
    CaseComparison,
    GraderValue,
    GradingError,
    PairError,
    PairRecord,
    RecordError,
    TrialGrading,
    VerdictRecord,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "AssertionConfigError",
    "AssertionOutcome",
    "CaseComparison",
    "CasePlan",
    "CaseView",
    "GraderValue",
    "GradersOutcome",
    "GradingContext",
    "GradingError",
    "GradingSource",
    "JudgeLoadError",
    "JudgeOutcome",
    "JudgeReturnError",
    "LiveSource",
    "PairError",
    "PairOutcome",
    "PairRecord",
    "Preference",
    "RecordError",
    "TranscriptUnavailable",
    "TrialGrading",
    "TrialView",
    "Verdict",
    "VerdictRecord",
    "assertion_identity",
    "assertion_name",
    "case_view",
    "combine_orders",
    "compare_pairwise",
    "compile_path",
    "evaluate",
    "grade_trial",
    "grader_names",
    "json_equal",
    "judge_identity",
    "judge_sets",
    "load_callable",
    "resolve_judge",
    "select",
    "to_preference",
    "to_verdict",
]
