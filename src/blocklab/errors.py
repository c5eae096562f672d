"""Errors every layer may raise without importing the layer that defines the
rest of its vocabulary (the engines must not import spec.py, which imports them)."""

from __future__ import annotations

from collections.abc import Iterable


class SpecError(ValueError):
    """An experiment file or option that is wrong; the message says where and what is accepted."""


def nearest(name: str, candidates: Iterable[str], prefix: str = "") -> str:
    """' (did you mean X?)' for the candidate nearest a misspelled name (by edit
    similarity, not alphabet), or '' when none is near enough to be a guess."""
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.7)
    if not close:
        return ""
    return f" (did you mean {' or '.join(prefix + c for c in close)}?)"
