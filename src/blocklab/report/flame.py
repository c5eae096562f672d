"""Flame graphs as SVG, drawn here from folded stacks (probes/cpu_profile.py):
one per setting, and a differential one between two settings. Returns bytes.

A flame graph stacks each sampled call path from the root (bottom) to the
function on the CPU (top); a frame's width is its share of the samples, its
children are sorted by name so two graphs line up. Every frame carries a
tooltip (<title>) with its name, samples and share.

The differential graph compares CPU per unit of work, not raw samples: each
stack's weight in a setting is its CPU seconds per unit of the workload's work
(averaged over the setting's cells), so two settings that did the same work
compare directly. Frames are as wide as in the second setting and coloured by
how their inclusive cost per unit changed from the first: red grew, blue shrank,
the stronger the larger the change; paths only the first setting had are not
drawn (their total is said in the title).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape

WIDTH = 1200
FRAME_H = 17
PAD_TOP = 44
PAD_BOTTOM = 10
MIN_PX = 0.4  # narrower frames are not drawn (they would be a hairline)
CHAR_PX = 6.6  # at the 11.5 px monospace font


@dataclass
class Node:
    name: str
    value: float = 0.0
    self_value: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        if name not in self.children:
            self.children[name] = Node(name)
        return self.children[name]


def build_tree(stacks: Mapping[str, float]) -> Node:
    root = Node("all")
    for stack, weight in stacks.items():
        if weight <= 0:
            continue
        node = root
        node.value += weight
        for frame in stack.split(";"):
            node = node.child(frame)
            node.value += weight
        node.self_value += weight
    return root


def _paths(node: Node, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], float]:
    """Inclusive value of every path from the root (the root itself excluded)."""
    out: dict[tuple[str, ...], float] = {}
    for child in node.children.values():
        path = (*prefix, child.name)
        out[path] = child.value
        out.update(_paths(child, path))
    return out


def _warm(name: str) -> str:
    """flamegraph's warm palette, the hue fixed by the name (the same function, the same colour everywhere)."""
    h = int(hashlib.md5(name.encode()).hexdigest()[:8], 16)
    r = 205 + h % 50
    g = 90 + (h >> 8) % 130
    b = 40 + (h >> 16) % 45
    if name.startswith("[unnamed"):
        return "rgb(190,190,190)"
    return f"rgb({r},{g},{b})"


def _diff_colour(before: float, after: float) -> str:
    """Red where the frame's cost per unit grew, blue where it shrank; white unchanged.
    Saturates at a doubling (or halving)."""
    if before <= 0:
        return "rgb(220,40,40)"  # new in the second setting
    change = math.log2(max(after, 1e-18) / before)
    t = max(-1.0, min(1.0, change))
    fade = int(255 * (1 - abs(t)))
    if t >= 0:
        return f"rgb(255,{fade},{fade})"
    return f"rgb({fade},{fade},255)"


def flame_svg(stacks: Mapping[str, float], title: str, subtitle: str = "", unit: str = "samples",
              before: Mapping[str, float] | None = None) -> bytes:
    """The flame graph of `stacks` (stack -> weight). With `before` (the first setting's
    stacks, same unit) the frames are coloured by their change from it."""
    root = build_tree(stacks)
    total = root.value
    depth = _depth(root)
    lines = [line for line in subtitle.split("\n") if line]
    top = PAD_TOP + 14 * max(0, len(lines) - 1)
    height = top + (depth + 1) * FRAME_H + PAD_BOTTOM
    before_paths = _paths(build_tree(before)) if before is not None else None
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="DejaVu Sans Mono, Menlo, monospace" font-size="11.5">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fbfbf7"/>',
        f'<text x="{WIDTH / 2}" y="17" text-anchor="middle" font-size="15" font-family="DejaVu Sans, sans-serif" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for i, line in enumerate(lines):
        out.append(f'<text x="{WIDTH / 2}" y="{34 + 14 * i}" text-anchor="middle" font-size="11.5" fill="#555" '
                   f'font-family="DejaVu Sans, sans-serif">{escape(line)}</text>')
    if total <= 0:
        out.append(f'<text x="{WIDTH / 2}" y="{top + 20}" text-anchor="middle">no samples</text></svg>')
        return "\n".join(out).encode()
    base_y = height - PAD_BOTTOM - FRAME_H
    _draw(root, 0.0, 0, total, base_y, (), before_paths, unit, out)
    out.append("</svg>")
    return "\n".join(out).encode()


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0) if node.children else 0


def _draw(node: Node, x: float, level: int, total: float, base_y: float, path: tuple[str, ...],
          before: dict[tuple[str, ...], float] | None, unit: str, out: list[str]) -> None:
    w = node.value / total * WIDTH
    if w < MIN_PX:
        return
    y = base_y - level * FRAME_H
    share = node.value / total * 100
    if before is not None and path:
        was = before.get(path, 0.0)
        colour = _diff_colour(was, node.value)
        change = f"; first setting {_amount(was, unit)}, {_change(was, node.value)}"
    else:
        colour = "rgb(236,236,230)" if not path else _warm(node.name)
        change = ""
    label = "all" if not path else node.name
    tip = f"{label}: {_amount(node.value, unit)} ({share:.1f}%)" + (f", self {_amount(node.self_value, unit)}" if node.self_value else "") + change
    out.append(f'<g><title>{escape(tip)}</title><rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{FRAME_H - 1}" '
               f'fill="{colour}" rx="1.5"/>')
    chars = int((w - 6) / CHAR_PX)
    if chars >= 3:
        text = label if len(label) <= chars else label[: chars - 2] + ".."
        out.append(f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 5:.1f}">{escape(text)}</text>')
    out.append("</g>")
    child_x = x
    for name in sorted(node.children):
        child = node.children[name]
        _draw(child, child_x, level + 1, total, base_y, (*path, name), before, unit, out)
        child_x += child.value / total * WIDTH


def _amount(value: float, unit: str) -> str:
    if unit == "samples":
        return f"{value:,.0f} samples"
    return f"{value * 1e6:,.3f} µs {unit}"  # CPU seconds per unit of work, shown in microseconds


def _change(before: float, after: float) -> str:
    if before <= 0:
        return "new"
    return f"{(after / before - 1) * 100:+.0f}%"


def vanished(before: Mapping[str, float], after: Mapping[str, float]) -> float:
    """The weight of the first setting's stacks whose path the second never sampled."""
    after_paths = _paths(build_tree(after))
    return sum(w for s, w in before.items() if tuple(s.split(";")) not in after_paths)
