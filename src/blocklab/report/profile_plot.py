"""The time-profile figure: stacked bars of time by class per setting
(probes/profile_view.py computes the profiles)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..engines.base import Capabilities
from ..probes.profile import CPU, UNACCOUNTED, SessionProfile
from ..probes.profile_view import AWR_CAPTION, OTHER, SettingProfile, is_awr, setting_profiles, short_labels

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure


def method_caption(profiles: list[SettingProfile], capabilities: Capabilities) -> str:
    """How the time was attributed, for a figure's caption: the engine's own words
    (its Capabilities.time_profile), or the AWR report's."""
    if profiles and all(is_awr(sp) for sp in profiles):
        return AWR_CAPTION
    if capabilities.time_profile is None:
        return "the engine does not say how it attributes its sessions' time"
    return capabilities.time_profile.method


_PALETTE = ["#1f5fa8", "#e0701f", "#7b4fa0", "#c0392b", "#2a9d8f", "#b8860b", "#8c564b", "#e377c2"]
_CPU_COLOUR = "#3c9a3c"
_UNACCOUNTED_COLOUR = "#bdbdbd"
_OTHER_COLOUR = "#7f7f7f"


def profile_figure(rows: Any, describe: Callable[[str], str] | None = None, order: Iterable[str] | None = None, top: int = 6) -> Figure | None:
    """Stacked horizontal bars of time by class per setting: the slowest
    session (left) and all sessions summed (right). The `top` wait events
    over the whole run get their own colour; the rest is "other waits".
    Returns a matplotlib Figure (Agg, no pyplot), or None when no row has a profile."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    profiles = setting_profiles(rows, order)
    if not profiles:
        return None
    weight: dict[str, float] = {}
    for sp in profiles:
        for name, seconds in sp.total.waits.items():
            weight[name] = weight.get(name, 0.0) + seconds / max(sp.total.elapsed_s, 1e-9)
    events = [n for n, _ in sorted(weight.items(), key=lambda kv: -kv[1])[:top]]
    classes = [*events, OTHER, CPU, UNACCOUNTED]
    colours = {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(events)}
    colours.update({OTHER: _OTHER_COLOUR, CPU: _CPU_COLOUR, UNACCOUNTED: _UNACCOUNTED_COLOUR})

    height = max(3.0, 1.2 + 0.45 * len(profiles))
    fig = Figure(figsize=(12.0, height), layout="constrained")
    FigureCanvasAgg(fig)
    instance_only = all(sp.slowest is None for sp in profiles)
    axes = [fig.subplots(1, 1)] if instance_only else list(fig.subplots(1, 2, sharey=True))
    panels = [(axes[0], "total", "DB time, all sessions (AWR)")] if instance_only else [
        (axes[0], "slowest", "the slowest session"), (axes[1], "total", "all sessions, summed")]
    if describe is None:
        describe = short_labels(profiles).__getitem__
    labels = [describe(sp.label) for sp in profiles]
    ypos = list(range(len(profiles)))
    for ax, which, title in panels:
        left = [0.0] * len(profiles)
        for cls in classes:
            widths = []
            for sp in profiles:
                p: SessionProfile = getattr(sp, which) or sp.total
                parts = p.parts()
                if cls == OTHER:
                    widths.append(sum(v for k, v in p.waits.items() if k not in events))
                else:
                    widths.append(max(0.0, parts.get(cls, 0.0)))
            if not any(widths):
                continue
            ax.barh(ypos, widths, left=left, color=colours[cls], label=cls, height=0.7, edgecolor="white", linewidth=0.5)
            left = [a + b for a, b in zip(left, widths)]
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_xlabel("seconds")
        ax.grid(axis="x", color="#e3e3e3")
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(ypos, labels)
    axes[0].invert_yaxis()
    seen: dict[str, Artist] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(name, handle)
    names = [c for c in classes if c in seen]
    handles = [seen[n] for n in names]
    fig.legend(handles, names, loc="outside lower center", ncol=min(5, len(names)), frameon=False, fontsize=9)
    fig.suptitle("Where the time went, per setting (seconds by time source)", fontsize=13, fontweight="bold")
    return fig


__all__ = ["method_caption", "profile_figure"]
