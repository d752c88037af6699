"""A Hydra launcher that fans a multirun out on Ray (a local instance or an existing cluster).

Select it with ``hydra/launcher=ray``; see :mod:`.ray_launcher` for the options and
:mod:`.hooks` for the driver-side hook that receives each run's result as it finishes.
"""
