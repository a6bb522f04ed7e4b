"""`mallocsweep tune`: search an allocator's settings for the least memory at no resolved
throughput cost (space.py: the knobs; arms.py: a setting as a real arm of the runner;
objectives.py: a trial's figures from its run directory; study.py: the optuna search and its
journal; front.py: pareto.csv and the plot; dropin.py: the files a DBA installs)."""
