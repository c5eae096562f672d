"""Device calibration: real fio runs kept small (64 MiB file, 1 s points) plus pure parsing/summary tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from blocklab.device import calibrate as cal_mod
from blocklab.device.calibrate import (
    CALIBRATION_FILE,
    Point,
    find_latest_calibration,
    load_calibration,
    make_plan,
    run_calibration,
    save_calibration,
    summarise,
)
from blocklab.device.fio import FioNotFound, find_fio, parse_read, run_fio
from blocklab.results import RunDir
from blocklab.units import parse_size

# the tests that run fio fail with what to install when it is missing (conftest.py fio_installed), as the
# device twin's do; the parsing and refusal tests need no fio and run everywhere
needs_fio = pytest.mark.usefixtures("fio_installed")

SMALL = dict(file_size="64M", runtime_s=1.0, ramp_s=0.2)


def leftovers(directory: Path) -> list[Path]:
    return list(directory.glob(".blocklab-calibrate-*"))


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """One real calibration of three points, saved as a run, shared by the tests below."""
    from conftest import FIO_MISSING

    if shutil.which("fio") is None:
        pytest.fail(FIO_MISSING)
    base = tmp_path_factory.mktemp("calib")
    data_dir = base / "data"
    data_dir.mkdir()
    plan = make_plan("quick", block_sizes=["8k"], iodepths=[1, 4], seq_block_sizes=["1M"], seq_iodepths=[1], **SMALL)
    calls = []
    cal = run_calibration(
        data_dir, plan, run_dir=base / "results" / "calibrate-1", on_point=lambda i, n, d: calls.append((i, n, d))
    )
    return cal, calls, data_dir, base


# ---------------------------------------------------------------- real runs
def test_real_run_parses_into_points(real_run):
    cal, calls, _, _ = real_run
    assert cal.complete and not cal.failures
    assert cal.ioengine in ("libaio", "psync") and cal.ioengine_note
    assert [p.description for p in cal.points] == ["rand 8k qd1", "rand 8k qd4", "seq 1M qd1"]
    for p in cal.points:
        assert p.iops > 0
        # MB/s is 1e6 bytes/s; fio's bandwidth and IOPS agree within 1% at low queue depths
        assert p.mb_per_s == pytest.approx(p.iops * p.block_size / 1e6, rel=0.01)
        assert 0 < p.lat_mean_ms <= p.lat_p99_ms
        assert p.runtime_s == pytest.approx(1.0, abs=0.1)


def test_progress_callback_before_each_point(real_run):
    _, calls, _, _ = real_run
    assert calls == [(0, 3, "rand 8k qd1"), (1, 3, "rand 8k qd4"), (2, 3, "seq 1M qd1")]


def test_test_file_removed_after_run(real_run):
    _, _, data_dir, _ = real_run
    assert list(data_dir.iterdir()) == []


def test_run_dir_round_trips(real_run):
    cal, _, _, base = real_run
    run_dir = base / "results" / "calibrate-1"
    rows = RunDir(run_dir).rows()
    assert [r.cell for r in rows] == [0, 1, 2]
    assert rows[1].settings == {"pattern": "rand", "block_size": 8192, "iodepth": 4}
    assert rows[1].applied == {"pattern": "rand", "block_size": "8192", "iodepth": "4"}
    assert rows[1].block == 0 and rows[1].metrics["iops"] == cal.points[1].iops
    env = json.loads((run_dir / "environment.json").read_text())
    assert env["device"] == cal.device_name and env["file_system"] == cal.device["fs_type"]
    saved = json.loads((run_dir / CALIBRATION_FILE).read_text())
    assert saved["summary"] == cal.summary.to_dict()
    assert load_calibration(run_dir) == cal


def test_save_and_find_latest(real_run, tmp_path):
    cal, _, _, _ = real_run
    root = tmp_path / "results"
    older = save_calibration(cal, root / "calibrate-a").path
    newer = save_calibration(cal.__class__(**{**cal.__dict__, "finished": "2999-01-01T00:00:00+00:00"}), root / "calibrate-b").path
    other = cal.__class__(**{**cal.__dict__, "device": {**cal.device, "name": "sdz"}})
    save_calibration(other, root / "calibrate-c")
    (root / "not-a-run").mkdir()
    assert load_calibration(older) == cal
    assert find_latest_calibration(root, cal.device_name) == newer
    assert find_latest_calibration(root, "sdz") == root / "calibrate-c"
    assert find_latest_calibration(root, "nvme9n1") is None
    assert find_latest_calibration(tmp_path / "nowhere", "vda") is None


@needs_fio
def test_parse_saved_real_json(tmp_path):
    target = tmp_path / "f"
    args = ["--name=t", f"--filename={target}", "--size=16M", "--direct=1", "--ioengine=psync",
            "--rw=randread", "--bs=4k", "--runtime=500ms", "--time_based"]
    saved = tmp_path / "out.json"
    saved.write_text(json.dumps(run_fio(find_fio(), args)))
    p = parse_read(json.loads(saved.read_text()))
    assert (p.pattern, p.block_size, p.iodepth) == ("rand", 4096, 1)
    assert p.iops > 0 and p.lat_mean_ms > 0 and p.lat_p99_ms > 0
    assert p.mb_per_s == pytest.approx(p.iops * 4096 / 1e6, rel=0.01)


@needs_fio
def test_psync_emulates_queue_depth_with_jobs(tmp_path):
    plan = make_plan("quick", block_sizes=["8k"], iodepths=[2], seq_block_sizes=[], **SMALL)
    cal = run_calibration(tmp_path, plan, ioengine="psync")
    assert cal.ioengine == "psync" and cal.points[0].iodepth == 2 and cal.points[0].iops > 0
    assert leftovers(tmp_path) == []


@needs_fio
def test_interrupt_removes_file_and_keeps_finished_points(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()

    def stop_at_second(index, total, description):
        if index == 1:
            raise KeyboardInterrupt

    plan = make_plan("quick", block_sizes=["8k"], iodepths=[1, 2], seq_block_sizes=[], **SMALL)
    with pytest.raises(KeyboardInterrupt):
        run_calibration(data_dir, plan, run_dir=tmp_path / "run", on_point=stop_at_second)
    assert leftovers(data_dir) == []
    partial = load_calibration(tmp_path / "run")
    assert not partial.complete and len(partial.points) == 1
    assert find_latest_calibration(tmp_path, partial.device_name) is None  # incomplete runs are not limits


@needs_fio
def test_failed_point_is_recorded_and_the_rest_go_on(tmp_path, monkeypatch):
    real_args = cal_mod.point_args

    def broken_first(test_file, plan, point, engine):
        extra = ["--rw=nonsense"] if point.iodepth == 1 else []
        return real_args(test_file, plan, point, engine) + extra

    monkeypatch.setattr(cal_mod, "point_args", broken_first)
    plan = make_plan("quick", block_sizes=["8k"], iodepths=[1, 2], seq_block_sizes=[], **SMALL)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    cal = run_calibration(data_dir, plan, run_dir=tmp_path / "run")
    assert [p.iodepth for p in cal.points] == [2]
    assert cal.failures[0]["iodepth"] == 1 and "fio failed" in cal.failures[0]["error"]
    rows = RunDir(tmp_path / "run").rows()
    assert not rows[0].ok and rows[0].status.startswith("fio failed") and rows[1].ok
    assert load_calibration(tmp_path / "run") == cal
    assert leftovers(data_dir) == []


def test_psync_chosen_without_libaio(monkeypatch):
    monkeypatch.setattr(cal_mod, "engine_available", lambda fio, engine: False)
    engine, note = cal_mod.choose_ioengine("fio", None)
    assert engine == "psync" and "libaio not available" in note
    assert cal_mod.choose_ioengine("fio", "libaio") == ("libaio", "requested")


# ---------------------------------------------------------------- pure functions
def test_parse_hand_made_json():
    data = {
        "jobs": [{
            "jobname": "x", "error": 0,
            "job options": {"rw": "read", "bs": "128k", "iodepth": "8"},
            "read": {"iops": 1000.0, "bw_bytes": 131072000, "total_ios": 1000, "runtime": 2000,
                     "clat_ns": {"mean": 250000.0, "percentile": {"99.000000": 1000000}}},
        }]
    }
    p = parse_read(data)
    assert p == Point("seq", 131072, 8, 1000.0, 131.072, 0.25, 1.0, 2.0)


def test_summary_picks_the_right_points():
    def pt(pattern, bs, qd, iops, lat):
        return Point(pattern, bs, qd, iops, iops * bs / 1e6, lat, lat * 2, 3.0)

    points = [
        pt("rand", 4096, 1, 9000, 0.11),
        pt("rand", 8192, 1, 8000, 0.10),  # lowest qd1 small latency
        pt("rand", 8192, 32, 90000, 0.05),  # lower latency, but not at qd1
        pt("rand", 32768, 16, 95000, 0.30),  # max small IOPS
        pt("rand", 65536, 64, 99000, 0.40),  # neither small nor large
        pt("rand", 131072, 16, 20000, 0.80),  # 2621 MB/s
        pt("seq", 1048576, 16, 2800, 5.0),  # 2936 MB/s: max large
        pt("rand", 1048576, 1, 2000, 0.09),  # qd1 but large: not a small latency
    ]
    s = summarise(points)
    assert (s.max_small_iops.value, s.max_small_iops.block_size, s.max_small_iops.iodepth) == (95000, 32768, 16)
    assert (s.max_large_mb_per_s.pattern, s.max_large_mb_per_s.block_size, s.max_large_mb_per_s.iodepth) == ("seq", 1048576, 16)
    assert s.max_large_mb_per_s.value == pytest.approx(2800 * 1048576 / 1e6)
    assert (s.min_small_latency_ms.value, s.min_small_latency_ms.block_size) == (0.10, 8192)
    assert s.lines()[0] == "Maximum small-I/O IOPS: 95,000 IOPS at rand 32k qd16"
    assert summarise([]).max_small_iops is None


def test_presets():
    full, quick = make_plan(), make_plan("quick")
    assert len(full.points) == 6 * 7 + 2 * 2 and full.runtime_s == 3.0 and full.file_size == 1024**3
    assert len(quick.points) == 9 and quick.runtime_s == 1.0
    assert parse_size("8k") == 8192 and parse_size("1M") == 1048576 and parse_size("128KiB") == 131072


# ---------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"block_sizes": ["8q"]}, "block_sizes: cannot read '8q' as a size"),
        ({"block_sizes": [1000]}, "block_sizes: 1000 is not accepted; direct I/O needs a multiple of 512"),
        ({"iodepths": [0]}, "iodepths: 0 is not accepted; queue depths are whole numbers >= 1"),
        ({"seq_iodepths": [-1]}, "seq_iodepths: -1 is not accepted"),
        ({"runtime_s": 0}, "runtime_s: 0 is not accepted"),
        ({"file_size": "4k"}, "file_size: '4k' is not accepted"),
    ],
)
def test_bad_plan_inputs(kwargs, message):
    with pytest.raises(ValueError) as err:
        make_plan("quick", **kwargs)
    assert message in str(err.value)


@needs_fio
def test_bad_run_inputs_fail_before_fio(tmp_path, monkeypatch):
    def no_fio(*args, **kwargs):
        raise AssertionError("fio must not run for bad inputs")

    monkeypatch.setattr(cal_mod, "run_fio", no_fio)
    with pytest.raises(ValueError, match="directory: '.*nope' does not exist"):
        run_calibration(tmp_path / "nope", make_plan("quick"))
    too_big = (shutil.disk_usage(tmp_path).total // 1024**3 + 1) * 2  # GiB, more than the whole disk
    with pytest.raises(ValueError, match=rf"file_size: the test file needs {too_big}G .* free; give a smaller file_size"):
        run_calibration(tmp_path, make_plan("quick", file_size=f"{too_big}G"))
    with pytest.raises(ValueError, match="ioengine: 'posixaio' is not accepted; accepted: libaio, psync"):
        run_calibration(tmp_path, make_plan("quick"), ioengine="posixaio")
    with pytest.raises(ValueError, match="run_dir: .* already holds a run"):
        (tmp_path / "old").mkdir()
        (tmp_path / "old" / "results.jsonl").write_text("")
        run_calibration(tmp_path, make_plan("quick"), run_dir=tmp_path / "old")
    assert leftovers(tmp_path) == []


def test_fio_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FioNotFound, match="apt-get install fio"):
        run_calibration(tmp_path, make_plan("quick", **SMALL))
