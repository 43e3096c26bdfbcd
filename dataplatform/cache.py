"""One Redis connection pool, and one Redis client, per process for Django's Redis cache.

Django makes a new cache object for every thread and every asyncio task that touches the cache, and
its Redis client keeps its connection pool on that object (Django ticket #35651). Under ASGI every
request runs in a new context, so every request opened a new TCP connection to Redis and left it to
the garbage collector; with redis-py 8, each new connection also looks up the library's version in the
installed packages' metadata. A py-spy recording of the web process under the load bench found about
30% of the samples taken inside requests there.

`SharedConnectionPool` is given to the cache as its `pool_class`: every cache object of the process
gets the same pool for the same URL and options, so connections are reused across requests. redis-py's
pool is thread-safe, and it replaces its connections itself in a forked child (it checks the pid).

`RedisCache` (the cache's BACKEND) also keeps one `redis.Redis` client per pool: Django builds a new
one for every cache call, and each build fills a table of about 170 reply callbacks. An API request
makes three or four cache calls (the brute-force limiter, the token-use tally). A client is
thread-safe: it takes a connection from the pool for each command.
"""

import threading

import redis
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class SharedConnectionPool(redis.ConnectionPool):
    _pools: dict[tuple, redis.ConnectionPool] = {}
    _lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **options) -> redis.ConnectionPool:
        key = (url, tuple(sorted((name, repr(value)) for name, value in options.items())))
        with cls._lock:
            if key not in cls._pools:
                cls._pools[key] = super().from_url(url, **options)
            return cls._pools[key]


class SharedClientCacheClient(RedisCacheClient):
    _clients: dict[redis.ConnectionPool, redis.Redis] = {}

    def get_client(self, key=None, *, write=False) -> redis.Redis:
        pool = self._get_connection_pool(write)
        client = self._clients.get(pool)
        if client is None:
            client = self._clients.setdefault(pool, self._client(connection_pool=pool))
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedClientCacheClient
