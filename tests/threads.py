"""Run async test code in a thread of its own.

Earlier tests in the same process (the browser tests' Playwright sync API) can leave an event loop
marked as running in the main thread; `async_to_sync` and `loop.run_until_complete` then refuse to
start there. A fresh thread has no loop.
"""

from concurrent.futures import ThreadPoolExecutor


def in_new_thread(function, *args):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args).result()
