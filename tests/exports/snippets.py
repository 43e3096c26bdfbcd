"""Reading the code blocks of a dataset card and running them as a trainer pastes them."""


def load_section_blocks(card: str, language: str = "python") -> list[str]:
    """The code blocks in `language` of a dataset card's "## Load" section, as the card shows them."""
    section = card.split("\n## Load\n", 1)[1].split("\n## ", 1)[0]
    return [part.split("```", 1)[0].strip("\n") for part in section.split("```" + language + "\n")[1:]]


def run_blocks(blocks: list[str]) -> list[dict]:
    """Run code blocks one by one, each in a scope of its own, as a trainer pastes them; for each, the rows of what it
    loaded: {split: rows} for a DatasetDict (`dataset`, `one`; streamed ones too), a count for a DataFrame (`df`)
    or a Table (`table`)."""
    def rows(value):
        if hasattr(value, "keys") and not hasattr(value, "columns"):
            return {split: sum(1 for _ in part) for split, part in value.items()}
        return len(value)

    found = []
    for block in blocks:
        scope = {}
        exec(block, scope)
        found.append({name: rows(scope[name]) for name in ("dataset", "one", "df", "table") if name in scope})
    return found
