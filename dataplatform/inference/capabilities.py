"""What the platform needs of its model server, asked of the live one: one line per capability, PASS or FAIL, what
was seen and, for a FAIL, the fix (the `vllm serve` flag or the setting to change). `manage.py model_check` prints
the report and the system page shows its last run.

A vLLM server is probed only through the client's public methods (what the platform itself calls) and, for what they
do not show (the version, the raw token keys, the dev-mode config), plain requests to the server the settings name
(VLLM_BASE_URL, VLLM_API_KEY: the platform's default backend is built from them). The embedded model is checked
the same way where it applies; what is vLLM's alone (its version, its token keys, its sampling defaults) is left out.

Every line's texts are `Status` messages (dataplatform/status.py): the command prints them in English, the system
page in the reader's language, the server's own words and the flags kept as data.
"""

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy, gettext_noop

from dataplatform.status import Status, render_html

from . import vllm_wire
from .base import BackendError

logger = logging.getLogger(__name__)

# The largest top-k a project may ask for: annotate's AnnotationConfig.top_k and the sampling job's `top_k` are both
# capped at 50 (their check constraint and serializer). The platform layer does not read the apps' settings, so the
# check asks for this many unless the caller names a number (`model_check --top-k`).
LARGEST_TOP_K = 50
# The sampling fields vLLM fills from the served model's generation_config.json when a request leaves them out
# (ModelConfig.get_diff_sampling_param; CompletionRequest._DEFAULT_SAMPLING_PARAMS in vLLM 0.34).
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
                   "frequency_penalty")
# The oldest vLLM the client speaks to: `structured_outputs` replaced the `guided_*` fields in 0.12.
OLDEST_VLLM = (0, 12)

PROBE = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
PARTIAL = "The answer is"  # an assistant message left open for the model to continue
CHOICES = ["yes", "no"]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": CHOICES}}, "required": ["answer"],
          "additionalProperties": False}

# What each line checks: its label (translated) and the API feature it names (shown as code).
CHECKS = {
    "served_model": (gettext_lazy("Served model"), "GET /v1/models"),
    "version": (gettext_lazy("Server version"), "GET /version"),
    "tokenize": (gettext_lazy("Chat template, last message left open"), "/tokenize continue_final_message"),
    "max_logprobs": (gettext_lazy("Top-k logprobs"), "--max-logprobs"),
    "token_ids": (gettext_lazy("Tokens as ids"), "return_tokens_as_token_ids"),
    "json": (gettext_lazy("Structured outputs: JSON schema"), "structured_outputs.json"),
    "choice": (gettext_lazy("Structured outputs: choice"), "structured_outputs.choice"),
    "sampling": (gettext_lazy("Sampling defaults"), "--generation-config"),
}
VLLM_ONLY = ("version", "token_ids")
UPGRADE = Status(gettext_noop("Run a vLLM release the platform supports (%(versions)s; %(doc)s, vLLM versions)."),
                 versions="0.12+, tested with 0.34", doc="docs/operations.md")


@dataclass(frozen=True)
class Capability:
    name: str  # a key of CHECKS
    ok: bool | None  # None: not checked (after a failure it depends on), or not knowable from outside the server
    seen: Status
    fix: Status | None = None

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "INFO"}[self.ok]

    @property
    def label(self) -> str:
        return str(CHECKS[self.name][0])

    @property
    def feature(self) -> str:
        return CHECKS[self.name][1]

    def line(self) -> str:
        """The line `model_check` prints (English)."""
        text = f"{self.verdict}  {self.label} ({self.feature}): {self.seen.english()}"
        return f"{text}\n      fix: {self.fix.english()}" if self.fix else text

    def seen_html(self) -> str:
        """What was seen, for a page: in its language, escaped, the server's words and the flags marked as data."""
        return render_html(self.seen.as_json(), self.seen.english())

    def fix_html(self) -> str:
        return render_html(self.fix.as_json(), self.fix.english()) if self.fix else ""

    def as_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "verdict": self.verdict, "seen": self.seen.english(),
                "fix": self.fix.english() if self.fix else None, "seen_i18n": self.seen.as_json(),
                "fix_i18n": self.fix.as_json() if self.fix else None}

    @classmethod
    def from_json(cls, data: dict) -> "Capability":
        fix = data.get("fix_i18n")
        return cls(data["name"], data["ok"], _status(data["seen_i18n"]), _status(fix) if fix else None)


def _status(stored: dict) -> Status:
    return Status(stored["text"], **(stored.get("params") or {}))


@dataclass(frozen=True)
class CapabilityReport:
    backend: str  # "vllm" or "local"
    model: str
    top_k: int
    capabilities: list[Capability]
    checked_at: datetime = field(default_factory=timezone.now)

    @property
    def ok(self) -> bool:
        return all(capability.ok is not False for capability in self.capabilities)

    @property
    def failures(self) -> list[Capability]:
        return [capability for capability in self.capabilities if capability.ok is False]

    def as_json(self) -> dict:
        return {"backend": self.backend, "model": self.model, "top_k": self.top_k, "ok": self.ok,
                "checked_at": self.checked_at.isoformat(),
                "capabilities": [capability.as_json() for capability in self.capabilities]}

    @classmethod
    def from_json(cls, data: dict) -> "CapabilityReport":
        return cls(backend=data["backend"], model=data["model"], top_k=data["top_k"],
                   capabilities=[Capability.from_json(item) for item in data["capabilities"]],
                   checked_at=datetime.fromisoformat(data["checked_at"]))


def capability_report(backend, *, top_k: int = LARGEST_TOP_K) -> CapabilityReport:
    """Probe `backend` (the platform's default: a vLLM client, or the embedded model) for every capability the
    platform needs, in CHECKS' order. Never raises: an unreachable server is a FAIL line with its fix, and the
    lines that need it are then "not checked". Makes model calls: never call it inside a database transaction."""
    vllm = backend.name == "vllm"
    names = [name for name in CHECKS if vllm or name not in VLLM_ONLY]
    served = _safely("served_model", lambda: _served_model(backend))
    if not served.ok:
        why = Status(gettext_noop("not checked: the served model's check failed (above)"))
        return CapabilityReport(backend=backend.name, model=settings.MODEL_NAME if vllm else backend.model_id,
                                top_k=top_k, capabilities=[served, *(Capability(name, None, why) for name in names[1:])])
    try:
        tokenize, prompt_ids = _tokenize(backend)
    except Exception as exc:
        tokenize, prompt_ids = _broken("tokenize", exc), None
    probes = {"version": _version, "tokenize": lambda: tokenize,
              "max_logprobs": lambda: _max_logprobs(backend, prompt_ids, top_k),
              "token_ids": lambda: _token_ids(backend.model_id, prompt_ids),
              "json": lambda: _json(backend, prompt_ids), "choice": lambda: _choice(backend, prompt_ids),
              "sampling": _sampling if vllm else _local_sampling}
    no_prompt = Status(gettext_noop("not checked: the chat template gave no prompt (above)"))
    lines = [served]
    for name in names[1:]:
        needs_prompt = name in ("max_logprobs", "token_ids", "json", "choice")
        lines.append(Capability(name, None, no_prompt) if needs_prompt and prompt_ids is None
                     else _safely(name, probes[name]))
    return CapabilityReport(backend=backend.name, model=backend.model_id, top_k=top_k, capabilities=lines)


def _safely(name: str, probe) -> Capability:
    """A probe's line; a probe that breaks (a bug, an answer of a shape nobody expected) is a FAIL that says so."""
    try:
        return probe()
    except Exception as exc:
        return _broken(name, exc)


def _broken(name: str, exc: Exception) -> Capability:
    logger.error("The %s capability probe failed.", name, exc_info=exc)
    return Capability(name, False, Status(gettext_noop("the check itself failed: %(error)s"),
                                          error=f"{type(exc).__name__}: {exc}"))


def _served_model(backend) -> Capability:
    try:
        served = backend.served_models()
        model = backend.model_id
    except BackendError as exc:
        return Capability("served_model", False, Status(gettext_noop("no answer: %(error)s"), error=str(exc)),
                          Status(gettext_noop("Start the server, or point %(url)s at it (its root URL, without "
                                              "/v1); %(key)s must be its %(flag)s."),
                                 url="VLLM_BASE_URL", key="VLLM_API_KEY", flag="--api-key"))
    if model not in served:
        return Capability("served_model", False,
                          Status(gettext_noop("%(model)s is not served; the server serves %(served)s"),
                                 model=model, served=", ".join(served)),
                          Status(gettext_noop("Set %(setting)s to one of them, or start vLLM with %(flag)s."),
                                 setting="MODEL_NAME", flag=f"--served-model-name {model}"))
    context = backend.context_length
    if context is None:
        return Capability("served_model", True, Status(
            gettext_noop("%(model)s is served; its context length is not reported (the server checks prompt "
                         "lengths itself)"), model=model))
    return Capability("served_model", True, Status(gettext_noop("%(model)s is served, context %(tokens)s tokens"),
                                                   model=model, tokens=context))


def _version() -> Capability:
    try:
        version = str(_server_json("GET", "/version")["version"])
    except (BackendError, LookupError, TypeError) as exc:
        return Capability("version", None, Status(gettext_noop("unknown (%(error)s): not vLLM, or behind a proxy "
                                                               "that hides its version"), error=str(exc)))
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if len(numbers) < 2:
        return Capability("version", None, Status(gettext_noop("vLLM %(version)s"), version=version))
    if numbers < OLDEST_VLLM:
        return Capability("version", False, Status(gettext_noop("vLLM %(version)s"), version=version), UPGRADE)
    return Capability("version", True, Status(gettext_noop("vLLM %(version)s"), version=version))


def _tokenize(backend) -> tuple[Capability, list[int] | None]:
    """The probe's prompt (the chat template with the generation prompt, as every rollout's) and the same
    conversation with an assistant message left open (`continue_final_message`, as every correction's)."""
    try:
        prompt_ids = backend.chat_prompt_ids(PROBE)
        text = backend.detokenize(backend.chat_prompt_ids([*PROBE, {"role": "assistant", "content": PARTIAL}],
                                                          continue_final_message=True))
    except BackendError as exc:
        return Capability("tokenize", False, Status(gettext_noop("refused: %(error)s"), error=str(exc)), UPGRADE), None
    if not text.rstrip().endswith(PARTIAL):
        return Capability("tokenize", False,
                          Status(gettext_noop("the prompt does not end with the open message: %(end)s"),
                                 end=repr(text[-40:])),
                          Status(gettext_noop("Serve the model with a chat template that can leave the last "
                                              "message open (%(flag)s)."), flag="--chat-template")), prompt_ids
    return Capability("tokenize", True, Status(gettext_noop("the prompt ends with the open message: %(end)s"),
                                               end=repr(text[-len(PARTIAL) - 12:]))), prompt_ids


def _max_logprobs(backend, prompt_ids: list[int], top_k: int) -> Capability:
    """Ask for `top_k` alternatives while generating and while scoring the prompt, as rollouts and corrections do:
    vLLM refuses either over its --max-logprobs with a 400 (SamplingParams._validate_logprobs)."""
    fix = Status(gettext_noop("Start vLLM with %(flag)s or more (%(compose)s starts it with 50), or check with the "
                              "largest top-k your projects use (%(option)s)."),
                 flag=f"--max-logprobs {top_k}", compose="docker-compose.yml", option="model_check --top-k")
    try:
        [step] = list(backend.stream(prompt_ids, max_tokens=1, temperature=0.0, seed=0, top_k=top_k))
        scored = [entry for entry in backend.prompt_logprobs(prompt_ids, top_k=top_k) if entry is not None]
    except BackendError as exc:
        return Capability("max_logprobs", False, Status(gettext_noop("top-%(k)s refused: %(error)s"), k=top_k,
                                                        error=str(exc)), fix)
    got = min([len(step.top), *(len(entry) for entry in scored)])
    if got < top_k:
        return Capability("max_logprobs", False, Status(gettext_noop("asked for top-%(k)s, %(got)s came back"),
                                                        k=top_k, got=got), fix)
    return Capability("max_logprobs", True, Status(gettext_noop("top-%(k)s came back, generating and scoring"),
                                                   k=top_k))


def _token_ids(model: str, prompt_ids: list[int]) -> Capability:
    body = {"model": model, "prompt": prompt_ids, "max_tokens": 1, **vllm_wire.sampling_fields(temperature=0.0),
            "logprobs": 1, "return_tokens_as_token_ids": True}
    try:
        logprobs = _server_json("POST", "/v1/completions", body)["choices"][0]["logprobs"]
    except BackendError as exc:
        return Capability("token_ids", False, Status(gettext_noop("refused: %(error)s"), error=str(exc)), UPGRADE)
    keys = [*logprobs["tokens"], *(key for top in logprobs["top_logprobs"] for key in top or {})]
    strays = [key for key in keys if not str(key).startswith(vllm_wire.TOKEN_ID_PREFIX)]
    if strays or not keys:
        return Capability("token_ids", False, Status(gettext_noop("tokens came back as %(tokens)s"),
                                                     tokens=", ".join(map(repr, strays[:3] or keys))), UPGRADE)
    return Capability("token_ids", True, Status(gettext_noop("tokens come back as %(token)s"), token=keys[0]))


def _json(backend, prompt_ids: list[int]) -> Capability:
    fix = Status(gettext_noop("Start vLLM with the structured outputs the platform expects (%(flag)s)."),
                 flag='--structured-outputs-config \'{"backend": "xgrammar", "disable_any_whitespace": true}\'')
    try:
        [answer] = backend.generate([prompt_ids], max_tokens=24, temperature=0.0, seed=0, json_schema=SCHEMA)
    except BackendError as exc:
        return Capability("json", False, Status(gettext_noop("refused: %(error)s"), error=str(exc)), fix)
    try:
        valid = json.loads(answer.text).get("answer") in CHOICES
    except (ValueError, AttributeError):
        valid = False
    if not valid:
        return Capability("json", False, Status(gettext_noop("the answer does not fit the schema (%(finish)s): "
                                                             "%(text)s"), finish=answer.finish_reason,
                                                text=repr(answer.text[:80])), fix)
    return Capability("json", True, Status(gettext_noop("answered %(text)s"), text=answer.text))


def _choice(backend, prompt_ids: list[int]) -> Capability:
    try:
        [answer] = backend.generate([prompt_ids], max_tokens=8, temperature=0.0, seed=0, choice=CHOICES)
    except BackendError as exc:
        return Capability("choice", False, Status(gettext_noop("refused: %(error)s"), error=str(exc)), UPGRADE)
    if answer.text not in CHOICES:
        return Capability("choice", False, Status(gettext_noop("answered %(text)s, not one of %(choices)s"),
                                                  text=repr(answer.text[:80]), choices=", ".join(CHOICES)), UPGRADE)
    return Capability("choice", True, Status(gettext_noop("answered %(text)s, one of %(choices)s"),
                                             text=answer.text, choices=", ".join(CHOICES)))


def _sampling() -> Capability:
    """vLLM fills every sampling field a request leaves out from the served model's generation_config.json (with its
    default `--generation-config auto`), and no endpoint tells which: its start-up log names them ("Default vLLM
    sampling parameters have been overridden by ..."), and /server_info, served only with VLLM_SERVER_DEV_MODE=1,
    shows the flag. What can be known: whether the client sends every field, so that none is the server's."""
    source = _generation_config()
    missing = [name for name in SAMPLING_FIELDS if name not in _fields_the_client_sends()]
    fields = ", ".join(missing or SAMPLING_FIELDS)
    if not missing:
        return Capability("sampling", True, Status(
            gettext_noop("the platform sends every sampling field (%(fields)s), so the server's defaults (%(source)s) "
                         "cannot change a rollout"), fields=fields, source=source) if source else Status(
            gettext_noop("the platform sends every sampling field (%(fields)s), so the server's defaults cannot "
                         "change a rollout (vLLM shows them only in its start-up log)"), fields=fields))
    if source == "--generation-config vllm":
        return Capability("sampling", True, Status(gettext_noop("the server adds no defaults of the model's "
                                                                "(%(source)s)"), source=source))
    fix = Status(gettext_noop("Start vLLM with %(flag)s."), flag="--generation-config vllm")
    if source:
        return Capability("sampling", False, Status(gettext_noop("requests leave out %(fields)s, which the server "
                                                                 "fills from its defaults (%(source)s)"),
                                                    fields=fields, source=source), fix)
    return Capability("sampling", None, Status(
        gettext_noop("requests leave out %(fields)s, which the server fills from the model's %(file)s unless it runs "
                     "with %(flag)s (vLLM shows which only in its start-up log)"),
        fields=fields, file="generation_config.json", flag="--generation-config vllm"), fix)


def _fields_the_client_sends() -> set[str]:
    # Every /v1/completions body of the client carries these (vllm.py; the conformance tests check each body).
    return set(vllm_wire.sampling_fields(temperature=0.0))


def _generation_config() -> str | None:
    """The server's --generation-config as /server_info tells it (VLLM_SERVER_DEV_MODE=1 only), else None."""
    try:
        config = _server_json("GET", "/server_info?config_format=json")["vllm_config"]["model_config"]
    except (BackendError, LookupError, TypeError):
        return None
    overrides = config.get("override_generation_config") or {}
    flag = f"--generation-config {config.get('generation_config')}"
    return f"{flag} --override-generation-config {json.dumps(overrides)}" if overrides else flag


def _local_sampling() -> Capability:
    return Capability("sampling", True, Status(gettext_noop("the embedded model samples with the request's "
                                                            "temperature alone: it has no defaults of its own")))


def _server_json(method: str, path: str, payload: dict | None = None):
    """One request to the server the settings name, as the platform's client sends it (its key, its timeout); any
    failure is a BackendError with the server's words."""
    server = httpx.URL(settings.VLLM_BASE_URL)
    where = f"{method} {str(server.copy_with(username=None, password=None)).rstrip('/')}{path}"
    headers = {"Authorization": f"Bearer {settings.VLLM_API_KEY}"} if settings.VLLM_API_KEY else {}
    try:
        response = httpx.request(method, str(server).rstrip("/") + path, json=payload, headers=headers,
                                 timeout=httpx.Timeout(settings.VLLM_TIMEOUT_SECONDS, connect=5.0))
    except httpx.HTTPError as exc:
        raise BackendError(f"{where}: {type(exc).__name__}: {exc}") from exc
    if response.is_error:
        raise BackendError(f"{where}: HTTP {response.status_code}: {vllm_wire.error_message(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise BackendError(f"{where}: not JSON: {exc}") from exc
