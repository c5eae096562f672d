"""`blocklab fleet up` (a Dask scheduler) and `blocklab fleet status` (its workers
and their host facts)."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import FleetInputError
from .security import split_host_port

if TYPE_CHECKING:
    from distributed import Security


def run_scheduler(listen: str, security: Security | None, on_ready: Callable[[str], None]) -> None:
    """Serve a scheduler on `listen` (tls://HOST:PORT, or tcp://127.0.0.1:PORT with
    --insecure) until SIGTERM or SIGINT. FleetInputError when it cannot listen there."""
    from distributed import Scheduler

    scheme, _, rest = listen.partition("://")
    host, port = split_host_port("--listen", rest, allow_any_port=True)

    import dask

    from .security import HTTP_CONFIG

    async def main() -> None:
        bind = host.strip("[]")
        with dask.config.set(HTTP_CONFIG):
            scheduler = Scheduler(host=bind or None, port=port, protocol=scheme, security=security, dashboard=False,
                                  dashboard_address=f"{bind or '0.0.0.0'}:0")  # the health check only (HTTP_CONFIG), any free port
            try:
                await scheduler
            except OSError as err:
                raise FleetInputError("--listen", f"cannot listen on {listen}: {err.strerror or err}") from None
        on_ready(contact_address(scheduler.address))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        finished = asyncio.ensure_future(scheduler.finished())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([finished, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not finished.done():
            await scheduler.close(reason="blocklab fleet stopped")
        finished.cancel()

    asyncio.run(main())


def contact_address(address: str) -> str:
    """The address to give workers: a wildcard listen address becomes this host's name."""
    scheme, _, rest = address.partition("://")
    host, port = split_host_port("--listen", rest)
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.getfqdn()
    return f"{scheme}://{host}:{port}"


def fleet_status(address: str, security: object, timeout: float) -> list[dict[str, object]]:
    """Each connected worker's facts (facts.collect_facts, plus `address` and the runs it
    is measuring now), sorted by name."""
    import dask
    from distributed import Client

    from .worker import current_facts

    try:
        with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}):
            client = Client(address, security=security, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as err:
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FleetInputError("--fleet", f"cannot reach the scheduler at {address}: {why}") from None
    try:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        facts = client.run(current_facts, on_error="return") if workers else {}
    finally:
        client.close(timeout=5)
    out: list[dict[str, object]] = []
    for addr, info in workers.items():
        entry = facts.get(addr)
        if isinstance(entry, BaseException) or not isinstance(entry, dict):  # a worker without blocklab inside, or gone
            entry = {"name": str(info.get("name")), "error": f"no blocklab facts ({type(entry).__name__})"}
        out.append({**entry, "name": str(info.get("name")), "address": addr})
    return sorted(out, key=lambda e: str(e["name"]))  # a str, set above
