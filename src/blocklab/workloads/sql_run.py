"""The timed loop of workload `sql` (workloads/sql.py): one session's transactions.

At thousands of statements a second on two shared cores the client's own Python is
part of what is measured, so the loop does as little as it can per statement: each
script is compiled once into steps, each statement is bound once per session to one
call of the engine's (run(env) -> rows: the values gathered, encoded and sent, the
result counted, in the engine's dialect), and a statement's time is two clock reads
and an append to an array of doubles.

    plans = [compile_steps(script, first, bound) for ...]
    tally = run_session(plans, runner, stop, until, count, fail)
"""

from __future__ import annotations

import math
import statistics
import time
from array import array
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from .pgscript import Runner, Script, SetCommand, SleepCommand
from .pgscript_expr import Value

SET, SLEEP, STATEMENT = 0, 1, 2  # the kinds of a compiled script's steps
Step = tuple[int, Any, Any]
TallyBytes = tuple[float, float, int, list[bytes], bytes]  # a Tally as a session's process sends it back


class Flag(Protocol):
    """stop[0] true: the loop ends (a list's element in a thread, a shared mmap's byte in a process)."""

    def __getitem__(self, index: int, /) -> Any: ...


class Tally:
    """One session's counts: every transaction's and every statement's time (seconds)."""

    def __init__(self, statements: int):
        self.latencies: list[array[float]] = [array("d") for _ in range(statements)]
        self.transactions: array[float] = array("d")
        self.rows = 0
        self.t0 = self.t1 = 0.0


def tally_bytes(tally: Tally) -> TallyBytes:
    """The tally as bytes (arrays of doubles as they lie in memory): cheap to pickle through a pipe."""
    return tally.t0, tally.t1, tally.rows, [a.tobytes() for a in tally.latencies], tally.transactions.tobytes()


def tally_from_bytes(data: TallyBytes, statements: int) -> Tally:
    tally = Tally(statements)
    tally.t0, tally.t1, tally.rows = data[0], data[1], data[2]
    for values, raw in zip(tally.latencies, data[3]):
        values.frombytes(raw)
    tally.transactions.frombytes(data[4])
    return tally


def compile_steps(script: Script, first: int, bound: Sequence[Callable[[dict[str, Value]], int]]) -> list[Step]:
    """The script as (kind, a, b) steps: (SET, name, evaluate), (SLEEP, evaluate, seconds per unit),
    (STATEMENT, its index among all statements, its bound call)."""
    steps: list[Step] = []
    index = first
    for command in script.commands:
        if isinstance(command, SetCommand):
            steps.append((SET, command.name, command.expr.run))
        elif isinstance(command, SleepCommand):
            steps.append((SLEEP, command.amount.run, command.seconds_per_unit))
        else:
            steps.append((STATEMENT, index, bound[index]))
            index += 1
    return steps


def run_session(plans: list[list[Step]], runner: Runner, stop: Flag, until: float, count: int | None,
                fail: Callable[[int, Exception], NoReturn], tally: Tally) -> None:
    """Transactions until `until` (perf_counter) or `count` of them, or stop[0]: a script
    chosen by weight, its steps run in order. `fail(index, err)` raises the error of statement
    `index` (the engine's, mapped to the file)."""
    clock = time.perf_counter
    env, rng = runner.env, runner.rng
    latencies, transactions = tally.latencies, tally.transactions
    single = plans[0] if len(plans) == 1 else None
    rows = done = 0
    try:
        while not stop[0] and (done < count if count is not None else clock() < until):
            steps = single if single is not None else plans[runner.choose()]
            start = clock()
            for kind, a, b in steps:
                if kind == STATEMENT:
                    t = clock()
                    try:
                        rows += b(env)
                    except Exception as err:
                        fail(a, err)
                    latencies[a].append(clock() - t)
                elif kind == SET:
                    env[a] = b(env, rng)
                else:
                    time.sleep(max(0.0, float(a(env, rng))) * b)
            transactions.append(clock() - start)
            done += 1
    finally:
        tally.rows += rows


def tally_metrics(tallies: list[Tally], keys: list[str], seed: int) -> dict[str, float]:
    elapsed = max(t.t1 for t in tallies) - min(t.t0 for t in tallies)
    secs = elapsed if elapsed > 0 else 1e-9
    latencies = [x for t in tallies for x in t.transactions]
    statements = sum(len(x) for t in tallies for x in t.latencies)
    m: dict[str, float] = {
        "tps": len(latencies) / secs,
        "statements_per_s": statements / secs,
        "transactions": float(len(latencies)),
        "statements": float(statements),
        "rows": float(sum(t.rows for t in tallies)),
        "rows_per_s": sum(t.rows for t in tallies) / secs,
        "elapsed_s": elapsed,
        "sessions": float(len(tallies)),
        "random_seed": float(seed),
    }
    m.update(percentiles("latency", latencies))
    for i, key in enumerate(keys):
        values = [x for t in tallies for x in t.latencies[i]]
        if values:
            m.update(percentiles(f"stmt.{key}", values))
            m[f"stmt.{key}.count"] = float(len(values))
    return m


def percentiles(prefix: str, seconds: Sequence[float]) -> dict[str, float]:
    """mean, p50, p95, p99 and max in milliseconds; a percentile is the nearest rank's value
    (the smallest value at or above which q of the values lie: the ceil(q*n)-th of n)."""
    if not seconds:
        return {}
    ordered = sorted(seconds)

    def at(q: float) -> float:
        rank = math.ceil(q * len(ordered) - 1e-9)  # 1-based; the epsilon: 0.95 * 20 is not always 19.0 in floats
        return ordered[min(len(ordered), max(1, rank)) - 1] * 1000

    return {f"{prefix}.mean_ms": statistics.fmean(ordered) * 1000, f"{prefix}.p50_ms": at(0.50),
            f"{prefix}.p95_ms": at(0.95), f"{prefix}.p99_ms": at(0.99), f"{prefix}.max_ms": ordered[-1] * 1000}
