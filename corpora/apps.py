from django.apps import AppConfig


class CorporaConfig(AppConfig):
    """Curated corpora: AED error cases and replays, ATD near-tie prompts (built in their own issues).

    Named `corpora`, not `datasets` (as DESIGN.md first had it): a top-level `datasets`
    package would shadow Hugging Face's `datasets` library, which trainers and our tests
    use to load exported shards (`from datasets import load_dataset`).
    """

    name = "corpora"
