"""A prompt's first ok answer (TeacherAnswer.first_of_prompt, atd.dpo's pair for the prompt) stays right whatever
order the answers arrive in: ties and invalid answers first, several runs interleaved, a resumed job repeating a
prompt, two runs recording the same prompt at the same time; and the migration's back-fill finds it too."""

import importlib
import random
import threading
import time

import pytest
from django.apps import apps
from django.db import connection

from corpora.atd import services
from corpora.atd.models import TeacherAnswer, TeacherRun

from ...doubles import JudgeDouble, RecordingProgress
from .prompts import make_prompts

ANSWERS = {"ok": {"bit": "A", "status": "ok"}, "tie": {"bit": "", "status": "tie"},
           "invalid": {"bit": "", "status": "invalid", "raw": "maybe"}}


@pytest.fixture
def three_runs(project, members, use_backend):
    """Four near-tie prompts in three selections of one scoring run, each with a teacher run that has not asked."""
    prompts = make_prompts(project, [50, 51, 49, 48])
    curator = members["curator"]
    scoring = services.start_scoring(project=project, batch_size=10, user=curator, publish=False)
    use_backend(JudgeDouble())
    services.score_prompts(run=scoring, progress=RecordingProgress())
    runs = [services.start_teacher(selection=services.freeze_selection(run=scoring, name=name, epsilon=0.05,
                                                                       user=curator),
                                   mode="logprobs", user=curator, publish=False) for name in ("a", "b", "c")]
    return prompts, runs


def expected_firsts() -> set[int]:
    """The lowest ok answer id of each prompt, from all the answers there are."""
    firsts = {}
    for answer_id, prompt_id in TeacherAnswer.objects.filter(status="ok").values_list("id", "prompt_id"):
        firsts[prompt_id] = min(answer_id, firsts.get(prompt_id, answer_id))
    return set(firsts.values())


def flagged() -> set[int]:
    return set(TeacherAnswer.objects.filter(first_of_prompt=True).values_list("id", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_first_ok_answer_is_flagged_whatever_order_the_answers_arrive_in(three_runs, seed):
    prompts, runs = three_runs
    shuffle = random.Random(seed)
    # Every run answers every prompt, ties and invalid answers among them, in a shuffled order, in batches of one
    # or two prompts of one run; and each run then repeats one of its prompts with another status (a resumed job:
    # the conflict is ignored, the flag unchanged).
    events = [(run, prompt, shuffle.choice(list(ANSWERS))) for run in runs for prompt in prompts]
    shuffle.shuffle(events)
    events += [(run, shuffle.choice(prompts), "ok") for run in runs]
    ever_flagged = set()
    while events:
        run = events[0][0]
        batch = [event for event in events[:2] if event[0] == run]
        events = events[len(batch):]
        services.record_answers(run, [prompt for _, prompt, _ in batch], [ANSWERS[kind] for *_, kind in batch])
        assert flagged() == expected_firsts()
        ever_flagged |= flagged()
        assert ever_flagged == flagged()  # a first answer, once flagged, stays the first
    assert TeacherAnswer.objects.count() == 12 and flagged()


@pytest.mark.django_db
def test_the_teacher_job_flags_through_the_same_service_and_the_migration_back_fills_it(three_runs, use_backend):
    prompts, runs = three_runs
    use_backend(JudgeDouble())
    for run in runs[1::-1]:  # the second selection's teacher first
        services.ask_teacher(run=run, progress=RecordingProgress())
    assert flagged() and flagged() == expected_firsts()
    assert set(TeacherAnswer.objects.filter(first_of_prompt=True).values_list("run", flat=True)) == {runs[1].pk}
    run = TeacherRun.objects.get(pk=runs[1].pk)
    assert run.recipe_json == services.teacher_recipe_json(run) and "judge-double" in run.recipe_json
    firsts, recipes = flagged(), dict(TeacherRun.objects.values_list("id", "recipe_json"))
    TeacherAnswer.objects.update(first_of_prompt=False)
    TeacherRun.objects.update(recipe_json="{}")
    importlib.import_module("corpora.migrations.0010_atd_first_answer_recipe_json").fill(apps, None)
    assert flagged() == firsts and dict(TeacherRun.objects.values_list("id", "recipe_json")) == recipes


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has one writer at a time: no two at once")
def test_two_runs_recording_one_prompt_at_once_flag_one_first(three_runs, monkeypatch):
    """Run a inserts its answer and, before it commits, run b records the same prompt: b must wait for a's lock on
    the prompt (seen in pg_stat_activity), and then only a's answer, the lower id, is the first."""
    prompts, runs = three_runs
    inserted, go_on, errors, backend_pid = threading.Event(), threading.Event(), [], []
    create = TeacherAnswer.objects.bulk_create

    def create_then_wait(objects, **options):
        created = create(objects, **options)
        if threading.current_thread().name == "a":  # a's transaction is open, its answer not yet committed
            inserted.set()
            go_on.wait(timeout=30)
        return created

    monkeypatch.setattr(TeacherAnswer.objects, "bulk_create", create_then_wait)

    def record(run):
        try:
            if threading.current_thread().name == "b":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    backend_pid.append(cursor.fetchone()[0])
                inserted.wait(timeout=30)
            services.record_answers(run, [prompts[0]], [ANSWERS["ok"]])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=record, args=(run,), name=name) for name, run in zip("ab", runs, strict=False)]
    for thread in threads:
        thread.start()
    b_waited = _waits_for_a_lock(threads[1], backend_pid, inserted)
    go_on.set()
    for thread in threads:
        thread.join()
    assert errors == []
    assert b_waited, "run b recorded the prompt while run a's answer was not committed"
    first = TeacherAnswer.objects.get(run=runs[0], prompt=prompts[0])
    assert flagged() == {first.pk} == expected_firsts()
    assert TeacherAnswer.objects.get(run=runs[1], prompt=prompts[0]).pk > first.pk


def _waits_for_a_lock(thread: threading.Thread, backend_pid: list, inserted: threading.Event) -> bool:
    """Whether the thread's connection comes to wait on a lock (polled until it does or the thread ends)."""
    inserted.wait(timeout=30)
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        if backend_pid:
            with connection.cursor() as cursor:
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [backend_pid[0]])
                row = cursor.fetchone()
            if row and row[0] == "Lock":
                return True
        time.sleep(0.005)
    return False
