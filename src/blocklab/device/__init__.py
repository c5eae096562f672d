"""The device's own limits, measured with fio."""
