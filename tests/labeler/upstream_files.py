"""Definition files in the published SWE Labeler's shape (github alibaba/AgenticBigBang: task_type_l2.yaml,
domain_l2.yaml, orthogonal.yaml, routing.json), written from one of our taxonomies with texts made up here;
with the two quirks of the published files: an L2 name under two families, and a family with no L2."""

import io
import json
import zipfile

import yaml

SHARED_TAG = "oauth_oidc"  # the published domain file lists it under two families


def _entry(slug: str, definition: str) -> dict:
    return {"name": slug, "authoritative_source": f"A made-up source for {slug}",
            "official_definition": f"Official: {definition}\nsecond line of the block.\n",
            "operational_definition": f"{definition}\n", "signals": [f"{slug} signal one", f"{slug} signal two"],
            "boundary_notes": f"vs its siblings: {slug} is itself.\n"}


def upstream_files(spec) -> dict[str, bytes]:
    """The four files of `spec` (a TaxonomySpec with task_type and domain axes, a domain routing)."""
    axes = {}
    for axis in ("task_type", "domain"):
        families = spec.data["axes"][axis]["families"]
        axes[axis] = {family["slug"]: {"source_framework": f"Framework of {family['slug']}",
                                       "l2": [_entry(tag["slug"], tag["definition"]) for tag in family["tags"]]}
                      for family in families}
    domain = axes["domain"]
    first, second, *_ = [key for key, family in domain.items() if family["l2"]]
    for key in (first, second):
        if SHARED_TAG not in [entry["name"] for entry in domain[key]["l2"]]:
            domain[key]["l2"].append(_entry(SHARED_TAG, f"Delegated sign-in, as {key} sees it."))
    domain[list(domain)[-1]] = {"source_framework": "none", "l2": []}  # a family without L2
    orthogonal = {name: {"dimension_name": f"The {name} dimension", "source_framework": "A framework",
                         "rationale": "Why it matters.\n",
                         "levels": [_entry(choice["slug"], choice["definition"])
                                    for choice in spec.data["dimensions"][name]["choices"]]}
                  for name in spec.dimensions if spec.stage_of(name) == 2}
    table = spec.data["routing"]["table"]
    routes = {category: [family for family, routed in table.items() if routed == category]
              for category in spec.categories if category in table.values()}
    routing = {"routing_axis": "domain_l1", "source": "made up", "routes": routes,
               "unassigned_domain_l1": [key for key in domain if key not in table], "unassigned_category": "UNASSIGNED"}
    dump = lambda data: yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()  # noqa: E731
    return {"task_type_l2.yaml": dump(axes["task_type"]), "domain_l2.yaml": dump(domain),
            "orthogonal.yaml": dump(orthogonal), "routing.json": json.dumps(routing, indent=2).encode()}


def zipped(files: dict[str, bytes], folder: str = "swe_labeler/definition/") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(folder + name, data)
        archive.writestr("swe_labeler/README.md", "not a definition file")
    return buffer.getvalue()
