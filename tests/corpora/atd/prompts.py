"""ATD prompts written straight to the pool: candidate A of each is "a<p>", which tests/doubles.py JudgeDouble
reads as the judge's P(A) in percent."""

from corpora.atd.models import AtdPrompt


def make_prompts(project, percents):
    return [AtdPrompt.objects.create(project=project, external_id=f"p{n}", messages=[{"role": "user", "content": "?"}],
                                     candidate_a=f"a{pct}", candidate_b=f"b{100 - pct}", source_sha256=f"{n:064d}")
            for n, pct in enumerate(percents)]

