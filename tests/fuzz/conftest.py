"""Schemathesis makes one test item per API operation, named `test_...[GET /api/v1/...]`, but under pytest 9
every item's node id is the function's alone. pytest-xdist (bin/test) keys the tests it hands out by node id,
so it would run one operation and count the fuzz as passed: give each item its operation in its node id."""

from schemathesis.pytest.plugin import SchemathesisFunction


def pytest_collection_modifyitems(items):
    for item in items:
        if isinstance(item, SchemathesisFunction) and item.operation_label and not item.nodeid.endswith("]"):
            item._id = type(item._id).parse(f"{item.nodeid}[{item.operation_label}]")  # pytest's NodeId
