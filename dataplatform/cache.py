"""Django's Redis cache with one Redis client, and so one connection pool, per process.

Django makes a new cache object for every thread and every asyncio task that touches the cache, and
its Redis client keeps its connection pool on that object (Django ticket #35651). Under ASGI every
request runs in a new context, so every request opened a new TCP connection to Redis and left it to
the garbage collector; with redis-py 8, each new connection also looks up the library's version in the
installed packages' metadata. A py-spy recording of the web process under the load bench found about
30% of the samples taken inside requests there. Django also builds a new `redis.Redis` for every cache
call, and each build fills a table of about 170 reply callbacks; an API request makes two or three
cache calls (the brute-force limiter, the token-use tally).

`RedisCache` (the cache's BACKEND) therefore keeps one `redis.Redis` per process for each server and
option set, shared by every cache object of the process. A client is thread-safe (it takes a
connection from its pool for each command), and its pool replaces its connections itself in a forked
child (it checks the pid).

Its `incr` is one round trip, not Django's two (EXISTS, then INCRBY): every API request counts its
token's use with it.
"""

import threading

import redis
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class SharedClientCacheClient(RedisCacheClient):
    _clients: dict[tuple, redis.Redis] = {}
    _lock = threading.Lock()

    def __init__(self, servers, **options):
        super().__init__(servers, **options)
        self._options_key = tuple(sorted((name, repr(value)) for name, value in self._pool_options.items()))

    def get_client(self, key=None, *, write=False) -> redis.Redis:
        server = self._servers[self._get_connection_pool_index(write)]
        client = self._clients.get((server, self._options_key))
        if client is None:
            with self._lock:  # one pool per server and options, even when two threads start at once
                client = self._clients.get((server, self._options_key))
                if client is None:
                    pool = self._pool_class.from_url(server, **self._pool_options)
                    client = self._clients[server, self._options_key] = self._client(connection_pool=pool)
        return client

    def incr(self, key, delta):
        # Django's semantics (ValueError for a missing key, which is not created) in one atomic script.
        value = self.get_client(key, write=True).eval(_INCR_IF_EXISTS, 1, key, delta)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return value


_INCR_IF_EXISTS = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end"


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedClientCacheClient
