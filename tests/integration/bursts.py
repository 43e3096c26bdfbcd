"""Requests sent at the same instant against a live server: the claim races' bursts (PostgreSQL's and SQLite's)."""

import asyncio
import concurrent.futures

import httpx

REQUEST_TIMEOUT = 30.0


def burst(base_url: str, requests: list[tuple[str, str, dict | None]]) -> list[httpx.Response]:
    """Send (token, path, json body or None) requests at the same instant; their responses, in order.

    In a thread of its own: the browser tests' Playwright may leave an event loop running in this one."""

    async def send_all():
        limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT, limits=limits) as client:
            start = asyncio.Event()

            async def send(token, path, body):
                await start.wait()
                return await client.post(path, json=body, headers={"Authorization": f"Token {token}"})

            tasks = [asyncio.create_task(send(*request)) for request in requests]
            await asyncio.sleep(0.05)  # every task is waiting at the start line
            start.set()
            return await asyncio.gather(*tasks)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, send_all()).result()

