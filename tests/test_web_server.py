"""The web server as docker-compose.yml runs it (`uvicorn --workers 4`) answers keep-alive requests
without Nagle's delay.

With `--workers N` uvicorn's supervisor binds the listening socket itself and hands it to the worker
processes; that socket reports protocol 0, and asyncio's own event loop sets TCP_NODELAY only on
sockets that report IPPROTO_TCP (uvicorn issue #3149). Nagle then holds back each response's second
write until the client's delayed ACK: ~40 ms on every keep-alive request after the first (the load
bench measured 64 ms instead of 22). uvloop, which uvicorn picks when it is installed, sets it on
every TCP connection.
"""

import asyncio
import socket

import uvicorn
import uvloop

from .threads import in_new_thread


def _nodelay_of_a_connection_accepted_on(listener: socket.socket, loop: asyncio.AbstractEventLoop) -> int:
    async def accept_one() -> int:
        accepted = loop.create_future()

        class Report(asyncio.Protocol):
            def connection_made(self, transport):
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Report, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        try:
            return await asyncio.wait_for(accepted, 10)
        finally:
            writer.close()
            server.close()

    try:
        return loop.run_until_complete(accept_one())
    finally:
        loop.close()


def test_uvicorn_picks_uvloop():
    loop = uvicorn.Config("dataplatform.asgi:application", loop="auto").get_loop_factory()()
    assert isinstance(loop, uvloop.Loop)
    loop.close()


def test_connections_on_the_socket_that_workers_get_have_tcp_nodelay():
    config = uvicorn.Config("dataplatform.asgi:application", host="127.0.0.1", port=0, loop="auto")
    listener = config.bind_socket()  # what the --workers supervisor does before it starts the workers
    assert listener.proto == 0  # the cause: if uvicorn fixes it, this test may go
    assert in_new_thread(_nodelay_of_a_connection_accepted_on, listener, config.get_loop_factory()()) != 0
