"""Workload plugins (registry.py registers them by `[suite] kind`): what a workload declares
(base.py), the narrow context its levels get (context.py), the level loop and client processes
they share, and each workload with its mechanics (sysbench/, iibench/, rww/)."""
