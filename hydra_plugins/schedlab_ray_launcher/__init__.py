"""schedlab's sweeper and a Hydra launcher that fans a multirun out on Ray (a local instance or a cluster).

``hydra/sweeper=schedlab`` (:mod:`.sweeper`) plans each batch and hands the runs left to do to the
launcher; ``hydra/launcher=ray`` (:mod:`.ray_launcher`) runs them, a :class:`.batch.Sink` taking each
result as it finishes. The path of one run: ``docs/sweep-layer.md``.
"""
