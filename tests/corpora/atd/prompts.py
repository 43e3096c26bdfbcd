"""ATD prompts written straight to the pool: candidate A of each is "a<p>", which tests/doubles.py JudgeDouble
reads as the judge's P(A) in percent; and `near_ties`, DPO pairs made of them."""

from corpora.atd import services
from corpora.atd.models import AtdPrompt
from dataplatform.inference import override_backend

from ...doubles import JudgeDouble, RecordingProgress


def make_prompts(project, percents):
    return [AtdPrompt.objects.create(project=project, external_id=f"p{n}", messages=[{"role": "user", "content": "?"}],
                                     candidate_a=f"a{pct}", candidate_b=f"b{100 - pct}", source_sha256=f"{n:064d}")
            for n, pct in enumerate(percents)]


def near_ties(project, members) -> None:
    """Four near-tie prompts scored and answered by the one-word teacher (a double: the model is not the point
    here, the rows are): three DPO pairs."""
    make_prompts(project, [50, 51, 49, 48])
    run = services.start_scoring(project=project, batch_size=10, user=members["curator"], publish=False)
    with override_backend(JudgeDouble()):
        services.score_prompts(run=run, progress=RecordingProgress())
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.05, user=members["curator"])
    teacher = services.start_teacher(selection=selection, mode="logprobs", user=members["curator"], publish=False)
    with override_backend(JudgeDouble()):
        services.ask_teacher(run=teacher, progress=RecordingProgress())
