"""One Redis connection pool per process for Django's Redis cache.

Django makes a new cache object for every thread and every asyncio task that touches the cache, and
its Redis client keeps its connection pool on that object (Django ticket #35651). Under ASGI every
request runs in a new context, so every request opened a new TCP connection to Redis and left it to
the garbage collector; with redis-py 8, each new connection also looks up the library's version in the
installed packages' metadata. A py-spy recording of the web process under the load bench found about
30% of the samples taken inside requests there.

`SharedConnectionPool` is given to the cache as its `pool_class`: every cache object of the process
gets the same pool for the same URL and options, so connections are reused across requests. redis-py's
pool is thread-safe, and it replaces its connections itself in a forked child (it checks the pid).
"""

import threading

import redis


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
