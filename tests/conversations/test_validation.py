"""The one check of a chat `messages` list, under each importer's options."""

import pytest

from dataplatform.conversations.validation import ANY_PARTS_OR_NULL, STRING, STRING_OR_TEXT_PARTS, check_messages

ROLES = {"system", "user", "assistant", "tool"}


def test_good_messages_have_no_problems_and_their_texts():
    checked = check_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert (checked.problems, checked.texts) == ([], ["hi", "hello"])


@pytest.mark.parametrize("messages", [None, "hello", 5, {"role": "user"}, []])
def test_the_list_itself_must_be_a_non_empty_list(messages):
    checked = check_messages(messages)
    assert checked.problems == [("messages", "must be a non-empty list of {role, content} objects")]
    assert checked.texts == []


def test_every_problem_is_reported_under_the_path_given():
    checked = check_messages(["text", {"role": "", "content": 5}, {"role": "user", "content": "ok"}],
                             path="dialogs.2.messages")
    assert checked.problems == [
        ("dialogs.2.messages[0]", "must be an object with role and content"),
        ("dialogs.2.messages[1].role", "must be a non-empty string"),
        ("dialogs.2.messages[1].content", "must be a string"),
    ]
    assert checked.texts == [None, None, "ok"]  # a message with a problem has no text


@pytest.mark.parametrize("role", [None, "", "   ", 5, ["user"]])
def test_any_role_means_any_non_blank_string(role):
    assert check_messages([{"role": role, "content": "x"}]).problems == [
        ("messages[0].role", "must be a non-empty string")]
    assert check_messages([{"role": "agent", "content": "x"}]).problems == []


@pytest.mark.parametrize("role", ["robot", None, 5, ["user"], {"name": "user"}])
def test_a_closed_set_of_roles(role):
    assert check_messages([{"role": role, "content": "x"}], roles=ROLES).problems == [
        ("messages[0].role", "must be one of assistant, system, tool, user")]
    assert check_messages([{"role": "tool", "content": "x"}], roles=ROLES).problems == []


@pytest.mark.parametrize(("content", "text"), [
    ("plain", "plain"),
    ([{"type": "text", "text": "one "}, {"type": "text", "text": "two"}], "one two"),
    ([{"type": "image_url", "image_url": {"url": "x"}}], None),
    ([{"text": "no type"}], None),
    ([{"type": "text", "text": 5}], None),
    (None, None),
    (5, None),
])
def test_text_parts_are_read_as_one_text(content, text):
    checked = check_messages([{"role": "user", "content": content}], content=STRING_OR_TEXT_PARTS)
    assert checked.texts == [text]
    assert checked.problems == ([] if text is not None else
                                [("messages[0].content", "must be text (a string or a list of text chunks)")])


@pytest.mark.parametrize(("content", "text"), [
    ("plain", "plain"),
    (None, ""),
    ([{"type": "text", "text": "one"}, {"type": "image_url", "image_url": {"url": "x"}}, {"text": "two"}],
     "one\ntwo"),
    ([], ""),
])
def test_content_parts_of_any_type_or_null(content, text):
    checked = check_messages([{"role": "assistant", "content": content}], content=ANY_PARTS_OR_NULL)
    assert (checked.problems, checked.texts) == ([], [text])


@pytest.mark.parametrize("content", [5, ["not an object"], {"type": "text", "text": "x"}])
def test_content_that_is_neither_text_nor_parts(content):
    assert check_messages([{"role": "user", "content": content}], content=ANY_PARTS_OR_NULL).problems == [
        ("messages[0].content", "must be a string, null, or a list of content-part objects")]


@pytest.mark.parametrize("content", [None, ["part"], [{"type": "text", "text": "x"}], 1.5])
def test_string_content_only(content):
    assert check_messages([{"role": "user", "content": content}], content=STRING).problems == [
        ("messages[0].content", "must be a string")]


def test_an_importers_own_rules_follow_the_shared_ones_message_by_message():
    def no_index(message, where):
        return [(f"{where}.index", "not here")] if "index" in message else []

    checked = check_messages([{"role": "", "content": "a", "index": 0}, {"role": "user", "content": "b", "index": 1},
                              {"role": "user", "content": "c"}], message_rules=no_index)
    assert checked.problems == [("messages[0].role", "must be a non-empty string"), ("messages[0].index", "not here"),
                                ("messages[1].index", "not here")]
    assert checked.texts == [None, None, "c"]
