"""No password given in a PostgreSQL URL shows in a queue's repr or in the
binding's messages."""

import os

import pytest

import tq
from tq import queue

PASSWORD = "s3cret"
POSTGRES_URL = os.environ.get("TQ_TEST_POSTGRES_URL")


def test_the_redacted_location_drops_the_password_and_keeps_a_path():
    assert queue._redacted(f"postgres://alice:{PASSWORD}@127.0.0.1:1/db") == "postgres://alice@127.0.0.1:1/db"
    assert queue._redacted(f"postgres://alice@h/db?password={PASSWORD}&sslmode=disable") == (
        "postgres://alice@h/db?sslmode=disable"
    )
    assert queue._redacted("/var/lib/app/jobs.db") == "/var/lib/app/jobs.db"


def test_a_url_with_a_nul_byte_is_refused_without_its_password():
    with pytest.raises(tq.InvalidArgumentError) as raised:
        tq.Queue(f"postgres://alice:{PASSWORD}@127.0.0.1:1/db\0x")
    assert PASSWORD not in str(raised.value)


def test_a_refused_server_is_named_without_the_password():
    with pytest.raises(tq.Error) as raised:
        tq.Queue(f"postgres://alice:{PASSWORD}@127.0.0.1:1/db")
    assert PASSWORD not in str(raised.value)
    assert "127.0.0.1:1" in str(raised.value)


@pytest.mark.skipif(
    POSTGRES_URL is None, reason="TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)"
)
def test_postgres_repr_and_closed_errors_hide_the_password():
    scheme, rest = POSTGRES_URL.split("://", 1)
    user, host = rest.split("@", 1)
    url = f"{scheme}://{user.split(':')[0]}:{PASSWORD}@{host}"
    q = tq.Queue(url, queue="secrets")
    try:
        assert PASSWORD not in repr(q)
        assert host in repr(q)
    finally:
        q.close()
    with pytest.raises(tq.ClosedError) as raised:
        q.push({"n": 1})
    assert PASSWORD not in str(raised.value)
    assert host in str(raised.value)
