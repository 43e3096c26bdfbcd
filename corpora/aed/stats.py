"""Paired-replay statistics for AED cases: the 2x2 table, McNemar's exact test, Newcombe's interval, grades.

Pure Python (no Django, no scipy). Arm C = corrected action, arm R = plain retry; pair i shares a seed.
Table cells: n11 both pass, n10 only C passes, n01 only R passes, n00 neither passes; N = their sum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05
# A grade A needs at least this many pairs. Six is where the two-sided exact McNemar test can first reach
# p < 0.05 (6 discordant pairs of 6: p = 0.031), so the default only makes that floor explicit; a project
# that wants more evidence raises it.
MIN_PAIRS = 6
# n11 / (n11 + n10) at or above this: when the correction passes, the retry mostly passes too.
DOUBLE_PASS_HIGH = 0.5

GRADE_ORDER = ["A", "B", "C", "D"]


@dataclass(frozen=True)
class Grading:
    """How a project grades: which proposal's replay counts ("first": the case's first proposal not rejected,
    as the paper reports; "best": the replay with the highest net gain among them), and the thresholds."""

    evidence: str = "first"
    min_pairs: int = MIN_PAIRS
    alpha: float = ALPHA

    def rules(self) -> list[tuple[str, str]]:
        return [
            ("A", f"Replayed with at least {self.min_pairs} pairs: the correction beats the retry significantly "
                  f"(exact McNemar p < {self.alpha:g}), and in fewer than {DOUBLE_PASS_HIGH:.0%} of the pairs where "
                  "the correction passes does the retry pass too."),
            ("B", "Replayed with a positive net gain, but not significant, too few pairs, or the retry also passes "
                  f"in at least {DOUBLE_PASS_HIGH:.0%} of the pairs where the correction passes."),
            ("C", "Not replayed yet; the evidence check found the diagnosis supported."),
            ("D", "The evidence is unsupported or contradicted, or the replay shows no net gain over the retry."),
        ]

    def describe(self) -> str:
        which = "the first proposal" if self.evidence == "first" else "the best of the proposals"
        return f"graded on {which}; A needs p < {self.alpha:g} with at least {self.min_pairs} pairs"


DEFAULT_GRADING = Grading()
GRADE_RULES = DEFAULT_GRADING.rules()


def table_from_runs(runs: Iterable[tuple[int, str, bool]]) -> tuple[int, int, int, int]:
    """Count complete pairs: (n11, n10, n01, n00) with n_xy = #pairs where C passed == x and R passed == y.

    A pair counts only when both its "C" and its "R" run are present; a later run for the same
    (pair, arm) replaces an earlier one.
    """
    arms: dict[int, dict[str, bool]] = {}
    for pair, arm, passed in runs:
        if arm not in ("C", "R"):
            raise ValueError(f"unknown arm {arm!r}")
        arms.setdefault(pair, {})[arm] = bool(passed)
    n11 = n10 = n01 = n00 = 0
    for outcome in arms.values():
        if len(outcome) != 2:
            continue
        c, r = outcome["C"], outcome["R"]
        if c and r:
            n11 += 1
        elif c:
            n10 += 1
        elif r:
            n01 += 1
        else:
            n00 += 1
    return n11, n10, n01, n00


def mcnemar_exact_p(n10: int, n01: int) -> float:
    """Two-sided exact McNemar p: binomial test of n10 successes in n = n10 + n01 trials at p = 1/2.

    p = min(1, 2 * sum_{k=0}^{min(n10, n01)} C(n, k) / 2^n); n = 0 gives 1.0. The sum is an exact
    integer and the only division is the last one (int / int is correctly rounded), so large n stays exact.
    """
    if n10 < 0 or n01 < 0:
        raise ValueError("counts must be non-negative")
    n = n10 + n01
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(n10, n01) + 1))
    numerator, denominator = 2 * tail, 2**n
    if numerator >= denominator:
        return 1.0
    return numerator / denominator


def _wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval: (2np + z^2 -/+ z * sqrt(z^2 + 4np(1 - p))) / (2(n + z^2)), p = successes/n."""
    p = successes / n
    centre = 2 * n * p + z * z
    half = z * math.sqrt(z * z + 4 * n * p * (1 - p))
    denominator = 2 * (n + z * z)
    return max(0.0, (centre - half) / denominator), min(1.0, (centre + half) / denominator)


def paired_difference_ci(n11: int, n10: int, n01: int, n00: int, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p_C - p_R with paired data (Newcombe 1998, method 10).

    p_C = (n11 + n10)/N, p_R = (n11 + n01)/N, d = p_C - p_R; (l1, u1), (l2, u2) their Wilson intervals
    with z = Phi^-1((1 + confidence)/2). phi = A / sqrt((n11+n10)(n01+n00)(n11+n01)(n10+n00)) with
    A = n11*n00 - n10*n01, replaced by max(A - N/2, 0) when A > 0; phi = 0 when the root is 0.
    delta = sqrt((p_C-l1)^2 - 2 phi (p_C-l1)(u2-p_R) + (u2-p_R)^2),
    eps   = sqrt((u1-p_C)^2 - 2 phi (u1-p_C)(p_R-l2) + (p_R-l2)^2);
    interval = (d - delta, d + eps), clipped to [-1, 1]. N = 0 raises ValueError.
    """
    if min(n11, n10, n01, n00) < 0:
        raise ValueError("counts must be non-negative")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    n = n11 + n10 + n01 + n00
    if n == 0:
        raise ValueError("no pairs")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p_c, p_r = (n11 + n10) / n, (n11 + n01) / n
    l1, u1 = _wilson(n11 + n10, n, z)
    l2, u2 = _wilson(n11 + n01, n, z)
    a = n11 * n00 - n10 * n01
    if a > 0:
        a = max(a - n / 2, 0)
    root = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    phi = a / math.sqrt(root) if root else 0.0
    d = p_c - p_r
    delta = math.sqrt(max(0.0, (p_c - l1) ** 2 - 2 * phi * (p_c - l1) * (u2 - p_r) + (u2 - p_r) ** 2))
    eps = math.sqrt(max(0.0, (u1 - p_c) ** 2 - 2 * phi * (u1 - p_c) * (p_r - l2) + (p_r - l2) ** 2))
    return max(-1.0, d - delta), min(1.0, d + eps)


def replay_stats(n11: int, n10: int, n01: int, n00: int, *, alpha: float = ALPHA) -> dict:
    """Summary of one replay's 2x2 table, N = n11 + n10 + n01 + n00.

    pass_rate_c = (n11 + n10)/N, pass_rate_r = (n11 + n01)/N, net_gain = (n10 - n01)/N,
    double_pass_share = n11 / (n11 + n10), the share of the correction's passes where the retry passed too
    (None when the correction never passed), (ci_low, ci_high) = paired_difference_ci,
    mcnemar_p = mcnemar_exact_p(n10, n01), significant = mcnemar_p < alpha and n10 != n01.
    N = 0 gives {"pairs": 0} only.
    """
    n = n11 + n10 + n01 + n00
    if n == 0:
        return {"pairs": 0}
    low, high = paired_difference_ci(n11, n10, n01, n00)
    p = mcnemar_exact_p(n10, n01)
    return {
        "pairs": n,
        "pass_rate_c": (n11 + n10) / n,
        "pass_rate_r": (n11 + n01) / n,
        "net_gain": (n10 - n01) / n,
        "double_pass_share": n11 / (n11 + n10) if n11 + n10 else None,
        "ci_low": low,
        "ci_high": high,
        "mcnemar_p": p,
        "significant": p < alpha and n10 != n01,
    }


def grade(evidence_check: str, stats: dict | None, grading: Grading = DEFAULT_GRADING) -> str | None:
    """Grade a case by `grading.rules()`, first match wins.

    D: evidence unsupported/contradicted, or replayed (stats["pairs"] > 0) with net_gain <= 0;
    A: replayed with pairs >= grading.min_pairs, net_gain > 0, mcnemar_p < grading.alpha,
       double_pass_share < DOUBLE_PASS_HIGH;
    B: replayed, net_gain > 0, otherwise;
    C: not replayed and evidence supported; otherwise None (ungraded).
    """
    if evidence_check in ("unsupported", "contradicted"):
        return "D"
    replayed = bool(stats) and stats.get("pairs", 0) > 0
    if replayed:
        if stats["net_gain"] <= 0:
            return "D"
        if (stats["pairs"] >= grading.min_pairs and stats["mcnemar_p"] < grading.alpha
                and stats["double_pass_share"] < DOUBLE_PASS_HIGH):
            return "A"
        return "B"
    if evidence_check == "supported":
        return "C"
    return None


# What a case's grade rests on (`basis`), from the strongest: a replay, the curator's evidence check alone, nothing.
REPLAY, CHECK = "replay", "check"


def basis(evidence_check: str, stats: dict | None) -> str | None:
    """"replay" when a replay with pairs grades the case (A, B, or D by its gain or by the check), "check" when the
    curator's evidence check alone does (C, or D: unsupported or contradicted), None when the case is ungraded."""
    if stats and stats.get("pairs", 0) > 0:
        return REPLAY
    return CHECK if evidence_check in ("supported", "unsupported", "contradicted") else None


def grade_at_least(grade: str | None, minimum: str) -> bool:
    """True when grade is minimum or better in GRADE_ORDER (A best); None (ungraded) never passes."""
    if grade is None:
        return False
    return GRADE_ORDER.index(grade) <= GRADE_ORDER.index(minimum)
