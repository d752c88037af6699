"""schedlab's Hydra launchers: ``hydra/launcher=ray`` fans a multirun out on Ray (a local instance or a
cluster), ``hydra/launcher=serial`` runs it in this process. Either plans each batch any sweeper hands it,
runs what is left and records it (:mod:`.batch`). The path of one run: ``docs/sweep-layer.md``.
"""
