"""blocklab: a laboratory for database storage parameters."""

__version__ = "0.1.0"
