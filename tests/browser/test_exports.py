"""A curator creates an export in the browser, watches it finish, and finds the files and load snippets."""

import re

import pytest
from playwright.sync_api import expect

from dataplatform.jobs.models import Job

from .pages import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_create_an_export_and_watch_it_finish(page, live_server, project, members, start_worker,
                                              export_storage_in_tmp):
    for i in range(12):
        Job.objects.create(project=project, kind="demo.sample_continuations", params={"i": i}, state="succeeded")
    start_worker()
    log_in(page, live_server, "curator")
    page.get_by_role("link", name="Alpha").click()
    page.get_by_role("link", name="Exports →").click()
    page.get_by_label("Record kind").select_option("platform.jobs")
    page.get_by_label("Rows per shard").fill("5")
    page.get_by_label("Validation share").fill("0")
    page.get_by_role("button", name="Create export").click()

    row = page.locator("section[aria-labelledby=export-table] tbody tr").first  # not the filter table above
    expect(row.locator(".state")).to_have_text("Succeeded", timeout=60_000)
    expect(row).to_contain_text("3 shards")
    row.get_by_role("link", name="files & snippets").click()
    expect(page.get_by_role("heading", name=re.compile(r"Export \d+"))).to_be_visible()
    expect(page.locator("[data-snippet=datasets]")).to_contain_text("load_dataset('./export-")  # by its card
    expect(page.locator("[data-snippet=pull]")).to_contain_text("export DATAPLATFORM_TOKEN=")
    expect(page.get_by_role("link", name="train-00002.parquet")).to_be_visible()
    manifest = page.request.get(live_server.url + page.get_by_role("link", name="manifest.json").get_attribute("href"))
    assert manifest.ok and manifest.json()["totals"]["rows"] == 12
    assert page.console_errors == []
