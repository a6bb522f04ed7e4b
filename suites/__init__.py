"""What runs: the CLI, the matrix planner and runner, and the workloads (sysbench sweep, iibench)."""
