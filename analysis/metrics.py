"""The one table of metrics every verdict is given on: what each is called, on which scale it is
compared, which way is better, the words a reader sees, and how a server life's value is taken.

Every judged figure of mallocsweep is a `Metric` registered here: the allocator verdicts
(analysis/verdicts.py), the upgrade check (analysis/upgrade.py), the hugepage verdicts
(analysis/hugepage_verdicts.py), the read-while-writing RSS comparison (analysis/rww_tables.py),
the fragmentation scenarios (analysis/growth.py) and `compare` (analysis/compare.py). The judge
(analysis/judge.py) reads a metric's scale and direction from here and nothing else; the tables
read its words. A verdict is BETTER, WORSE, NONE or UNDECIDED: which of "faster" or "less memory"
a reader sees is the metric's `word`, never the outcome itself (a memory verdict is never called
"faster").

Scales:
  LOG   positive values compared as a ratio (allocator / baseline) on the log scale; a value that
        is zero or negative refuses the whole point, with a notice (analysis/judge.py);
  DIFF  values that may be zero or negative (growth), compared as a difference in the metric's
        unit and shown as the ratio 1 + difference / norm, where the norm (the baseline's mean
        RSS at stop, for memory) is given with the values; a point without a positive norm is
        refused, with a notice.

How another module registers a new metric (the whole recipe; nothing else changes):

    1. Add one entry below, in this module:

           EXPOSURE = register(Metric(
               name="exposure",                 # what verdicts.csv's `metric` column says
               text="exposure per query",       # what a table calls it
               scale=LOG,                       # or DIFF (then pass a norm to the judge)
               higher_is_better=False,
               better="less exposed", worse="more exposed",   # the reader's words
               life="the life's median over its levels",      # how a life's value is taken
               unit="",                         # DIFF: the unit of a difference ("kB", "MB/h")
               memory=False,                    # True: a memory figure (the glance says so)
           ))

       `register` refuses a name twice, so two branches cannot give one name two meanings.
    2. Write its value function in the metric's own module: one value per server life,
       `allocator -> round -> value` for each point (see analysis/verdicts.py
       `throughput_points` and analysis/growth.py `verdict_points`).
    3. Judge it with analysis/judge.py `judge(METRICS["exposure"], values, baseline, design,
       norm=...)` and make `Verdict`s of the result (analysis/verdicts.py `run_verdicts` shows
       how); every table, verdicts.csv and the console then say it in its words.
"""

from __future__ import annotations

from dataclasses import dataclass

LOG, DIFF = "log ratio", "difference"
# What a judged point says, whatever the metric: the metric's words say it to a reader.
BETTER, WORSE, NONE, UNDECIDED = "better", "worse", "none", "undecided"
OUTCOMES = (BETTER, WORSE, NONE, UNDECIDED)
DECIDED = (BETTER, WORSE, NONE)


@dataclass(frozen=True)
class Metric:
    name: str
    text: str  # a table's name for it
    scale: str  # LOG or DIFF
    higher_is_better: bool
    better: str  # the reader's word for BETTER ("faster", "less memory", ...)
    worse: str  # ... and for WORSE
    life: str  # how one server life's value is taken (the report and this table say so)
    unit: str = ""  # DIFF: the unit of a difference
    memory: bool = False  # a memory figure: the glance table labels it "memory: ..."
    same: str = ""  # a word for NONE other than "none" (the upgrade interaction: carries over)

    def __post_init__(self) -> None:
        if self.scale not in (LOG, DIFF):
            raise ValueError(f"metric {self.name}: scale {self.scale!r} is not LOG or DIFF")

    def word(self, outcome: str) -> str:
        """The outcome in this metric's words: "faster", "more memory", "none", "undecided"."""
        if outcome == BETTER:
            return self.better
        if outcome == WORSE:
            return self.worse
        if outcome == NONE and self.same:
            return self.same
        return outcome


METRICS: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    """Add a metric to the table; a name registered twice is an error (one name, one meaning)."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is registered twice")
    METRICS[metric.name] = metric
    return metric


_LEVEL_LIFE = "the median of the life's rows at the point (a churn life's cycles count once)"
_STOP_LIFE = "the last reading before the server's shutdown"
_GROWTH_LIFE = "the reading before shutdown minus the reading after start"
_CYCLE_LIFE = (
    "the least-squares slope of RSS against each cycle's end time over all the life's cycles, "
    "in MB per hour (analysis/growth_rate.py)"
)

# -- per level (a workload at a thread count) -----------------------------------------------------
THROUGHPUT = register(
    Metric("throughput", "throughput", LOG, True, "faster", "slower", _LEVEL_LIFE)
).name
LAT_P95 = register(
    Metric("lat_p95", "p95 latency", LOG, False, "lower p95", "higher p95", _LEVEL_LIFE)
).name

# -- per server life ----------------------------------------------------------------------------
RSS_STOP = register(
    Metric("rss_stop", "RSS at stop", LOG, False, "less memory", "more memory", _STOP_LIFE,
           memory=True)
).name  # fmt: skip
RSS_GROWTH = register(
    Metric("rss_growth", "RSS growth", DIFF, False, "grows less", "grows more", _GROWTH_LIFE,
           unit="kB", memory=True)
).name  # fmt: skip
# RSS plus the server's hugetlb pages (VmRSS leaves explicit huge pages out): the hugepage study's
# memory, a different figure from RSS alone, so a different metric.
MEMORY_STOP = register(
    Metric("memory_stop", "memory at stop (RSS + hugetlb)", LOG, False, "less memory",
           "more memory", _STOP_LIFE, memory=True)
).name  # fmt: skip
MEMORY_GROWTH = register(
    Metric("memory_growth", "memory growth", DIFF, False, "grows less", "grows more",
           _GROWTH_LIFE, unit="kB", memory=True)
).name  # fmt: skip

# -- the fragmentation scenarios: growth in MB per hour, compared as a difference (arm - baseline)
# in MB/h with its own interval, never as a ratio of two slopes (analysis/growth_rate.py estimates
# each life's slope with its standard error and combines the rounds' differences by weight) -------
RSS_GROWTH_MB_PER_HOUR = register(
    Metric("rss_growth_mb_per_hour", "RSS growth per hour", DIFF, False, "grows less",
           "grows more", _CYCLE_LIFE, unit="MB/h", memory=True)
).name  # fmt: skip
HELD_GROWTH_MB_PER_HOUR = register(
    Metric("held_growth_mb_per_hour", "held growth per hour", DIFF, False, "holds less",
           "holds more", _CYCLE_LIFE, unit="MB/h", memory=True)
).name  # fmt: skip
BURST_RETURNED = register(
    Metric("burst_returned", "burst returned", DIFF, True, "returns more", "returns less",
           "the median over the life's bursts of the share returned", unit="share",
           memory=True)
).name  # fmt: skip

# -- between two servers of one run (analysis/upgrade.py) ----------------------------------------
# (NEW_a / NEW_g) / (BASE_a / BASE_g): how allocator a's advantage over the baseline allocator g
# moved with the upgrade. Either direction is a change.
INTERACTION = register(
    Metric("interaction", "allocator vs baseline allocator", LOG, True, "changes", "changes",
           _LEVEL_LIFE, same="carries over")
).name  # fmt: skip

# -- `compare` between two runs (analysis/compare.py: independent lives, Welch) -------------------
# A memory figure's change as a share of BASE's mean RSS at the end.
MEMORY_CHANGE = register(
    Metric("memory_change", "memory figure", DIFF, False, "less memory", "more memory",
           "the cell's figure (RSS growth, the allocator's in use or cached at the end)",
           unit="kB", memory=True)
).name  # fmt: skip
