"""The Redis cache shares one client and connection pool per process (dataplatform/cache.py)."""

import threading

import pytest
import redis
from django.conf import settings
from django.core.cache import caches

from dataplatform.cache import SharedClientCacheClient

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="the cache is Redis only with REDIS_URL (bin/test sets it)")


def _client_seen_from_a_new_thread():
    seen = {}

    def look():
        cache = caches["default"]  # a new thread gets its own cache object, as every ASGI request does
        seen["cache"], seen["client"] = cache, cache._cache.get_client(write=True)

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen["cache"], seen["client"]


def test_cache_objects_of_different_threads_share_one_client_and_pool():
    first_cache, first_client = _client_seen_from_a_new_thread()
    second_cache, second_client = _client_seen_from_a_new_thread()
    assert first_cache is not second_cache
    assert isinstance(first_client, redis.Redis) and first_client is second_client
    assert first_client.connection_pool is second_client.connection_pool
    assert first_client.set("test-cache:shared-client", "1") and second_client.get("test-cache:shared-client") == b"1"
    first_client.delete("test-cache:shared-client")


def test_other_urls_and_options_get_their_own_client_and_pool():
    url = settings.REDIS_URL

    def client(server, **options):
        return SharedClientCacheClient([server], **options).get_client()

    assert client(url, socket_timeout=3) is client(url, socket_timeout=3)
    assert client(url, socket_timeout=3).connection_pool is not client(url, socket_timeout=4).connection_pool
    assert client(url + "0", socket_timeout=3).connection_pool is not client(url, socket_timeout=3).connection_pool


def test_cache_calls_from_many_threads_reuse_redis_connections():
    """Every ASGI request runs in a thread of its own and gets a cache object of its own; with Django's
    own client each of them opened a new Redis connection."""
    server = redis.Redis.from_url(settings.REDIS_URL)

    def use_the_cache():
        caches["default"].get_many(["test-cache:a", "test-cache:b"])  # what the limiter asks on every request

    def in_threads(count: int):
        for _ in range(count):
            thread = threading.Thread(target=use_the_cache)
            thread.start()
            thread.join()

    in_threads(2)  # the pool's first connection
    before = server.info("stats")["total_connections_received"]
    in_threads(20)
    opened = server.info("stats")["total_connections_received"] - before
    assert opened <= 3, f"{opened} new Redis connections for 20 threads"  # other clients may connect meanwhile


def test_incr_counts_an_existing_key_in_one_round_trip_and_refuses_a_missing_one(monkeypatch):
    cache = caches["default"]
    cache.delete("test-cache:count")
    with pytest.raises(ValueError, match="not found"):
        cache.incr("test-cache:count")
    assert cache.get("test-cache:count") is None  # a missing key is not created, as in Django's own
    cache.set("test-cache:count", 5, timeout=60)
    commands = []
    client = cache._cache.get_client(write=True)
    execute = client.execute_command
    monkeypatch.setattr(client, "execute_command", lambda *args, **kw: commands.append(args[0]) or execute(*args, **kw))
    assert cache.incr("test-cache:count") == 6 and cache.incr("test-cache:count", 4) == 10
    assert len(commands) == 2  # one command (one round trip) per incr; Django's sends EXISTS then INCRBY
    monkeypatch.undo()
    assert cache.get("test-cache:count") == 10
    assert 0 < client.ttl(cache.make_and_validate_key("test-cache:count")) <= 60  # the timeout is kept
    cache.delete("test-cache:count")
