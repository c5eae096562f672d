"""Exporters, one per format, returning bytes; a writer does the I/O."""
