"""Export options (dataplatform/exports/options.py) that fail closed: an export pinned to an earlier data version
gives the rows the export made at that version gave, after new data arrived, for a kind whose data are
append-only; other kinds refuse to be pinned, saying why. (Unknown options and filters: test_input_parity.py.)"""

import io

import pytest
from django.core.management import CommandError, call_command

from corpora.atd import services as atd
from corpora.atd.models import AtdPrompt, Score
from dataplatform.exports.models import Export
from dataplatform.exports.registry import all_kinds
from tests.conftest import api_client_for

from ..corpora.atd.prompts import make_prompts
from ..doubles import JudgeDouble, RecordingProgress
from ..exporting import export_rows

pytestmark = pytest.mark.django_db


def score_all(project, user, use_backend):
    run = atd.start_scoring(project=project, batch_size=10, user=user, publish=False)
    use_backend(JudgeDouble())
    atd.score_prompts(run=run, progress=RecordingProgress())


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_a_pinned_export_gives_the_earlier_exports_rows_after_new_data(project, members, use_backend,
                                                                       export_storage_in_tmp,
                                                                       django_capture_on_commit_callbacks):
    curator = members["curator"]
    make_prompts(project, [50, 51, 60])
    score_all(project, curator, use_backend)
    earlier, earlier_rows = export_rows(project, curator, export_storage_in_tmp, "atd.scored")
    # New data: another prompt, and a second scoring run over all four (new scores of the same prompts too).
    AtdPrompt.objects.create(project=project, external_id="late", messages=[{"role": "user", "content": "?"}],
                             candidate_a="a70", candidate_b="b30", source_sha256="9" * 64)
    score_all(project, curator, use_backend)

    pinned, pinned_rows = export_rows(project, curator, export_storage_in_tmp, "atd.scored",
                                      data_version=earlier.data_version)
    _, now_rows = export_rows(project, curator, export_storage_in_tmp, "atd.scored")
    assert (len(earlier_rows), len(now_rows)) == (3, 7)
    assert pinned.data_version == earlier.data_version and pinned.manifest["data_version"] == earlier.data_version
    assert sorted(pinned_rows, key=lambda row: row["id"]) == sorted(earlier_rows, key=lambda row: row["id"])
    # Over the API too: the export is pinned from the start, and the list finds exports by their data version.
    client = api_client_for(curator)
    with django_capture_on_commit_callbacks(execute=False):
        created = client.post("/api/v1/projects/alpha/exports/", {"kind": "atd.scored",
                                                                    "data_version": earlier.data_version}, format="json")
    assert created.status_code == 202 and created.json()["data_version"] == earlier.data_version
    listed = client.get(f"/api/v1/projects/alpha/exports/?data_version={earlier.data_version}").json()["results"]
    assert sorted(export["id"] for export in listed) == sorted([earlier.pk, pinned.pk, created.json()["id"]])


def test_every_kind_says_whether_it_can_be_pinned_and_the_others_refuse_with_it(project, members):
    pinnable = {kind.name for kind in all_kinds() if kind.append_only}
    assert {"atd.dpo", "atd.scored", "onpanda.sft", "onpanda.pairs", "onpanda.panda_json",
            "onpanda.token_supervision"} <= pinnable
    assert not pinnable & {"platform.jobs", "swe.labels", "swe.trajectories", "aed.recovery", "aed.pairs"}
    client = api_client_for(members["curator"])
    for kind in all_kinds():
        if kind.append_only:
            continue
        response = client.post("/api/v1/projects/alpha/exports/", {"kind": kind.name, "data_version": "1"},
                               format="json")
        assert response.status_code == 400
        [said] = response.json()["data_version"]
        assert said.startswith(f"{kind.name} cannot be exported at an earlier data version: ") and said.endswith(".")
    assert not Export.objects.exists()


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_the_export_command_pins_and_refuses_alike(project, members, use_backend, tmp_path):
    with pytest.raises(CommandError, match="swe.pooled cannot be exported at an earlier data version"):
        call_command("export", "swe.pooled", "--project", "alpha", "--data-version", "1:1", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="is not a filter of this kind"):
        call_command("export", "atd.scored", "--project", "alpha", "--filter", "rn=1", "--out", str(tmp_path))
    make_prompts(project, [50, 51])
    score_all(project, members["curator"], use_backend)
    first = str(Score.objects.order_by("id").first().pk)  # the data version when only the first score was written
    stdout = io.StringIO()
    call_command("export", "atd.scored", "--project", "alpha", "--data-version", first, "--out", str(tmp_path / "one"),
                 stdout=stdout, stderr=io.StringIO())
    assert ": 1 rows" in stdout.getvalue() and Export.objects.get().data_version == first
