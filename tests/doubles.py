"""Test doubles shared by several test modules (each stands in for one collaborator in a unit test).

The backend doubles stand in for the model: a test puts one in its place with the `use_backend` fixture
(tests/conftest.py), which every `dataplatform.inference.backend_for` then answers. Each implements the part of
the Backend protocol its tests reach; the real model runs the same code in the tests marked `model`.
"""

import math

from dataplatform.inference import Generation, TokenStep, generate_by_constraint
from dataplatform.jobs.models import Job


class RecordingProgress:
    """What a job's ProgressReporter offers a service, minus the database: the reports are kept in a list."""

    def __init__(self):
        self.job = Job(progress_total=0)
        self.reports: list[int] = []
        self.messages: list[str | None] = []

    def set_total(self, total: int) -> None:
        self.job.progress_total = total

    def report(self, done: int, *, message: str | None = None, force: bool = False) -> None:
        self.reports.append(done)
        self.messages.append(message)


class ConstraintsPerGroup:
    """`generate_each` (per-row constraints) as the vLLM client does it: one `generate` per distinct constraint."""

    def generate_each(self, prompts, *, max_tokens, temperature, seed, constraints):
        return generate_by_constraint(self, prompts, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                      constraints=constraints)


# --- annotate: token ids one per character or byte --------------------------------------------------------

EOS = 3  # the fake backends' end-of-sequence id (a control character nobody types)


class CharBackend:
    """One token per character (the id is the code point): decode -> encode always round-trips.

    `script` is what `stream` generates, followed by EOS, as a real backend ends a stopped response.
    Used across the annotate tests wherever the real model is not the point.
    """

    name = "chars"
    model_id = "char-model"
    eos_token_ids = frozenset({EOS})

    def __init__(self, script: str = " ok."):
        self.script = script

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)

    def token_pieces(self, ids: list[int]) -> list[bytes]:
        return [chr(i).encode("utf-8") for i in ids]

    def chat_prompt_ids(self, messages: list[dict], *, tools=None, continue_final_message=False) -> list[int]:
        return self.tokenize("".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>")

    def prompt_logprobs(self, ids, *, top_k):
        """Every token scored -1.5, with two runners-up (the ids after it)."""
        return [None] + [{token_id: -1.5, token_id + 1: -2.5, token_id + 2: -3.5} for token_id in ids[1:]]

    def stream(self, prompt_ids, *, max_tokens, temperature, seed, top_k):
        steps = self.tokenize(self.script) + [EOS]
        for count, token_id in enumerate(steps[:max_tokens], start=1):
            finish = "stop" if token_id == EOS else ("length" if count == max_tokens else None)
            yield TokenStep(token_id=token_id, logprob=-0.5, top=[(token_id, -0.5), (token_id + 1000, -2.0)],
                            finish_reason=finish)

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        """`stream` of each prompt, in order (the batched path of rollout jobs)."""
        for index, (ids, seed) in enumerate(zip(prompts, seeds, strict=True)):
            yield index, list(self.stream(ids, max_tokens=max_tokens, temperature=temperature, seed=seed, top_k=top_k))


class ByteBackend:
    """One token per UTF-8 byte (onPanda's utf8_tokenizer): a CJK character is three tokens."""

    def tokenize(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def detokenize(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


# --- labeler and AED drafts: answers from a script -------------------------------------------------------

class ScriptedBackend(ConstraintsPerGroup):
    """A test double for the labeling service's unit tests: answers each stage from a script.

    `answers` maps a stage ("stage1"/"stage2") to a list of texts used in turn, one per prompt;
    the real model runs the same code in tests/labeler/test_model.py."""

    name = "scripted"
    model_id = "scripted-model"
    supports_json_schema = False

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = {stage: list(texts) for stage, texts in answers.items()}
        self.calls: list[dict] = []
        self.prompts: list[list[dict]] = []  # every chat asked, in order

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        stage = "stage2" if "_l2" in messages[-1]["content"] else "stage1"
        self.prompts.append(messages)
        return [1 if stage == "stage1" else 2]

    def generate(self, prompts, *, max_tokens, temperature, seed, json_schema=None):
        self.calls.append({"prompts": len(prompts), "max_tokens": max_tokens})
        stage = {1: "stage1", 2: "stage2"}
        return [Generation(text=self.answers[stage[p[0]]].pop(0), token_ids=[], finish_reason="stop")
                for p in prompts]


class ConstrainingBackend(ConstraintsPerGroup):
    """A backend that constrains its answers (supports_json_schema): records the schema it is given."""

    model_id = "constraining-model"
    supports_json_schema = True

    def __init__(self, text):
        self.text, self.schemas = text, []

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        return [1]

    def generate(self, prompts, *, max_tokens, temperature, seed, json_schema=None, choice=None):
        self.schemas.append(json_schema)
        return [Generation(text=self.text, token_ids=[], finish_reason="stop") for _ in prompts]


# --- AED replays: the policy -------------------------------------------------------------------------------

class ScriptedPolicy:
    """A unit-test double for the policy backend: each prompt of each `rollouts` call gets the next text of a
    list (in a replay that is round by round: the runs still going, in (pair, arm) order). The text comes back
    as one token, then the end token, which the runner must drop; rows are yielded last first, as a real backend
    yields them in whatever order they finish. `rounds` records the seeds of every call, `shown` the chat of
    every prompt, in the order they were made."""

    model_id = "scripted-policy"
    supports_json_schema = False
    END = 0

    def __init__(self, texts):
        self.texts = list(texts)
        self.rounds = []
        self.shown = []
        self.pieces = ["<|end|>"]  # token id -> text; id 0 is END

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        self.shown.append(messages)
        return [1]

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        self.rounds.append(list(seeds))
        answers = []
        for _ in prompts:
            self.pieces.append(self.texts.pop(0) if self.texts else "answer 0")
            answers.append([TokenStep(token_id=len(self.pieces) - 1, logprob=-0.1),
                            TokenStep(token_id=self.END, logprob=-0.1, finish_reason="stop")])
        return reversed(list(enumerate(answers)))

    def detokenize(self, ids):
        return "".join(self.pieces[i] for i in ids)


# --- ATD: a judge ------------------------------------------------------------------------------------------

JUDGE_A, JUDGE_B = 65, 66  # the verdict token ids of the judge double


class JudgeDouble(ConstraintsPerGroup):
    """Answers the judge with a P(A) chosen per candidate text: the prompt's candidate A is "a<p>" where p
    is the probability (in percent) that the first-shown answer wins, whichever order it is shown in."""

    model_id = "judge-double"

    def __init__(self):
        self.batches = []
        self.generated = []

    def tokenize(self, text):
        return {"A": [JUDGE_A], "B": [JUDGE_B]}.get(text, [ord(c) for c in text])

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        content = messages[-1]["content"]
        first = content.split("Answer A:")[1].split("Answer B:")[0].strip() if "Answer A:" in content else ""
        return [int(first[1:]) if first[1:].isdigit() else 50]

    def next_token_logprobs(self, prompts, candidates):
        self.batches.append(len(prompts))
        return [{JUDGE_A: math.log(p[0] / 100), JUDGE_B: math.log(1 - p[0] / 100)} for p in prompts]

    def generate(self, prompts, *, max_tokens, temperature, seed, json_schema=None, choice=None):
        """The one-word teacher: the first-shown answer's word when it wins with P > 0.5, else the other's."""
        self.generated.append({"sequences": len(prompts), "choice": choice, "max_tokens": max_tokens,
                               "temperature": temperature})
        return [Generation(text="A" if p[0] > 50 else "B", token_ids=[], finish_reason="stop") for p in prompts]
