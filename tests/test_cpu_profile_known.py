"""A CPU profile whose answer is known by construction (issue 28): a native
program, compiled here with gcc (no frame pointers: DWARF unwinding is what
names its stacks), spends per row a fixed time in `same_every_row` and a time
proportional to the knob in `grows_with_level`. Run by the runner as an engine's
own process, profiled through the same path as every engine (RunProbe ->
the engine's cpu_profile dialect -> perf), the ranking must put
`grows_with_level` first, growing, and `same_every_row` flat."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from test_engine_plugin import MemoryEngine

from blocklab import engines
from blocklab.engines.base import ApplyClass, KnobInfo, ProfileTargets, SessionBase
from blocklab.engines.capabilities import DialectBase
from blocklab.experiment import prepare
from blocklab.results import RunDir
from blocklab.runner import SilentReporter, run
from blocklab.spec import spec_from_dict

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void grows_with_level(long level) {
    for (long i = 0; i < level * 800; i++) sink += i ^ (sink >> 3);
}
__attribute__((noinline)) void same_every_row(void) {
    for (long i = 0; i < 1600; i++) sink += i * 7;
}
int main(int argc, char **argv) {
    long level = atol(argv[1]), rows = atol(argv[2]);
    char go[8];
    if (!fgets(go, sizeof go, stdin)) return 1;  /* held until the probe window is open */
    for (long r = 0; r < rows; r++) { grows_with_level(level); same_every_row(); }
    printf("%ld\n", rows);
    return 0;
}
"""
ROWS = 100_000  # level 1 ~0.1 s of CPU a cell on a 2026 EPYC (12,000 rows gave 7-13 samples there, 20+ on the older Xeon)


@pytest.fixture(scope="module")
def native_binary(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc")
    assert gcc, "gcc is missing: sudo apt-get install gcc"
    where = tmp_path_factory.mktemp("native")
    (where / "work.c").write_text(SOURCE)
    subprocess.run([gcc, "-O1", "-fomit-frame-pointer", "-o", str(where / "work"), str(where / "work.c")], check=True)
    return where / "work"


class NativeSession(SessionBase):
    """One run of the program, spawned held (it waits for a line on stdin)."""

    def __init__(self, binary: Path, level: int):
        self.proc = subprocess.Popen([str(binary), str(level), str(ROWS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.backend_id = self.proc.pid

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        out, _ = self.proc.communicate("go\n", timeout=120)
        return [(int(out),)]

    def cancel(self) -> None:
        self.proc.kill()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class NativeDialect(DialectBase):
    """The null workload's needs: its 'count' is the program's run."""

    def __init__(self, engine: NativeEngine):
        self.engine = engine

    def build_table(self, table: str, rows: int, fingerprint: str) -> None:
        self.engine.tables[table] = (rows, fingerprint)

    def count_rows(self, session: Any, table: str) -> int:
        return int(session.execute("run")[0][0])

    def level(self) -> int:
        return int(self.engine.current.get("native.level", 1))

    def mode(self) -> str:
        return "a"  # the null workload's second knob (its mode_gain); this engine has one mode


class NativeProfile(DialectBase):
    def __init__(self, engine: NativeEngine):
        self.engine = engine

    def profile_targets(self) -> ProfileTargets:
        return ProfileTargets(tuple(self.engine.server_pids()), "the native program", self.trace_binary())

    def trace_binary(self) -> str | None:
        return str(self.engine.binary)


class NativeEngine(MemoryEngine):
    name: ClassVar[str] = "native"
    display: ClassVar[str] = "Native"
    native_prefix: ClassVar[str] = "native."
    dialects: ClassVar[dict[str, type]] = {"null": NativeDialect, "cpu_profile": NativeProfile}
    KNOBS: ClassVar[dict[str, KnobInfo]] = {
        "native.level": KnobInfo("level", None, "integer", ApplyClass.SESSION, minimum=1, maximum=64, default=1),
    }
    binary: ClassVar[Path] = Path("/nonexistent")

    def __init__(self, cache_dir: Path | None = None):
        super().__init__(cache_dir)
        self.sessions: list[NativeSession] = []

    def connect(self, *, session: bool = True) -> NativeSession:  # type: ignore[override]
        s = NativeSession(self.binary, int(self.current.get("native.level", 1)))
        self.sessions.append(s)
        return s

    def server_pids(self) -> list[int]:
        return [s.proc.pid for s in self.sessions if s.proc.poll() is None]


@pytest.fixture
def native_engine(monkeypatch, native_binary):
    engines.available()
    monkeypatch.setattr(engines, "_registered", dict(engines._registered))
    monkeypatch.setattr(NativeEngine, "binary", native_binary)
    engines.register(NativeEngine)
    return NativeEngine


def test_the_function_that_grows_with_the_knob_is_ranked_first_growing(native_engine, tmp_path):
    raw = {
        "name": "known",
        "engine": {"kind": "native"},
        "dataset": {"rows": ROWS},
        "workload": {"kind": "null", "noise": 0.0},
        "knobs": {"native.level": [1, 9]},
        "measure": {"repeats": 3, "seed": 7, "cpu_profile": True, "cpu_profile_hz": 499},
    }
    exp = prepare(spec_from_dict(raw, "test", {}), "# test", "test")
    summary = run(exp, RunDir(tmp_path / "run"), SilentReporter())
    rows = RunDir(tmp_path / "run").rows()
    assert len(rows) == 6 and all(r.ok for r in rows), [r.status for r in rows]
    # each cell's stacks kept, unwound through main (DWARF: the program has no frame pointers)
    for row in rows:
        note = row.notes["cpu_profile"]
        folded = (tmp_path / "run" / note["file"]).read_text()
        assert "main;grows_with_level " in folded and "main;same_every_row " in folded, folded[:500]
        assert note["call_graph"] == "dwarf" and note["samples"] > 20 and note["unnamed_share"] < 0.2, note
        # sampled at the rate asked for the CPU the program used (a sample lost here and there on a loaded machine)
        assert note["samples"] >= 0.5 * note["cpu_s"] * note["hz"], note
    ranking = summary["cpu_profile"]["rankings"][0]
    assert ranking["knob"] == "native.level" and ranking["values"] == ["1", "9"]
    first = ranking["functions"][0]
    assert first["function"] == "grows_with_level" and first["direction"] == "grows"
    ratio, low, _ = first["ratio"]
    assert 4.0 < ratio < 16.0 and low > 1.0  # 9x the loop per row, by construction
    assert first["extra_share"] > 0.7  # it explains most of the extra CPU
    flat = next(f for f in ranking["functions"] if f["function"] == "same_every_row")
    assert 0.6 < flat["ratio"][0] < 1.6
    assert "grows_with_level" in summary["profile_verdict"]
    # the report: the verdict links to the section; a flame graph per setting and a differential one
    html = (tmp_path / "run" / "report.html").read_text()
    assert 'href="#cpu-profile"' in html and 'id="cpu-profile"' in html and "<code>grows_with_level</code>" in html
    plots = sorted(p.name for p in (tmp_path / "run" / "plots").glob("flame-*.svg"))
    assert plots == ["flame-diff-native-level-1-vs-native-level-9.svg", "flame-native-level-1.svg", "flame-native-level-9.svg"]
    diff = (tmp_path / "run" / "plots" / plots[0]).read_text()
    assert diff.startswith("<svg") and "grows_with_level:" in diff and "rgb(255," in diff  # grew: drawn red
    assert "0x" not in diff  # never an address


class _Recorder:
    """An observer window that records what was done to it; `fail_on` raises there."""

    def __init__(self, log: list[str], name: str, fail_on: str = ""):
        self.log, self.name, self.fail_on = log, name, fail_on

    def _do(self, what: str) -> None:
        self.log.append(f"{self.name}.{what}")
        if what == self.fail_on:
            raise RuntimeError(f"{self.name} failed to {what}")

    def start(self) -> None:
        self._do("start")

    def __enter__(self) -> _Recorder:
        self._do("enter")
        return self

    def pause(self) -> None:
        self._do("pause")

    def __exit__(self, *exc: Any) -> None:
        self._do("exit")


def test_an_observer_that_fails_to_switch_on_stops_the_ones_already_recording():
    """Reviewer's find: perf started, then bpftrace failed to attach; perf kept recording
    until the server stopped. Every window spawned is now paused and exited."""
    from blocklab.probes.cpu_profile import observing
    from blocklab.probes.io import RunProbe

    log: list[str] = []

    class Observer:
        def __init__(self, name: str, fail_on: str = ""):
            self.name, self.fail_on = name, fail_on

        def window(self) -> _Recorder:
            return _Recorder(log, self.name, self.fail_on)

    with observing(Observer("perf"), Observer("bpftrace", fail_on="start")), pytest.raises(RuntimeError, match="bpftrace failed to start"):
        RunProbe(MemoryEngine()).__enter__()  # the windows are taken when the probe is made
    assert "perf.pause" in log and "perf.exit" in log, log
    assert log.index("perf.exit") > log.index("bpftrace.start") and "bpftrace.exit" not in log, log
