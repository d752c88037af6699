"""A researcher's own scheduling policies, kept outside schedlab (the worked example of the README's
"Write your own policy"): :class:`mysched.edf.EdfWorkflow`, earliest-deadline-first for
deadline-constrained workflows. Its configs live in ``../myconf/policy/``."""
