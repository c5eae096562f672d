"""Fleet runs: one experiment on many hosts, each measuring its own disk, through
Dask distributed (the scheduler, the workers and their TLS are Dask's own).

    security.py     the certificate authority (`blocklab fleet certs`), Dask Security
                    objects per role, and which addresses are accepted (TLS, or plain
                    TCP on loopback with --insecure)
    facts.py        what a host is (device, file system, engine versions, which disk)
    worker.py       `blocklab worker`: a Dask worker whose HostLab actor holds the
                    host's engine for a whole run and measures cells with the runner's
                    own rules (experiment.prepare, runner.measure_cell, claims.py)
    scheduler.py    `blocklab fleet up` (a scheduler) and `blocklab fleet status`
    plan.py         the same plan on every host, each in its own randomised order
    coordinator.py  on the machine that started the run: picks the hosts, opens their
                    labs, sends cells, appends every row that comes back to the one run
                    directory (fsync'd per row, with its host), rewrites the summary
    agreement.py    the coordinator's checks that every host takes the experiment alike
                    (one plan), and that a resumed host is the one it was
    run_files.py    the coordinator's writes besides the rows: environment.json,
                    summary.json as rows come back, report.html on a thread of its own

The analysis with host as a factor is analysis/fleet.py; the report's hosts
section is report/fleet.py. Dask itself is imported only here and only when a
fleet command runs, so local runs never pay for it.
"""

from __future__ import annotations

from pathlib import Path

from ..spec import SpecError

# The actor key of a host's lab: the worker's janitor (worker.py) recognises it.
LAB_PREFIX = "blocklab-lab-"


class FleetInputError(SpecError):
    """Bad input to a fleet command: the message starts with the option it is about
    (--fleet, --hosts, --certs, --resume ...); the CLI exits 2."""

    def __init__(self, option: str, message: str):
        super().__init__(f"{option}: {message}" if option else message)
        self.option = option
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # pickled as (option, message), not as the joined text: Dask carries exceptions between processes
        return (type(self), (self.option, self.message))


class FleetError(RuntimeError):
    """A fleet run could not go on (a host lost, a worker busy with another run); the CLI exits 1.
    `run_dir`: the directory it had written, when it can be taken up again with --resume."""

    run_dir: Path | None = None


__all__ = ["LAB_PREFIX", "FleetError", "FleetInputError"]
