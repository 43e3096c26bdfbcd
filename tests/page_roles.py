"""What the page role tests share: every kind of visitor, and the answers of a curator-only page."""

VISITORS = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
CURATE = {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404}
CURATE_POST = {"admin": 302, "curator": 302, "annotator": 403, "trainer": 403, "outsider": 404}


def logged_in(client, members, who: str):
    """The test client as `who` (a key of the `members` fixture), or as nobody for "anonymous"."""
    if who != "anonymous":
        client.force_login(members[who])
    return client
