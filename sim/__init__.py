"""schedlab's discrete-event cluster-scheduling simulator (a plain library: no Hydra, Ray or MLflow)."""

from sim.core import Cluster, InputError, Job, JobRecord, SimulationResult, Start, Workload, rigid_job
from sim.engine import SchedulingError, simulate

__version__ = "0.1.0"

__all__ = [
    "Cluster",
    "InputError",
    "Job",
    "JobRecord",
    "SchedulingError",
    "SimulationResult",
    "Start",
    "Workload",
    "rigid_job",
    "simulate",
]
