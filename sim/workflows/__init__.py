"""Deadline-constrained workflows (RM-DCWF): workflow generators, stream files, WfFormat, metrics."""
