"""The AED summary as it was computed before the figures were kept (every case loaded and graded in Python): the
oracle the kept figures (`selectors.corpus_summary`) are held to."""

import math
import statistics
from collections import Counter, defaultdict

import pytest

from corpora.aed import selectors, stats


def corpus_summary(project) -> dict:
    """Grade distribution, mean net gain with a 95% CI over replayed cases, pooled pass rates by arm,
    error categories, and breakdowns by environment, harness and policy model."""
    grades: Counter = Counter()
    categories: Counter = Counter()
    gains: list[float] = []
    arms = {"C": [0, 0], "R": [0, 0]}  # passes, runs
    by = {"environment": defaultdict(list), "harness": defaultdict(list), "policy_model": defaultdict(list)}
    cases = list(selectors.cases_of(project))
    grading = selectors.grading_of(project)
    for case in cases:
        grade = selectors.grade_of(case, grading)
        grades[grade or "ungraded"] += 1
        if case.category:
            categories[case.category] += 1
        _, replay = selectors.evidence_of(case, grading)
        gain = replay.stats["net_gain"] if replay else None
        if replay:
            gains.append(gain)
            n = replay.stats["pairs"]
            arms["C"][0] += replay.n11 + replay.n10
            arms["R"][0] += replay.n11 + replay.n01
            arms["C"][1] += n
            arms["R"][1] += n
        for field, groups in by.items():
            groups[getattr(case.trace, field) or "(none)"].append((grade, gain))
    mean = statistics.fmean(gains) if gains else None
    half = 1.96 * statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else None
    return {
        "grading": grading.describe(),
        "cases": len(cases),
        "grades": {g: grades.get(g, 0) for g in [*stats.GRADE_ORDER, "ungraded"]},
        "mean_gain": mean,
        "mean_gain_ci": [mean - half, mean + half] if half is not None else None,
        "replayed": len(gains),
        "pass_rate": {arm: (passes / runs if runs else None) for arm, (passes, runs) in arms.items()},
        "categories": dict(categories.most_common()),
        "breakdowns": {field: {name: {"cases": len(rows), "graded_a_or_b": sum(g in ("A", "B") for g, _ in rows),
                                      "mean_gain": statistics.fmean([x for _, x in rows if x is not None])
                                      if any(x is not None for _, x in rows) else None}
                               for name, rows in sorted(groups.items())}
                       for field, groups in by.items()},
    }


def close(kept, expected) -> bool:
    """Equal, floats within rounding (a sum kept step by step against one summed at once)."""
    if isinstance(expected, dict):
        return isinstance(kept, dict) and kept.keys() == expected.keys() and all(
            close(kept[key], value) for key, value in expected.items())
    if isinstance(expected, list):
        return isinstance(kept, list) and len(kept) == len(expected) and all(map(close, kept, expected))
    if isinstance(expected, float) and not isinstance(expected, bool):
        return kept == pytest.approx(expected, rel=1e-9, abs=1e-9)
    return kept == expected
