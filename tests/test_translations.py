"""The interface in both languages: every page of the platform, rendered in English and in Simplified
Chinese, holds no interface text the other language's page would have; the catalogs are complete.

The pages are the role matrix's (tests/role_matrix.py): every URL the resolver yields that a browser
GETs, filled with the matrix world's objects, as the first role that may open it. Text that is not the
interface's (model output, user and project names, ids) is marked translate="no" by the templates and
left out (tests/untranslated.py).
"""

import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from . import role_matrix as matrix
from .backend_guard import tests_own_transaction
from .untranslated import chinese_in, untranslated

pytestmark = pytest.mark.django_db

world = matrix.world  # the matrix's objects, built once for this module
quiet_platform = matrix.quiet_platform


@pytest.fixture(autouse=True)
def shipped_export_kinds_only(monkeypatch):
    """The export form lists every registered kind; the test suite's own kinds (tests/exports/kinds.py,
    registered once a test imports them) are not the interface's."""
    from dataplatform.exports import views
    from dataplatform.exports.registry import all_kinds

    monkeypatch.setattr(views, "all_kinds", lambda: [kind for kind in all_kinds() if not kind.name.startswith("test.")])

# Who opens each page: the first of these the page's rule allows with alpha's own objects.
OPENERS = ["admin", "curator", "annotator", "trainer", "superuser", "anonymous"]
# Pages that are not pages: the scripts' catalog, and URLs that only redirect on GET.
NOT_PAGES = {"javascript-catalog", "set-language", "logout", "admin:index"}
PAGES = [case for case in matrix.CASES if case.method == "GET" and not case.endpoint.is_api
         and case.endpoint.name not in NOT_PAGES]
LANGUAGES = ["en", "zh-hans"]


def _scope(case) -> str:
    return "own" if case.scopes != ["-"] else "-"


def _opener(case) -> str:
    allowed = [role for role in OPENERS if matrix.expectation(case, role, _scope(case)) == matrix.ALLOWED]
    assert allowed, f"nobody may open {case.id}"
    return allowed[0]


def _get(world, role: str, url: str, language: str):
    """GET as `role`, the browser asking for `language` (nothing remembered), in a rolled-back savepoint."""
    with tests_own_transaction():
        response = world.page_client(role).get(url, HTTP_ACCEPT_LANGUAGE=language)
        transaction.set_rollback(True)
    return response


def test_every_page_is_listed():
    """A new page is rendered here as soon as it has a URL (the matrix's list): at least the known ones."""
    names = {case.endpoint.name for case in PAGES}
    assert {"project-list", "annotate-queue", "labeler-overview", "aed-overview", "atd-overview",
            "export-list", "login"} <= names


@pytest.mark.parametrize("case", PAGES, ids=[case.endpoint.name for case in PAGES])
def test_page_in_both_languages(case, world, quiet_platform, django_capture_on_commit_callbacks):
    world.ensure_export_files()
    with django_capture_on_commit_callbacks(execute=False):
        role = _opener(case)
        url = matrix.url_for(world, case, role, _scope(case))
        responses = {language: _get(world, role, url, language) for language in LANGUAGES}
    for language, response in responses.items():
        if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
            pytest.skip(f"{url} is not an HTML page ({response.get('Content-Type')})")
        assert response.status_code == 200, f"GET {url} as {role} in {language}: {response.status_code}"
        html = response.content.decode()
        if language == "en":
            leaked = chinese_in(html)
            assert not leaked, f"GET {url} as {role} in English shows Chinese: {leaked[:10]}"
        else:
            left = untranslated(html)
            assert not left, f"GET {url} as {role} in Chinese leaves English: {left[:40]}"


def _catalogs() -> list[Path]:
    root = Path(settings.BASE_DIR)
    return sorted(path for pattern in ("locale/*/LC_MESSAGES/*.po", "*/locale/*/LC_MESSAGES/*.po")
                  for path in root.glob(pattern))


def test_catalogs_are_complete_and_compiled():
    """Every entry of every catalog is translated (none fuzzy), the format strings match their source
    (msgfmt --check), and the compiled .mo beside it is current (`make` compiles them)."""
    catalogs = _catalogs()
    assert catalogs, "no translation catalogs found (bin/messages makes them)"
    for po in catalogs:
        checked = subprocess.run(["msgfmt", "--check", "--statistics", "-o", "/dev/null", str(po)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, f"{po}: {checked.stderr}"
        assert "fuzzy" not in checked.stderr and "untranslated" not in checked.stderr, f"{po}: {checked.stderr}"
        mo = po.with_suffix(".mo")
        assert mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime, f"{mo} is missing or stale: run `make`"
