"""What the input-parity tests share (dataplatform/inputs.py): the same input sent to a use case's API and to its
page must be refused alike, on the same field with the same message, or accepted by both."""

import html

from django.contrib.messages import get_messages


def api_refusal(response, status: int = 400) -> dict:
    """The API's refusal: its body, by field (`detail` for one not about a field)."""
    assert response.status_code == status, response.content[:500]
    return response.json()


def page_says(response) -> str:
    """What a page shows of its answer: the messages it redirected with, or its HTML, unescaped."""
    if response.status_code == 302:
        return "\n".join(str(message) for message in get_messages(response.wsgi_request))
    return html.unescape(response.content.decode())


def shown(field: str, message: str) -> str:
    """How a page words one refusal: "field: message", or the message alone when it is about no field."""
    return message if field == "detail" else f"{field}: {message}"


def _at(body: dict, field: str) -> tuple[list, str]:
    """The messages on `field` and the name the page shows them under: a key of the body ("options.max_steps"),
    or a path into it ("params.n": a job kind's params, "filters.created_after") whose last name the page shows."""
    if field in body:
        return (body[field] if field != "detail" else [body["detail"]]), field
    outer, _, inner = field.partition(".")
    assert outer in body and inner, body
    return _at(body[outer], inner)


def assert_refused_alike(api, page, field: str, message: str | None, *, status: int = 400,
                         page_status: int | None = None):
    """The API answered `status` with `message` on `field` (None: whatever one message it gave), and the page said
    the same (with `page_status`: its own status, when it answers in place rather than redirecting)."""
    body = api_refusal(api, status)
    said, name = _at(body, field)
    assert len(said) == 1 and message in (None, said[0]), body
    assert page.status_code == (page_status or 302), page.content[:500]
    assert shown(name, said[0]) in page_says(page), page_says(page)[:2000]


def api_errors(response) -> dict:
    """The API's refusal by field (a job's parameters come under `params`)."""
    assert response.status_code == 400, response.content
    body = response.json()
    return body.get("params", body)


def page_messages(response) -> list[str]:
    """The messages a page redirected with."""
    assert response.status_code == 302, response.content
    return [str(message) for message in get_messages(response.wsgi_request)]


def assert_same_refusal(api, page, field: str, message: str | None = None):
    """The API refused `field` with one message (`message`, or None: whatever it said), and the page said the same
    as "field: message"."""
    [said] = api_errors(api)[field]
    assert message is None or said == message
    assert f"{field}: {said}" in page_messages(page)
