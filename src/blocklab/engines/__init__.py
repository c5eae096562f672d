"""Engines: one file per engine behind the protocol in base.py."""
