"""Workloads: one file per workload."""
