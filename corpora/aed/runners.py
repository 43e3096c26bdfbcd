"""Replay runners: run one arm of one replay pair from a trace's checkpoint (the steps before the
error step) and report a checkable outcome.

Arm "C" executes the corrected action at the error step. Arm "R", the retry, is one of two designs,
chosen per replay: `resample` lets the policy sample the step again; `original` executes the trace's
original (erroneous) action again from the same checkpoint. In every arm the policy then continues.
Pair i uses the same seed in both arms. Arm "E" (a recovery replay, AREX-style) executes the erroneous
step and its real observation, then lets the policy continue with the failure in its context, the
diagnosis shown after the observation when `options["hint"]` holds it.

Each step the builtin runner takes records the environment's `score` after it; a policy step after the
error step is `progress` when it passes, or raises the score over the best so far (the decisions a
recovery trains on; never the error itself).

- `builtin`: the environments of `ENVIRONMENTS`, run in process: calc-v1 (`calc_env.py`, stateless
  arithmetic) and kv-v1 (`kv_env.py`, a key-value store, whose state an erroneous step changes), with
  the platform's model as the policy. Each policy step samples with seed `seed * 1000 + step index`, so
  both arms of a pair draw the same seed at the same step. An arm is an episode (`BuiltinRunner.episode`) that
  asks for its policy steps one at a time; `play` runs many side by side, sending each round's policy steps to
  the backend as one batch (`backend.rollouts`), and the replay job plays all its runs that way.
- `webhook`: environments outside the platform. POSTs JSON `{trace_id, task_id, environment,
  harness, policy_model, prefix_steps, error_step, arm, retry, corrected_action, original_action, seed,
  options}` to
  `options["url"]` (`options["headers"]` are sent as HTTP headers; url, headers and timeout are not
  echoed in the body) and expects `{passed: bool, score?: number | null, steps?: [object]}`. `webhook_call`
  checks the options (when the replay is scheduled, and again before the calls: a row may predate the check).

Errors: `RunnerError` (bad payload or configuration) is final; `RunnerUnavailable` (timeout,
connection error, 5xx) is a `Transient` error, which the job machinery retries with backoff.
"""

import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.utils.translation import gettext_noop

from dataplatform.errors import Transient
from dataplatform.inference import BackendError, BackendUnavailable, backend_for
from dataplatform.inference.sampling import sampled_texts
from dataplatform.outbound import UrlNotAllowed, allowed_url
from dataplatform.status import Status, WordedError

from . import calc_env, kv_env
from .calc_env import action_line

RETRY_DESIGNS = ("resample", "original")  # what arm R does at the error step
ARMS = ("C", "R", "E")  # corrected, retry, error kept (recovery in context)


@dataclass(frozen=True)
class Environment:
    """A builtin environment: its task from a trace, an episode of it, and the chat its policy is shown."""

    task: Callable  # (trace) -> task dict; raises `task_error`
    episode: Callable  # (task, max_steps) -> an object with step(action) -> (observation, done, passed) and done
    messages: Callable  # (task, [{action, observation, hint?}], max_steps) -> chat messages
    score: Callable  # (episode, passed) -> how far the episode is, in [0, 1]
    task_error: type[Exception]
    max_steps: int


ENVIRONMENTS = {
    calc_env.ENVIRONMENT: Environment(
        task=calc_env.task_for_trace, episode=lambda task, n: calc_env.CalcEnv(task, max_steps=n),
        messages=lambda task, steps, n: calc_env.calc_messages(task, steps, max_steps=n),
        score=lambda episode, passed: 1.0 if passed else 0.0,  # one answer: no partial credit
        task_error=calc_env.CalcTaskError, max_steps=calc_env.DEFAULT_MAX_STEPS),
    kv_env.ENVIRONMENT: Environment(
        task=kv_env.task_for_trace, episode=lambda task, n: kv_env.KvEnv(task, max_steps=n),
        messages=lambda task, steps, n: kv_env.kv_messages(task, steps, max_steps=n),
        score=lambda episode, passed: episode.score(),
        task_error=kv_env.KvTaskError, max_steps=kv_env.DEFAULT_MAX_STEPS),
}


def original_action(trace, error_step: int) -> str:
    """The trace's own action at the error step (its `action`, else its text)."""
    step = trace.steps[error_step]
    return step.get("action") or step.get("content") or ""


@dataclass
class RunResult:
    passed: bool
    score: float | None
    steps: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class PolicyStep:
    """What an episode asks of the policy: the chat it is shown and the seed of this step."""

    messages: list[dict]
    seed: int


class RunnerError(WordedError):
    """A bad payload or configuration; retrying will not help."""


class RunnerUnavailable(WordedError, Transient):
    """The runner could not be reached or failed on its side (timeout, connection error, 5xx)."""


def _ended_early(error_step: int) -> RunnerError:
    return RunnerError(Status(gettext_noop("the episode ended before the error step %(step)s"), step=error_step))


class BuiltinRunner:
    """The builtin environments in process; the policy is `backend_for(project, model=options["model"])`, the
    project's being the trace's (None for a trace saved in no project)."""

    def __init__(self, project=None):
        self.project = project

    def run(self, *, trace, error_step: int, arm: str, corrected_action: str | None, seed: int,
            options: dict, retry: str = "resample") -> RunResult:
        """One arm alone: its episode played by itself."""
        episode = self.episode(trace=trace, error_step=error_step, arm=arm, corrected_action=corrected_action,
                               seed=seed, options=options, retry=retry)
        [(_, result)] = self.play([episode], options)
        return result

    def play(self, episodes: list[Generator], options: dict) -> Iterator[tuple[int, RunResult]]:
        """Episodes side by side, yielding (index into `episodes`, result) as each ends: each round, the policy
        steps of every episode still running go to the backend as one batch."""
        asks = {n: _advance(episode) for n, episode in enumerate(episodes)}
        backend = None
        while asks:
            for n in [n for n, ask in asks.items() if isinstance(ask, RunResult)]:
                yield n, asks.pop(n)
            if asks:
                backend = backend or self._backend(options.get("model", ""))
                texts = self._policy(backend, list(asks.values()), options)
                asks = {n: _advance(episodes[n], text) for n, text in zip(asks, texts, strict=True)}

    def episode(self, *, trace, error_step: int, arm: str, corrected_action: str | None, seed: int,
                options: dict, retry: str = "resample") -> Generator[PolicyStep, str, RunResult]:
        """One arm, step by step: yields the PolicyStep it needs, is sent the policy's text, returns the result."""
        environment = ENVIRONMENTS.get(trace.environment)
        if environment is None:
            raise RunnerError(Status(gettext_noop("the builtin runner runs %(environments)s, not %(environment)s"),
                                     environments=", ".join(ENVIRONMENTS), environment=repr(trace.environment)))
        max_steps = int(options.get("max_steps", environment.max_steps))
        try:
            task = environment.task(trace)
            env = environment.episode(task, max_steps)
        except environment.task_error as exc:
            raise RunnerError(str(exc)) from exc
        history, result_steps = [], []
        for step in trace.steps[:error_step]:
            if step.get("role", "assistant") != "assistant" or not step.get("action"):
                continue  # user/system messages carry no action
            if env.done:
                raise _ended_early(error_step)
            observation, _, _ = env.step(step["action"])
            history.append({"action": step["action"], "observation": observation})
            if observation != step.get("observation"):
                result_steps.append({**step, "observation": observation, "stored_observation": step.get("observation"),
                                     "origin": "prefix", "replayed": True})
        if env.done:
            raise _ended_early(error_step)

        index, passed = error_step, False
        best = environment.score(env, None)
        while not env.done:
            if arm == "C" and index == error_step:
                content, origin = corrected_action, "corrected"
            elif index == error_step and (arm == "E" or (arm == "R" and retry == "original")):
                content, origin = original_action(trace, error_step), "original"
            else:
                content = yield PolicyStep(environment.messages(task, history, max_steps), seed * 1000 + index)
                origin = "policy"
            action = action_line(content)
            observation, _, outcome = env.step(action)
            score = environment.score(env, outcome)
            history.append({"action": action, "observation": observation})
            if arm == "E" and index == error_step and options.get("hint"):
                history[-1]["hint"] = str(options["hint"])
            step = {"index": index, "role": "assistant", "content": content, "action": action,
                    "observation": observation, "origin": origin, "score": score}
            if origin == "policy":
                step["progress"] = bool(outcome) or score > best
            result_steps.append(step)
            best, passed, index = max(best, score), bool(outcome), index + 1
        return RunResult(passed=passed, score=1.0 if passed else 0.0, steps=result_steps)

    def _backend(self, model: str):
        try:
            return backend_for(self.project, model=model)
        except BackendUnavailable:
            raise
        except BackendError as exc:
            raise RunnerError(str(exc)) from exc

    @staticmethod
    def _policy(backend, asks: list[PolicyStep], options: dict) -> list[str]:
        """The policy's text for every ask, in order, from one batched rollout (each row with its step's seed;
        a stopped answer without its end token)."""
        try:
            return sampled_texts(backend, [backend.chat_prompt_ids(ask.messages) for ask in asks],
                                 seeds=[ask.seed for ask in asks], max_tokens=int(options.get("max_tokens", 24)),
                                 temperature=float(options.get("temperature", 0.7)))
        except BackendUnavailable:
            raise
        except BackendError as exc:
            raise RunnerError(Status(gettext_noop("the policy model failed: %(problem)s"), problem=str(exc))) from exc


def _advance(episode: Generator, text: str | None = None) -> PolicyStep | RunResult:
    """The episode's next policy step once it is sent `text` (None to start it), or its result once it ends."""
    try:
        return episode.send(text)
    except StopIteration as end:
        return end.value


def _safe_url(url: str) -> str:
    """The URL without credentials or query string, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _server_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            if body.get(key):
                return str(body[key])[:500]
    return response.text[:500]


def webhook_url(options: dict) -> str:
    """options["url"], if an admin allowed it (AED_REPLAY_WEBHOOKS): checked when a replay is
    scheduled and again before every call (the list may have changed since)."""
    url = options.get("url")
    if not isinstance(url, str):
        raise RunnerError(Status(gettext_noop('the webhook runner needs options["url"], an http(s) URL')))
    try:
        return allowed_url(url, settings.AED_REPLAY_WEBHOOKS, "AED_REPLAY_WEBHOOKS")
    except UrlNotAllowed as exc:
        raise RunnerError(Status(gettext_noop("the webhook: %(problem)s"), problem=str(exc))) from None


class BadWebhookOption(RunnerError):
    """One webhook option is unusable; `field` names it (`options.timeout`, `options.headers.Host`)."""

    def __init__(self, field: str, message: Status):
        super().__init__(message)
        self.field = field


DEFAULT_TIMEOUT, MIN_TIMEOUT = 30.0, 0.1  # seconds
MAX_HEADER_NAME = 100  # characters
# RFC 9110 section 5.6.2: a field name is a token.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value httpx sends as it is: printable ASCII and tabs, no line break or NUL (which would split the
# request or be refused by h11 as a "transport error", retried as if the runner were down).
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
# Connection-level and routing headers: the HTTP client sets them, and a curator's Host would reach another
# virtual host behind the allowed URL.
HOP_BY_HOP = frozenset({"host", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                        "content-length"})


@dataclass(frozen=True)
class WebhookCall:
    url: str
    headers: dict[str, str]
    timeout: float


def webhook_call(options: dict) -> WebhookCall:
    """The url, headers and timeout of `options`, checked: BadWebhookOption (or RunnerError for the url) when
    one cannot be used. Header values come back without surrounding blanks."""
    url = webhook_url(options)
    return WebhookCall(url=url, headers=_webhook_headers(options.get("headers")),
                       timeout=_webhook_timeout(options.get("timeout", DEFAULT_TIMEOUT)))


def _webhook_timeout(value) -> float:
    most = getattr(settings, "AED_REPLAY_WEBHOOK_MAX_TIMEOUT_SECONDS", 300)
    # Compared before any float(): 10**400 or "abc" would raise; NaN and infinities fail the comparison.
    if isinstance(value, bool) or not isinstance(value, int | float) or not MIN_TIMEOUT <= value <= most:
        raise BadWebhookOption("options.timeout", Status(
            gettext_noop("timeout must be a number of seconds from %(least)s to %(most)s "
                         "(AED_REPLAY_WEBHOOK_MAX_TIMEOUT_SECONDS), not %(value)s"),
            least=f"{MIN_TIMEOUT:g}", most=f"{most:g}", value=repr(value)[:50]))
    return float(value)


def _webhook_headers(headers) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise BadWebhookOption("options.headers", Status(gettext_noop(
            "headers must be a JSON object of header names to string values")))
    most, longest = (getattr(settings, "AED_REPLAY_WEBHOOK_MAX_HEADERS", 20),
                     getattr(settings, "AED_REPLAY_WEBHOOK_MAX_HEADER_CHARS", 8192))
    if len(headers) > most:
        raise BadWebhookOption("options.headers", Status(gettext_noop(
            "at most %(most)s headers (AED_REPLAY_WEBHOOK_MAX_HEADERS), not %(count)s"), most=most, count=len(headers)))
    checked, seen = {}, set()
    for name, value in headers.items():
        if not (isinstance(name, str) and len(name) <= MAX_HEADER_NAME and HEADER_NAME.fullmatch(name)):
            raise BadWebhookOption("options.headers", Status(gettext_noop(
                "%(name)s is not a header name: at most %(most)s letters, digits or !#$%%&'*+-.^_`|~"),
                name=repr(name)[:60], most=MAX_HEADER_NAME))
        where = f"options.headers.{name}"
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered.startswith("proxy-"):
            raise BadWebhookOption(where, Status(gettext_noop(
                "%(name)s is a connection or routing header, which only the HTTP client sets"), name=name))
        if lowered in seen:
            raise BadWebhookOption(where, Status(gettext_noop("the %(name)s header is given twice"), name=name))
        if not isinstance(value, str):
            raise BadWebhookOption(where, Status(gettext_noop("the %(name)s header's value must be a string, not "
                                                              "%(value)s"), name=name, value=repr(value)[:50]))
        if len(name) + len(value) > longest or not HEADER_VALUE.fullmatch(value):
            raise BadWebhookOption(where, Status(gettext_noop(
                "the %(name)s header (name and value) must be printable ASCII text of at most %(most)s characters "
                "(AED_REPLAY_WEBHOOK_MAX_HEADER_CHARS), without line breaks or control characters"),
                name=name, most=longest))
        seen.add(lowered)
        checked[name] = value.strip()
    return checked


class WebhookRunner:
    LOCAL_OPTIONS = ("url", "headers", "timeout")

    def run(self, *, trace, error_step: int, arm: str, corrected_action: str | None, seed: int,
            options: dict, retry: str = "resample") -> RunResult:
        call = webhook_call(options)  # a row stored before the check: fails the job once, with the reason
        url, timeout = call.url, call.timeout
        safe = _safe_url(url)
        payload = {"trace_id": trace.trace_id, "task_id": trace.task_id, "environment": trace.environment,
                   "harness": trace.harness, "policy_model": trace.policy_model,
                   "prefix_steps": list(trace.steps[:error_step]), "error_step": error_step, "arm": arm,
                   "retry": retry, "corrected_action": corrected_action,
                   "original_action": original_action(trace, error_step), "seed": seed,
                   "options": {k: v for k, v in options.items() if k not in self.LOCAL_OPTIONS}}
        try:
            response = httpx.post(url, json=payload, headers=call.headers, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise RunnerUnavailable(Status(gettext_noop("webhook %(url)s timed out after %(seconds)s s"),
                                           url=safe, seconds=f"{timeout:g}")) from exc
        except httpx.TransportError as exc:
            raise RunnerUnavailable(Status(gettext_noop("webhook %(url)s unreachable: %(problem)s"), url=safe,
                                           problem=f"{type(exc).__name__}: {exc}")) from exc
        if response.status_code >= 500:
            raise RunnerUnavailable(Status(gettext_noop("webhook %(url)s failed with HTTP %(status)s: %(answer)s"),
                                           url=safe, status=str(response.status_code),
                                           answer=_server_message(response)))
        if response.status_code >= 300:
            raise RunnerError(Status(gettext_noop("webhook %(url)s refused the run (HTTP %(status)s): %(answer)s"),
                                     url=safe, status=str(response.status_code), answer=_server_message(response)))
        return self._result(response)

    @staticmethod
    def _result(response: httpx.Response) -> RunResult:
        def unexpected(why: str, **values) -> RunnerError:
            return RunnerError(Status(gettext_noop("webhook answered an unexpected payload: %(why)s"),
                                      why=Status(why, **values)))

        try:
            body = response.json()
        except ValueError:
            raise unexpected(gettext_noop("not JSON: %(answer)s"), answer=repr(response.text[:200])) from None
        if not isinstance(body, dict):
            raise unexpected(gettext_noop("not a JSON object"))
        if not isinstance(body.get("passed"), bool):
            raise unexpected(gettext_noop("passed must be true or false, got %(value)s"), value=repr(body.get("passed")))
        score = body.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise unexpected(gettext_noop("score must be a number or null, got %(value)s"), value=repr(score))
        steps = body.get("steps", [])
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise unexpected(gettext_noop("steps must be a list of objects"))
        return RunResult(passed=body["passed"], score=None if score is None else float(score), steps=steps)


RUNNERS = {"builtin": BuiltinRunner, "webhook": WebhookRunner}


def run_arm(*, runner: str, trace, error_step: int, arm: str, corrected_action: str | None, seed: int,
            options: dict | None = None, retry: str = "resample") -> RunResult:
    """Run one arm of one pair with the named runner ("builtin" or "webhook"); `retry`: arm R's design."""
    [(_, result)] = run_arms(runner=runner, trace=trace, error_step=error_step, runs=[(arm, seed)],
                             corrected_action=corrected_action, options=options, retry=retry)
    return result


def run_arms(*, runner: str, trace, error_step: int, runs: list[tuple[str, int]], corrected_action: str | None,
             options: dict | None = None, retry: str = "resample") -> Iterator[tuple[int, RunResult]]:
    """Run the (arm, seed) `runs` of one trace, yielding (index into `runs`, result) as each ends: the builtin
    runner plays them side by side, a batch of policy steps a round; the webhook runner, one after another."""
    if runner not in RUNNERS:
        raise RunnerError(Status(gettext_noop("unknown runner %(runner)s; choose one of %(runners)s"),
                                 runner=repr(runner), runners=", ".join(RUNNERS)))
    if bad := [arm for arm, _ in runs if arm not in ARMS]:
        raise RunnerError(Status(gettext_noop("arm must be one of %(arms)s, not %(arm)s"), arms=", ".join(ARMS),
                                 arm=repr(bad[0])))
    if retry not in RETRY_DESIGNS:
        raise RunnerError(Status(gettext_noop("retry must be one of %(designs)s, not %(retry)s"),
                                 designs=", ".join(RETRY_DESIGNS), retry=repr(retry)))
    if any(arm == "C" for arm, _ in runs) and not (isinstance(corrected_action, str) and corrected_action.strip()):
        raise RunnerError(Status(gettext_noop("arm C needs a corrected action")))
    if not isinstance(error_step, int) or not 0 <= error_step < len(trace.steps):
        raise RunnerError(Status(gettext_noop("error_step %(step)s is not a step of this trace (0..%(last)s)"),
                                 step=repr(error_step), last=len(trace.steps) - 1))
    shared = {"trace": trace, "error_step": error_step, "corrected_action": corrected_action,
              "options": options or {}, "retry": retry}
    if runner == "builtin":
        builtin = BuiltinRunner(trace.project if trace.project_id else None)
        return builtin.play([builtin.episode(arm=arm, seed=seed, **shared) for arm, seed in runs], options or {})
    return ((n, WebhookRunner().run(arm=arm, seed=seed, **shared)) for n, (arm, seed) in enumerate(runs))
