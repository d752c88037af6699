"""Scheduling policies: one protocol (:mod:`sim.policies.base`), one small class or factory per family.

``conf/policy/*.yaml`` is the registry: each file names its class or factory as ``_target_`` with
its options, and :func:`policy_from_conf` builds one (``policy_from_conf("easy", order="sjf")``);
:func:`build_policy` builds any ``package.module:Class``. Importing this package imports no family:
the fair-share and workflow ones pull in numpy, the RM-DCWF planner or OR-Tools.
"""

from __future__ import annotations

from sim.policies.base import BasePolicy, EngineView, Policy
from sim.policies.loading import build_policy, check_policy_target, policy_from_conf

__all__ = ["BasePolicy", "EngineView", "Policy", "build_policy", "check_policy_target", "policy_from_conf"]
