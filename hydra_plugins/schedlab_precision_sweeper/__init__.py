"""A Hydra sweeper that adds replications until each cell's confidence interval is tight enough.

Select it with ``hydra/sweeper=precision``; see :mod:`.precision_sweeper` for the options. The
stopping rule is :mod:`sim.precision`; the runs go through whichever launcher is configured.
"""
