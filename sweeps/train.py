"""Train a :class:`~sim.policies.learned.LearnedPolicy` by evolution strategies on Ray (numpy and Ray only).

    python sweeps/train.py                                   # conf/'s cluster and workload → models/learned.npz
    python sweeps/train.py cluster=hpc16 workload.jobs=500 --iterations 40 --out /tmp/w.npz

OpenAI-style ES (Salimans et al. 2017): each iteration draws ``pairs`` antithetic perturbations θ ± σε of
the network's parameters, plays every candidate on the same ``seeds_per_iteration`` training workloads
(common random numbers) as one Ray task, ranks the candidates by −mean log bsld/mean (the simulator's
metric, :func:`sim.run.run`), and steps θ with Adam along the rank-weighted ε. Every ``validate_every``
iterations θ is played on the validation seeds; the weights kept are the best θ there.

Seeds: training draws seed ``TRAIN_SEEDS + i·k + j`` (≥ 10,000), validation ``VALIDATION_SEEDS`` (1,000 …),
so the evaluation seeds of ``experiment=learned`` (100–109) are never seen. The run is recorded in MLflow
(``tracking`` of the config, experiment ``schedlab-train``): settings as params, the curve as metrics by
iteration, the weights as an artifact, their sha256 as a tag.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository on the path, as sweeps/run.py does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.core import Cluster, InputError
from sim.policies.learned import BACKFILLS, KernelNet, NetPolicy
from sim.policies.loading import policy_from_conf
from sim.run import run
from sweeps.env_config import compose_config, sized_parts
from sweeps.task import RunParts

TRAIN_SEEDS = 10_000
VALIDATION_SEEDS = tuple(range(1000, 1004))
EXPERIMENT = "schedlab-train"


@dataclass(frozen=True)
class Settings:
    """What a training run does (all logged as its MLflow params)."""

    iterations: int = 60
    pairs: int = 8
    seeds_per_iteration: int = 4
    sigma: float = 0.1
    learning_rate: float = 0.05
    hidden: tuple[int, ...] = (16, 8)
    window: int = 32
    backfill: str = "easy"
    validate_every: int = 5
    init_seed: int = 0
    out: str = "models/learned.npz"

    def __post_init__(self) -> None:
        for name in ("iterations", "pairs", "seeds_per_iteration", "window", "validate_every"):
            if getattr(self, name) <= 0:
                raise InputError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if not self.sigma > 0 or not self.learning_rate > 0 or any(h <= 0 for h in self.hidden):
            raise InputError("--sigma, --learning-rate and every --hidden width must be positive")
        if self.backfill not in BACKFILLS:
            raise InputError(f"--backfill must be one of {', '.join(BACKFILLS)}, got {self.backfill!r}")


@dataclass(frozen=True)
class Problem:
    """Where episodes are played: the config's cluster, and its workload spec and engine options (``parts``,
    checked as a run's are: :func:`sweeps.env_config.sized_parts`)."""

    cluster: Cluster
    parts: RunParts

    def bsld(self, policy: Any, seed: int) -> float:
        """bsld/mean of ``policy`` on the jobs of ``seed`` (those of a sweep's run with that seed)."""
        jobs = self.parts.workload.build(np.random.default_rng(seed), self.cluster)
        return run(jobs, self.cluster, policy, kill_at_limit=self.parts.kill_at_limit,
                   drop_oversized=self.parts.drop_oversized).summary["bsld/mean"]


def score(problem: Problem, template: KernelNet, theta: np.ndarray, seeds: Sequence[int]) -> list[float]:
    """bsld/mean of the network θ on each seed (one Ray task)."""
    net = template.with_vector(theta)
    return [problem.bsld(NetPolicy(net), seed) for seed in seeds]


def centered_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks scaled to [−0.5, 0.5] (ties by position), so one outlier seed cannot dominate a step.

    >>> centered_ranks(np.array([3.0, -1.0, 10.0])).tolist()
    [0.0, -0.5, 0.5]
    """
    ranks = np.empty(len(values))
    ranks[np.argsort(values, kind="stable")] = np.arange(len(values))
    return ranks / (len(values) - 1) - 0.5


@dataclass
class Adam:
    """Adam (Kingma & Ba) ascending a gradient estimate."""

    rate: float
    m: np.ndarray
    v: np.ndarray
    t: int = 0

    def step(self, theta: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * gradient
        self.v = 0.999 * self.v + 0.001 * gradient**2
        m_hat, v_hat = self.m / (1 - 0.9**self.t), self.v / (1 - 0.999**self.t)
        return theta + self.rate * m_hat / (np.sqrt(v_hat) + 1e-8)


def fitness(bslds: Sequence[float]) -> float:
    """What ES maximises: −mean log bsld/mean over the seeds (each seed's scale counts alike)."""
    return -float(np.mean(np.log(bslds)))


def train(problem: Problem, settings: Settings, record: TrainingRun | None = None) -> Path:
    """Train on ``problem``; write the best-on-validation weights to ``settings.out``."""
    import ray
    from tqdm import tqdm

    template = KernelNet.initial(np.random.default_rng(settings.init_seed), settings.hidden, settings.window,
                                 settings.backfill)
    rng = np.random.default_rng(settings.init_seed + 1)
    theta = template.vector()
    adam = Adam(settings.learning_rate, np.zeros_like(theta), np.zeros_like(theta))
    remote = ray.remote(score)
    shared = (ray.put(problem), ray.put(template))
    baselines = {name: [problem.bsld(policy_from_conf(name), s) for s in VALIDATION_SEEDS] for name in ("fcfs", "easy")}
    start = ray.get(remote.remote(*shared, theta, list(VALIDATION_SEEDS)))  # the untrained network
    log(record, {f"valid/bsld_{name}": float(np.mean(v)) for name, v in baselines.items()}
        | {"valid/bsld_mean": float(np.mean(start))}, 0)
    best = (fitness(start), theta, 0)
    tic = time.perf_counter()
    bar = tqdm(range(1, settings.iterations + 1), desc="ES", unit="it", dynamic_ncols=True)
    for iteration in bar:
        seeds = [TRAIN_SEEDS + (iteration - 1) * settings.seeds_per_iteration + j
                 for j in range(settings.seeds_per_iteration)]
        eps = rng.standard_normal((settings.pairs, theta.size))
        candidates = [*(theta + settings.sigma * eps), *(theta - settings.sigma * eps), theta]
        results = ray.get([remote.remote(*shared, c, seeds) for c in candidates])
        fits = np.array([fitness(r) for r in results[:-1]])
        ranks = centered_ranks(fits)
        gradient = (ranks[:settings.pairs] - ranks[settings.pairs:]) @ eps / (2 * settings.pairs * settings.sigma)
        metrics = {"train/bsld_mean": float(np.mean(results[-1])), "train/fitness_center": fitness(results[-1]),
                   "train/fitness_population": float(fits.mean()), "seconds": time.perf_counter() - tic}
        if iteration % settings.validate_every == 0 or iteration == settings.iterations:
            valid = ray.get(remote.remote(*shared, theta, list(VALIDATION_SEEDS)))
            metrics["valid/bsld_mean"] = float(np.mean(valid))
            if fitness(valid) > best[0]:
                best = (fitness(valid), theta.copy(), iteration)
            bar.set_postfix(valid_bsld=f"{metrics['valid/bsld_mean']:.1f}", easy=f"{np.mean(baselines['easy']):.1f}")
        log(record, metrics, iteration)
        theta = adam.step(theta, gradient)
    out = template.with_vector(best[1]).save(settings.out)
    log(record, {"best_iteration": best[2], "seconds": time.perf_counter() - tic}, settings.iterations)
    return out


def log(record: TrainingRun | None, metrics: dict[str, float], step: int) -> None:
    """Metrics of one iteration into the training run (nothing without one)."""
    if record is None:
        return
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    record.client.log_batch(record.run_id, metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])


class TrainingRun:
    """The MLflow run of one training: opened in the config's store, FINISHED with the weights as an
    artifact, FAILED (or KILLED on Ctrl-C) otherwise."""

    def __init__(self, cfg: dict[str, Any], settings: Settings, overrides: Sequence[str]) -> None:
        from mlflow.entities import Param

        from sweeps.tracking import open_store, param_value

        tracking = cfg.get("tracking") or {}
        self.store = open_store(tracking["uri"], EXPERIMENT, tracking.get("artifact_root"))
        self.client = self.store.client
        run = self.client.create_run(self.store.experiment_id, run_name=f"es {Path(settings.out).name}",
                                     tags={"schedlab.overrides": " ".join(overrides)})
        self.run_id = run.info.run_id
        params = {**{k: v for k, v in asdict(settings).items()}, "train_seeds_from": TRAIN_SEEDS,
                  "validation_seeds": list(VALIDATION_SEEDS), "cluster": cfg["cluster"], "workload": cfg["workload"]}
        self.client.log_batch(self.run_id, params=[Param(k, param_value(v)) for k, v in params.items()])

    def finish(self, weights: Path) -> None:
        self.client.set_tag(self.run_id, "schedlab.weights_sha256", hashlib.sha256(weights.read_bytes()).hexdigest())
        self.client.log_artifact(self.run_id, str(weights))
        self.client.set_terminated(self.run_id, status="FINISHED")

    def fail(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


def main(argv: Sequence[str] | None = None) -> int:
    defaults = Settings()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("overrides", nargs="*", help="config overrides (cluster=…, workload.jobs=…, tracking=none)")
    for name, value in asdict(defaults).items():
        flag = f"--{name.replace('_', '-')}"
        if name == "hidden":
            p.add_argument(flag, type=lambda s: tuple(int(x) for x in s.split(",")), default=value,
                           help="hidden layer widths (default: 16,8)")
        else:
            p.add_argument(flag, type=type(value), default=value, help="(default: %(default)s)")
    p.add_argument("--workers", type=int, default=None, help="CPUs of the local Ray instance (default: all)")
    args = p.parse_args(argv)
    try:
        settings = Settings(**{k: getattr(args, k) for k in asdict(defaults)})
        cfg = compose_config(args.overrides)
        problem = Problem(*sized_parts(cfg, "training"))
        record = TrainingRun(cfg, settings, args.overrides) if (cfg.get("tracking") or {}).get("uri") else None
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    import ray

    address = os.environ.get("RAY_ADDRESS") or "local"
    ray.init(address=address, num_cpus=args.workers if address == "local" else None, include_dashboard=False,
             logging_level="WARNING")
    status = "FAILED"
    try:
        out = train(problem, settings, record)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        print("interrupted: no weights written", file=sys.stderr)
        return 130
    finally:
        if record is not None and status != "FINISHED":
            record.fail(status)
        ray.shutdown()
    if record is not None:
        record.finish(out)
    print(f"weights: {out}" + (f"; MLflow run {record.run_id} in experiment {EXPERIMENT!r} of {cfg['tracking']['uri']}"
                               if record else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
