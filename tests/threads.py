"""Run async test code in a thread of its own.

Earlier tests in the same process (the browser tests' Playwright sync API) can leave an event loop
marked as running in the main thread; `async_to_sync` and `loop.run_until_complete` then refuse to
start there. A fresh thread has no loop.
"""

from concurrent.futures import ThreadPoolExecutor

from django.db import connections


def in_new_thread(function, *args):
    def run():
        try:
            return function(*args)
        finally:
            connections.close_all()  # this thread's own connections: left open, they block the test database's drop

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()
