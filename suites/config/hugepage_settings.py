"""Hugepage settings as one matrix dimension: what a cell's `thp` label stands for.

The suite's [thp] section names THP modes (or a named profile), defrag policies, khugepaged's
max_ptes_none and whether the buffer pool goes on explicit huge pages; each combination is one
HugepageSetting with a label, and the label is what a cell, a results row and a verdict call it
(the `thp` column). A suite that names only modes gets the labels it always had ("always",
"never"); a dimension with several values adds itself to the label ("always+defrag=defer",
"always+max_ptes_none=0"), and the buffer pool on explicit huge pages adds "+large-pages". Under
THP `never` (and `system`) defrag and max_ptes_none change nothing, so they make no extra cells.

Profiles are settings someone documented, by name: `mongodb-8` is what MongoDB 8.0's production
notes ask for with its per-CPU TCMalloc (THP enabled=always, defrag=defer+madvise, khugepaged
max_ptes_none=0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

THP_MODES = ("system", "always", "madvise", "never")
DEFRAG_MODES = ("always", "defer", "defer+madvise", "madvise", "never")
LARGE_PAGES = "large-pages"  # the label suffix of a setting with the buffer pool on hugetlb pages
# The setting every other is judged against (the report's verdicts): THP off, small pages.
BASELINE = "never"


@dataclass(frozen=True)
class HugepageSetting:
    """One hugepage setting of a cell: what is written to the system (None / "system": left as
    the machine has it) and whether the server's buffer pool is on explicit huge pages."""

    label: str
    enabled: str = "system"  # THP enabled: system, always, madvise, never
    defrag: str = "system"  # THP defrag, or system
    max_ptes_none: int | None = None  # khugepaged/max_ptes_none, or None (left alone)
    large_pages: bool = False  # the buffer pool on explicit huge pages (vm.nr_hugepages)
    profile: str | None = None  # the named profile it comes from

    @property
    def changes_thp(self) -> bool:
        return self.enabled != "system"

    def to_manifest(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "label"}


# Named profiles: (enabled, defrag, max_ptes_none, where it is documented)
PROFILES: dict[str, tuple[str, str, int | None, str]] = {
    "mongodb-8": (
        "always",
        "defer+madvise",
        0,
        "MongoDB 8.0 production notes: enable THP with its per-CPU TCMalloc "
        "(https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/)",
    ),
}


def settings_of(
    modes: list[str],
    defrag: str | list[str] = "system",
    max_ptes_none: list[int] | None = None,
    large_pages: list[bool] | None = None,
) -> list[HugepageSetting]:
    """Every setting the dimensions make, in the order the suite names them (modes first)."""
    defrags = list(defrag) if isinstance(defrag, list) else [defrag]
    ptes: list[int | None] = list(max_ptes_none or []) or [None]
    lps = list(large_pages or [False])
    out: list[HugepageSetting] = []
    for lp in lps:
        tail = f"+{LARGE_PAGES}" if lp else ""
        for mode in modes:
            if mode in PROFILES:
                enabled, d, p, _ = PROFILES[mode]
                out.append(HugepageSetting(mode + tail, enabled, d, p, lp, mode))
                continue
            if mode in ("never", "system"):
                # defrag and khugepaged change nothing when THP is off or left alone
                out.append(HugepageSetting(mode + tail, mode, "system", None, lp))
                continue
            for d in defrags:
                for p in ptes:
                    label = mode
                    if len(defrags) > 1:
                        label += f"+defrag={d}"
                    if len(ptes) > 1:
                        label += f"+max_ptes_none={p}"
                    out.append(HugepageSetting(label + tail, mode, d, p, lp))
    return list({s.label: s for s in out}.values())
