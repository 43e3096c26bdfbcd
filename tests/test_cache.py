"""The Redis cache shares one connection pool per process (dataplatform/cache.py)."""

import threading

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import caches
from django.test import AsyncClient

from dataplatform.cache import SharedConnectionPool

from .conftest import api_client_for
from .threads import in_new_thread

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="the cache is Redis only with REDIS_URL (bin/test sets it)")


def _pool_seen_from_a_new_thread():
    seen = {}

    def look():
        cache = caches["default"]  # a new thread gets its own cache object, as every ASGI request does
        seen["cache"], seen["pool"] = cache, cache._cache._get_connection_pool(write=True)

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen["cache"], seen["pool"]


def test_cache_objects_of_different_threads_share_one_pool():
    first_cache, first_pool = _pool_seen_from_a_new_thread()
    second_cache, second_pool = _pool_seen_from_a_new_thread()
    assert first_cache is not second_cache
    assert isinstance(first_pool, SharedConnectionPool) and first_pool is second_pool


def test_cache_objects_of_different_threads_share_one_client():
    clients = []

    def look():
        client = caches["default"]._cache.get_client(write=True)
        assert client.set("test-cache:shared-client", "1") and client.get("test-cache:shared-client") == b"1"
        clients.append(client)

    for _ in range(2):
        thread = threading.Thread(target=look)
        thread.start()
        thread.join()
    assert isinstance(clients[0], redis.Redis) and clients[0] is clients[1]
    caches["default"]._cache.get_client(write=True).delete("test-cache:shared-client")


def test_other_urls_and_options_get_their_own_pool():
    url = settings.REDIS_URL
    assert SharedConnectionPool.from_url(url, socket_timeout=3) is SharedConnectionPool.from_url(url, socket_timeout=3)
    assert SharedConnectionPool.from_url(url, socket_timeout=3) is not SharedConnectionPool.from_url(url, socket_timeout=4)
    assert SharedConnectionPool.from_url(url + "0", socket_timeout=3) is not SharedConnectionPool.from_url(
        url, socket_timeout=3)


@pytest.mark.django_db(transaction=True)
def test_authenticated_asgi_requests_reuse_redis_connections(members, project):
    """Each token request touches the cache (the brute-force limiter, the token-use tally) from a new
    ASGI context; before the shared pool each one opened a new Redis connection."""
    secret = api_client_for(members["annotator"])._credentials["HTTP_AUTHORIZATION"].split()[1]
    server = redis.Redis.from_url(settings.REDIS_URL)

    async def requests(count: int):
        for _ in range(count):
            response = await AsyncClient().get("/api/v1/projects/", headers={"Authorization": f"Token {secret}"})
            assert response.status_code == 200

    in_new_thread(async_to_sync(requests), 2)  # the pool's first connection
    before = server.info("stats")["total_connections_received"]
    in_new_thread(async_to_sync(requests), 20)
    opened = server.info("stats")["total_connections_received"] - before
    assert opened <= 3, f"{opened} new Redis connections for 20 requests"  # other clients may connect meanwhile
