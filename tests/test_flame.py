"""The flame graph writer (report/flame.py) and the folding of perf script output
(probes/cpu_profile.py), on stacks whose answer is known."""

from __future__ import annotations

import re

from blocklab.probes.cpu_profile import fold_perf_script, read_folded
from blocklab.report.flame import WIDTH, build_tree, flame_svg

PERF_SCRIPT = """\
postgres 101 10101010
\t          1565d8 heap_insert (/opt/pg/bin/postgres)
\t          2ed72b ExecInsert (/opt/pg/bin/postgres)
\t          1139d7 main (/opt/pg/bin/postgres)

mariadbd 202 10101010
\t          aa12f0 [unknown] (/usr/sbin/mariadbd)
\t          aa12e0 [unknown] (/usr/sbin/mariadbd)
\t          27249 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)

postgres 101 10101010
\t          1565d8 heap_insert (/opt/pg/bin/postgres)
\t          2ed72b ExecInsert (/opt/pg/bin/postgres)
\t          1139d7 main (/opt/pg/bin/postgres)
"""


def test_perf_script_is_folded_root_first_and_unnamed_frames_never_show_an_address():
    profile = fold_perf_script(PERF_SCRIPT)
    assert profile.samples == 3 and profile.period_ns == 3 * 10101010
    assert profile.stacks["postgres;main;ExecInsert;heap_insert"] == 2
    # two unnamed frames of one object are one frame, named by the object, not its addresses
    assert profile.stacks["mariadbd;__libc_start_call_main;[unnamed in mariadbd]"] == 1
    assert profile.unnamed_leaf == 1 and profile.unnamed_objects == {"mariadbd": 1}
    assert "aa12f0" not in profile.folded_text()
    assert read_folded(profile.folded_text()) == profile.stacks


def test_frame_widths_are_shares_and_text_is_escaped():
    stacks = {"p;main;a": 3.0, "p;main;b<x>": 1.0}
    assert build_tree(stacks).value == 4.0
    svg = flame_svg(stacks, "t & u").decode()
    rects = re.findall(r'<title>([^:<]+):[^<]*</title><rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"', svg)
    width = {name: float(w) for name, _, w in rects}
    assert abs(width["a"] - WIDTH * 0.75) < 0.01 and abs(width["b&lt;x&gt;"] - WIDTH * 0.25) < 0.01
    assert "t &amp; u" in svg and "<x>" not in svg


def test_the_differential_colours_growth_red_and_shrinkage_blue():
    before = {"p;main;grows": 1.0, "p;main;shrinks": 4.0}
    after = {"p;main;grows": 4.0, "p;main;shrinks": 1.0}
    svg = flame_svg(after, "diff", before=before, unit="per row").decode()
    fill = dict(re.findall(r'<title>(grows|shrinks):[^<]*</title><rect [^>]*fill="([^"]+)"', svg))
    assert fill["grows"] == "rgb(255,0,0)" and fill["shrinks"] == "rgb(0,0,255)"  # x4 and /4 saturate
    assert "+300%" in svg and "-75%" in svg
