"""The metrics page's figures kept as counts (dataplatform/tallies), so the page reads a few thousand small rows
instead of every label of the project, three times.

Every figure of the agreement reports (labeler/metrics.py's `llm_vs_human`, `human_vs_human` and
`label_distributions` as they were computed from every label) is a sum over tasks: each task's submitted labels
under a taxonomy contribute counts, keyed by what they count (a JSON list: the taxonomy id, the report, the field,
and the values or the pair of values, e.g. [7,"hh","pair","scope","single-file","multi-file"]). A change to a label
replaces its task's contribution: the new one added, the old one subtracted (labeler/figures.py `label_changed`).
The reports are read back from the counts (`reports`): agreement as matches over pairs, Cohen's kappa from the
table of pairs, mean Jaccard from the counts of (intersection, union) sizes, distributions as they are."""

import json
from collections import Counter, defaultdict
from itertools import combinations

from django.contrib.auth import get_user_model

from dataplatform.tallies import registry, selectors
from dataplatform.tallies.registry import Figure

from .models import Label, LabelOrigin, LabelStatus, Taxonomy
from .taxonomy import UNASSIGNED, UNSPECIFIED, TaxonomySpec

# A label as the kept figures read it (labeler/figures.py takes an item's labels before and after each change).
LABEL_COLUMNS = ("id", "taxonomy_id", "origin", "author_id", "status", "values", "updated_at")
DELETED_USER = "(deleted user)"
KEY_LIMIT = 300  # the tally key's column; a longer key (a hostile value) is counted under one overflow key


def key(taxonomy_id: int, *parts) -> str:
    text = json.dumps([taxonomy_id, *parts], separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= KEY_LIMIT else json.dumps([taxonomy_id, "overflow"])


def contribution(labels: list[dict], spec: TaxonomySpec, taxonomy_id: int) -> Counter:
    """What one task's labels under one taxonomy (rows of LABEL_COLUMNS) add to the counts.
    Only submitted labels count; reviewers in label-id order (the earlier first in a pair of reviewers)."""
    submitted = sorted((row for row in labels if row["status"] == LabelStatus.SUBMITTED), key=lambda row: row["id"])
    model = next((row for row in submitted if row["origin"] == LabelOrigin.MODEL), None)
    humans = [row for row in submitted if row["origin"] != LabelOrigin.MODEL]
    counts: Counter = Counter()

    def count(*parts):
        counts[key(taxonomy_id, *parts)] += 1

    singles, multis = spec.single_fields(), spec.multi_fields()
    if model is not None and humans:
        count("llm", "tasks")
        for human in humans:
            count("llm", "pairs")
            count("llm", "reviewer", human["author_id"])
            for name in singles:
                if model["values"].get(name) == human["values"].get(name):
                    count("llm", "match", name)
                    count("llm", "reviewer_match", human["author_id"], name)
            for name in multis:
                predicted, truth = set(model["values"].get(name) or []), set(human["values"].get(name) or [])
                count("llm", "jaccard", name, len(predicted & truth), len(predicted | truth))
                predicted, truth = predicted - {UNSPECIFIED}, truth - {UNSPECIFIED}
                for tag in predicted:
                    count("llm", "predicted", name, tag)
                for tag in truth:
                    count("llm", "support", name, tag)
                for tag in predicted & truth:
                    count("llm", "tp", name, tag)
    if len(humans) >= 2:
        count("hh", "tasks")
        for first, second in combinations(humans, 2):
            count("hh", "pairs")
            for name in singles:
                count("hh", "pair", name, first["values"].get(name), second["values"].get(name))
            for name in multis:
                a, b = set(first["values"].get(name) or []), set(second["values"].get(name) or [])
                count("hh", "jaccard", name, len(a & b), len(a | b))
    # The final label: the newest submitted reviewer label, else the model's.
    final = max(humans, key=lambda row: (row["updated_at"], row["id"])) if humans else model
    if final is not None:
        count("final", "origin", final["origin"])
        count("final", "category", spec.category_for(final["values"]))
        for name in spec.fields():
            value = final["values"].get(name)
            for item in value if isinstance(value, list) else [value]:
                if item is not None:
                    count("final", "value", name, item)
    return counts


def _recount(project_id: int) -> dict[str, Figure]:
    """Every task's contribution, from the project's submitted task labels (what the reports read before)."""
    rows = (Label.objects.filter(project_id=project_id, task__isnull=False, status=LabelStatus.SUBMITTED)
            .order_by("task_id", "taxonomy_id", "id").values("task_id", *LABEL_COLUMNS))
    groups: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for row in rows.iterator(chunk_size=5000):
        groups[(row["task_id"], row["taxonomy_id"])].append(row)
    specs = {taxonomy.pk: taxonomy.definition for taxonomy in
             Taxonomy.objects.filter(pk__in={taxonomy_id for _, taxonomy_id in groups})}
    total: Counter = Counter()
    for (_, taxonomy_id), labels in groups.items():
        total.update(contribution(labels, specs[taxonomy_id], taxonomy_id))
    return {name: Figure(n) for name, n in total.items() if n}


AGREEMENT = registry.define("labeler.agreement", tables=(Label,), recount=_recount)


def _mean_jaccard(sizes: dict[tuple[int, int], int], n: int) -> float | None:
    """The mean of |A ∩ B| / |A ∪ B| (1 for two empty sets) over n pairs, from the counts of each (∩, ∪)."""
    if not n:
        return None
    return sum(count * (both / either if either else 1.0) for (both, either), count in sizes.items()) / n


def reports(project_id: int, taxonomy: Taxonomy) -> dict:
    """{"llm_vs_human", "human_vs_human", "distributions"} of a project's task labels under `taxonomy`, as
    labeler/metrics.py computed them from every label, read from the kept counts (two queries, and one for the
    reviewers' names)."""
    spec = taxonomy.definition
    prefix = json.dumps([taxonomy.pk], separators=(",", ":"))[:-1] + ","
    counts: dict[tuple, int] = {}
    for name, figure in selectors.figures(project_id, AGREEMENT).items():
        if figure.count and name.startswith(prefix):
            counts[tuple(_hashable(part) for part in json.loads(name)[1:])] = figure.count
    return {"llm_vs_human": _llm_vs_human(counts, spec), "human_vs_human": _human_vs_human(counts, spec),
            "distributions": _distributions(counts, spec)}


def _by(counts: dict[tuple, int], *head) -> dict[tuple, int]:
    """The counts whose key begins with `head`, keyed by the rest."""
    return {parts[len(head):]: n for parts, n in counts.items() if parts[:len(head)] == head}


def _llm_vs_human(counts: dict[tuple, int], spec: TaxonomySpec) -> dict:
    singles, multis = spec.single_fields(), spec.multi_fields()
    pairs = counts.get(("llm", "pairs"), 0)
    tags: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for what in ("tp", "predicted", "support"):
        for (name, tag), n in _by(counts, "llm", what).items():
            tags[name][tag][what] = n
    return {
        "tasks": counts.get(("llm", "tasks"), 0),
        "pairs": pairs,
        "fields": {name: {"accuracy": counts.get(("llm", "match", name), 0) / pairs if pairs else None, "n": pairs}
                   for name in singles},
        "multi": {name: {"jaccard": _mean_jaccard(_by(counts, "llm", "jaccard", name), pairs), "n": pairs,
                         "tags": {tag: {"precision": row["tp"] / row["predicted"] if row["predicted"] else None,
                                        "recall": row["tp"] / row["support"] if row["support"] else None,
                                        "support": row["support"], "predicted": row["predicted"], "tp": row["tp"]}
                                  for tag, row in sorted(tags[name].items())}}
                  for name in multis},
        "reviewers": _reviewers(counts, singles),
    }


def _reviewers(counts: dict[tuple, int], singles: list[str]) -> dict:
    """Each reviewer's accuracy per single field against the model, by username (deleted users: one row)."""
    pairs, matches = Counter(), Counter()
    ids = {author for (author,) in _by(counts, "llm", "reviewer")}
    names = dict(get_user_model().objects.filter(pk__in=ids - {None}).values_list("pk", "username")) if ids else {}
    for (author,), n in _by(counts, "llm", "reviewer").items():
        pairs[names.get(author, DELETED_USER)] += n
    for (author, name), n in _by(counts, "llm", "reviewer_match").items():
        matches[(names.get(author, DELETED_USER), name)] += n
    return {user: {name: matches[(user, name)] / n for name in singles} for user, n in sorted(pairs.items())}


def _human_vs_human(counts: dict[tuple, int], spec: TaxonomySpec) -> dict:
    pairs = counts.get(("hh", "pairs"), 0)
    fields = {}
    for name in spec.single_fields():
        table = _by(counts, "hh", "pair", name)
        agreement = sum(n for (a, b), n in table.items() if a == b) / pairs if pairs else None
        fields[name] = {"kappa": _kappa(table, pairs), "agreement": agreement, "n": pairs}
    return {"tasks": counts.get(("hh", "tasks"), 0), "pairs": pairs, "fields": fields,
            "multi": {name: {"jaccard": _mean_jaccard(_by(counts, "hh", "jaccard", name), pairs), "n": pairs}
                      for name in spec.multi_fields()}}


def _kappa(table: dict[tuple, int], n: int) -> float | None:
    """labeler/metrics.py's cohen_kappa of the pairs that `table` counts ({(first, second): pairs}, n in all)."""
    if not n:
        return None
    first, second = Counter(), Counter()
    for (a, b), count in table.items():
        first[a] += count
        second[b] += count
    p_o = sum(count for (a, b), count in table.items() if a == b) / n
    p_e = sum(first[c] * second[c] for c in first) / (n * n)
    if p_e >= 1:
        return 1.0 if p_o == 1 else 0.0
    return (p_o - p_e) / (1 - p_e)


def _hashable(value):
    """A key's part as a dict key: a list (a value that should have been a string) as a tuple."""
    return tuple(_hashable(item) for item in value) if isinstance(value, list) else value


def _distributions(counts: dict[tuple, int], spec: TaxonomySpec) -> dict:
    origins = _by(counts, "final", "origin")
    categories = dict.fromkeys([*spec.categories, UNASSIGNED], 0)
    for (category,), n in sorted(_by(counts, "final", "category").items(), key=lambda item: str(item[0])):
        categories[category] = categories.get(category, 0) + n
    values: dict[str, list] = defaultdict(list)
    for (name, value), n in _by(counts, "final", "value").items():
        values[name].append([value, n])
    return {
        "tasks": sum(origins.values()),
        "final_from": {"human": origins.get((LabelOrigin.HUMAN.value,), 0),
                       "model": origins.get((LabelOrigin.MODEL.value,), 0)},
        "fields": {name: sorted(values[name], key=lambda item: (-item[1], str(item[0]))) for name in spec.fields()},
        "categories": categories,
    }
