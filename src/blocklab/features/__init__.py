"""Features: what blocklab measures besides experiments, on any engine whose
package implements the feature's dialect (like the workloads'): each feature
module names its Dialect protocol and the engine-neutral measuring; an engine
without a dialect for it says why in its capabilities (`lacks`), and the
command refuses with that reason before anything runs.

    sysstats.py      system statistics (SREADTIM, MREADTIM, MBRC, MAXTHR) and the
                     optimizer costs they imply (engines/postgres/sysstats.py)
"""
