"""Probes: context managers that measure around a workload."""
