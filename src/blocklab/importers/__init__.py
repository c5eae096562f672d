"""Results Oracle DBAs already hold, read into blocklab's own shapes.

One module per foreign format, each returning ordinary result rows or
calibration objects; rundir.py and limits.py write them as run directories
(`blocklab import ...`, cli_import.py). Formats and their sources:
../shared/ORACLE-FORMATS.md.

    awr.py           AWR text reports, 11g to 19c (parser)
    awr_info.py      SLOB's awr_info.sh output
    slob.py          SLOB points from either, by sessions, update % and block size
    profile.py       time profiles (seed 002's TIMESOURCE / SECONDS / PERCENTAGE)
    orion.py         ORION's summary and matrices -> a device calibration
    calibrate_io.py  CALIBRATE_IO output, DBA_RSRC_IO_CALIBRATE -> device limits
    aux_stats.py     SYS.AUX_STATS$ -> system statistics beside blocklab's own

Every parser is strict about what it cannot read: ImportInputError names the
file, the line and the field, and no number is guessed.
"""

from .common import ImportInputError, ImportOptionError

__all__ = ["ImportInputError", "ImportOptionError"]
