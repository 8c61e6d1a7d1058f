"""The one home of mst's inferential statistics: pure functions, stdlib only, no other mst import.

:mod:`mst.statistics.intervals` holds the distributions (Student's t, Wilson) and the means
clustered by case and paired by case; :mod:`mst.statistics.rates` builds pass rates, pass@k and
preference counts on them. Because nothing here imports another mst module, every layer may use
it (the run summary, experiment analysis, the graders) without depending on an engine module.
"""

from mst.statistics.intervals import (
    CONFIDENCE,
    Z95,
    betainc,
    case_sum,
    clustered_mean,
    clustered_mean_of_sums,
    paired_difference,
    t_cdf,
    t_quantile,
    wilson_interval,
)
from mst.statistics.rates import (
    CasePassRule,
    CaseStatus,
    CaseTrials,
    case_passes,
    case_row,
    case_status,
    pass_at_k,
    pass_at_k_curve,
    pass_hat_k,
    pass_rate,
    preference_counts,
    variant_stats,
)

__all__ = [
    "CONFIDENCE",
    "Z95",
    "CasePassRule",
    "CaseStatus",
    "CaseTrials",
    "betainc",
    "case_passes",
    "case_row",
    "case_status",
    "case_sum",
    "clustered_mean",
    "clustered_mean_of_sums",
    "paired_difference",
    "pass_at_k",
    "pass_at_k_curve",
    "pass_hat_k",
    "pass_rate",
    "preference_counts",
    "t_cdf",
    "t_quantile",
    "variant_stats",
    "wilson_interval",
]
