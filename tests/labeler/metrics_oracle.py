"""The agreement reports as labeler/metrics.py computed them before they were kept (issue 46): from every
submitted label of a queryset, in Python. The tests' oracle for labeler/agreement.py: on the same labels, the
reports read from the kept counts must equal these."""

import math
from collections import defaultdict
from itertools import combinations

from labeler.metrics import (
    _definition,
    _finals,
    _submitted_by_task,
    accuracy,
    cohen_kappa,
    distribution,
    jaccard,
    per_tag_precision_recall,
)
from labeler.models import LabelOrigin
from labeler.taxonomy import UNASSIGNED


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None



def _reviewer(row) -> str:
    return row["author__username"] or "(deleted user)"


def llm_vs_human(labels_qs, spec) -> dict:
    """The model's submitted label against each submitted human label of the same task and taxonomy.

    Every (model, human) pair counts once. Single fields: accuracy; multi (L2) fields: mean
    Jaccard plus per-tag precision/recall with the model as prediction and the human as truth;
    and each reviewer's accuracy per single field against the model.
    """
    spec = _definition(spec)
    singles, multis = spec.single_fields(), spec.multi_fields()
    field_pairs: dict[str, list] = defaultdict(list)
    tag_pairs: dict[str, list] = defaultdict(list)
    reviewer_pairs: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    tasks = pairs = 0
    for group in _submitted_by_task(labels_qs):
        model = group["model"]
        if model is None or not group["humans"]:
            continue
        tasks += 1
        for human in group["humans"]:
            pairs += 1
            for name in singles:
                pair = (model["values"].get(name), human["values"].get(name))
                field_pairs[name].append(pair)
                reviewer_pairs[_reviewer(human)][name].append(pair)
            for name in multis:
                tag_pairs[name].append((model["values"].get(name) or [], human["values"].get(name) or []))
    return {
        "tasks": tasks,
        "pairs": pairs,
        "fields": {name: {"accuracy": accuracy(field_pairs[name]), "n": len(field_pairs[name])} for name in singles},
        "multi": {name: {"jaccard": _mean([jaccard(a, b) for a, b in tag_pairs[name]]), "n": len(tag_pairs[name]),
                         "tags": per_tag_precision_recall(tag_pairs[name])} for name in multis},
        "reviewers": {user: {name: accuracy(by_field[name]) for name in singles}
                      for user, by_field in sorted(reviewer_pairs.items())},
    }


def human_vs_human(labels_qs, spec) -> dict:
    """Agreement between reviewers on tasks with two or more submitted human labels.

    Every unordered pair of reviewers on a task gives one rating pair (earlier label id first).
    Single fields: Cohen's kappa and raw agreement pooled over all those pairs; multi fields:
    mean Jaccard.
    """
    spec = _definition(spec)
    singles, multis = spec.single_fields(), spec.multi_fields()
    field_pairs: dict[str, list] = defaultdict(list)
    jaccards: dict[str, list] = defaultdict(list)
    tasks = pairs = 0
    for group in _submitted_by_task(labels_qs):
        if len(group["humans"]) < 2:
            continue
        tasks += 1
        for a, b in combinations(group["humans"], 2):
            pairs += 1
            for name in singles:
                field_pairs[name].append((a["values"].get(name), b["values"].get(name)))
            for name in multis:
                jaccards[name].append(jaccard(a["values"].get(name) or [], b["values"].get(name) or []))
    return {
        "tasks": tasks,
        "pairs": pairs,
        "fields": {name: {"kappa": cohen_kappa(field_pairs[name]), "agreement": accuracy(field_pairs[name]),
                          "n": len(field_pairs[name])} for name in singles},
        "multi": {name: {"jaccard": _mean(jaccards[name]), "n": len(jaccards[name])} for name in multis},
    }


def label_distributions(labels_qs, spec) -> dict:
    """Distribution of each field over the *final* label of every task, and of reviewer categories.

    A task's final label is its newest submitted human label (latest updated_at, then highest id),
    else its submitted model label; tasks with neither are left out.
    """
    spec = _definition(spec)
    finals = list(_finals(labels_qs).values())
    categories = dict.fromkeys([*spec.categories, UNASSIGNED], 0)
    for row in finals:
        category = spec.category_for(row["values"])
        categories[category] = categories.get(category, 0) + 1
    return {
        "tasks": len(finals),
        "final_from": {"human": sum(1 for r in finals if r["origin"] == LabelOrigin.HUMAN),
                       "model": sum(1 for r in finals if r["origin"] == LabelOrigin.MODEL)},
        "fields": {name: [[value, count] for value, count in distribution([r["values"].get(name) for r in finals])]
                   for name in spec.fields()},
        "categories": categories,
    }


def same(kept, oracle) -> bool:
    """The two reports are the same: equal structure, keys in the same order, numbers equal but for the last bits
    of a float (the kept means sum in another order)."""
    if isinstance(oracle, dict):
        return (isinstance(kept, dict) and list(kept) == list(oracle)
                and all(same(kept[key], oracle[key]) for key in oracle))
    if isinstance(oracle, list | tuple):
        return (isinstance(kept, list | tuple) and len(kept) == len(oracle)
                and all(same(a, b) for a, b in zip(kept, oracle, strict=True)))
    if isinstance(oracle, float) and isinstance(kept, float | int) and not isinstance(kept, bool):
        return math.isclose(kept, oracle, rel_tol=1e-9, abs_tol=1e-12)
    return type(kept) is type(oracle) and kept == oracle
