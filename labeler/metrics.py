"""Agreement and distribution metrics for SWE labels.

The pure functions (`accuracy`, `jaccard`, `per_tag_precision_recall`, `cohen_kappa`, `distribution`)
take plain Python values and know nothing of Django. The agreement reports and the label distributions are
kept as counts by the services (labeler/agreement.py reads them back; tests/labeler/metrics_oracle.py keeps the
computation from every label that they replace, as the tests' oracle). `version_changes` compares the final
labels under two taxonomy versions from a queryset of `Label` rows the caller has scoped.
"""

from collections import Counter

from .models import LabelOrigin, LabelStatus
from .taxonomy import UNSPECIFIED, TaxonomySpec

# ---------------------------------------------------------------------------------------------
# Pure functions


def accuracy(pairs: list[tuple[str | None, str | None]]) -> float | None:
    """Share of pairs whose two values are equal: #{(a, b) : a == b} / #pairs.

    None when there are no pairs. A missing value (None) only matches another missing value.
    """
    if not pairs:
        return None
    return sum(1 for a, b in pairs if a == b) / len(pairs)


def jaccard(a: list[str], b: list[str]) -> float:
    """Jaccard similarity of two tag lists taken as sets: |A ∩ B| / |A ∪ B|; 1.0 when both are empty."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def per_tag_precision_recall(pairs: list[tuple[list[str], list[str]]]) -> dict[str, dict]:
    """Per-tag precision and recall of predicted tag lists against true ones.

    Each pair is (predicted, truth). For a tag t, over all pairs:
      tp        = #pairs with t in predicted and t in truth
      predicted = #pairs with t in predicted
      support   = #pairs with t in truth
      precision = tp / predicted   (None when t was never predicted)
      recall    = tp / support     (None when t never occurs in the truth)
    The placeholder tag "unspecified" is ignored. Tags are returned in sorted order.
    """
    tp: Counter = Counter()
    predicted: Counter = Counter()
    support: Counter = Counter()
    for pred, truth in pairs:
        p, t = set(pred) - {UNSPECIFIED}, set(truth) - {UNSPECIFIED}
        predicted.update(p)
        support.update(t)
        tp.update(p & t)
    return {tag: {"precision": tp[tag] / predicted[tag] if predicted[tag] else None,
                  "recall": tp[tag] / support[tag] if support[tag] else None,
                  "support": support[tag], "predicted": predicted[tag], "tp": tp[tag]}
            for tag in sorted(predicted.keys() | support.keys())}


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters: (p_o - p_e) / (1 - p_e).

    p_o = share of pairs where the raters agree;
    p_e = Σ_c P_a(c) · P_b(c), the chance agreement from each rater's own category frequencies,
          over the categories that occur in the pairs.
    None when there are no pairs. When p_e == 1 (both raters always give the same single
    category) kappa is undefined (0/0); we return 1.0 if the raters agree on every pair, else 0.0.
    """
    if not pairs:
        return None
    n = len(pairs)
    p_o = sum(1 for a, b in pairs if a == b) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_e = sum(first[c] * second[c] for c in first) / (n * n)
    if p_e >= 1:
        return 1.0 if p_o == 1 else 0.0
    return (p_o - p_e) / (1 - p_e)


def distribution(values: list) -> list[tuple[str, int]]:
    """Counts of each value, sorted by count descending then value; list values (L2 tags) are flattened.

    None (a missing field) is not counted.
    """
    counts: Counter = Counter()
    for value in values:
        counts.update(value if isinstance(value, list) else [value])
    counts.pop(None, None)
    return sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))


# ---------------------------------------------------------------------------------------------
# From the database

_COLUMNS = ("task_id", "taxonomy_id", "origin", "author__username", "status", "values", "updated_at", "id")


def _definition(spec) -> TaxonomySpec:
    """Accept a TaxonomySpec or a Taxonomy row."""
    return spec if isinstance(spec, TaxonomySpec) else spec.definition


def _submitted_by_task(labels_qs) -> list[dict]:
    """The submitted labels, one query, grouped per (task, taxonomy): [{"model": row | None, "humans": [rows]}].

    Humans are in label-id order; groups in task order.
    """
    rows = labels_qs.filter(status=LabelStatus.SUBMITTED).order_by("task_id", "taxonomy_id", "id").values(*_COLUMNS)
    groups: dict[tuple, dict] = {}
    for row in rows:
        group = groups.setdefault((row["task_id"], row["taxonomy_id"]), {"model": None, "humans": []})
        if row["origin"] == LabelOrigin.MODEL:
            group["model"] = row
        else:
            group["humans"].append(row)
    return list(groups.values())


def _finals(labels_qs) -> dict[int, dict]:
    """task id -> its final label row: the newest submitted human label, else the submitted model label."""
    finals = {}
    for group in _submitted_by_task(labels_qs):
        if group["humans"]:
            final = max(group["humans"], key=lambda row: (row["updated_at"], row["id"]))
        else:
            final = group["model"]
        if final is not None:
            finals[final["task_id"]] = final
    return finals


def version_changes(old_qs, new_qs, old_spec, new_spec, *, examples: int = 20) -> dict:
    """What moving from one taxonomy version to another changes, over the tasks with a final label under both:
    per field the two share, how many tasks' values differ (with a few examples), and the category moves."""
    old_spec, new_spec = _definition(old_spec), _definition(new_spec)
    old, new = _finals(old_qs), _finals(new_qs)
    both = sorted(old.keys() & new.keys())
    shared = [name for name in old_spec.fields() if name in new_spec.fields()]
    fields = {}
    for name in shared:
        changed = [task for task in both if old[task]["values"].get(name) != new[task]["values"].get(name)]
        fields[name] = {"changed": len(changed), "of": len(both),
                        "examples": [{"task_id": task, "from": old[task]["values"].get(name),
                                      "to": new[task]["values"].get(name)} for task in changed[:examples]]}
    moves = Counter((old_spec.category_for(old[task]["values"]), new_spec.category_for(new[task]["values"]))
                    for task in both)
    return {"tasks": len(both), "only_old": len(old.keys() - new.keys()), "only_new": len(new.keys() - old.keys()),
            "fields": fields, "only_in_old": [n for n in old_spec.fields() if n not in shared],
            "only_in_new": [n for n in new_spec.fields() if n not in shared],
            "categories": [{"from": a, "to": b, "tasks": n} for (a, b), n in sorted(moves.items())]}
