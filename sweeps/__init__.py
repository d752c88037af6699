"""Sweeps: Hydra-composed simulator runs fanned out on Ray and tracked in MLflow.

Entry point: ``python sweeps/run.py -m policy=easy,conservative seed='range(0,10)'``.
"""
