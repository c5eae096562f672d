"""Errors every layer may raise without importing the layer that defines the
rest of its vocabulary (the engines must not import spec.py, which imports them)."""


class SpecError(ValueError):
    """An experiment file or option that is wrong; the message says where and what is accepted."""
