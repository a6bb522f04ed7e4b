"""The cell of a suite: its server family's server running its workload's levels.

What the server is (how it is made, where its data comes from, what clients connect to, where
its status is read and what its counters mean) is the suite's family plugin's
(suites/families/); what runs on it (levels, clock, warmup) is the suite's workload
plugin's (suites/workloads/). This class only joins the two for suites.runner.cell.CellRunner, which
owns the life (start, proof, collectors, phases, stop, records). Workloads see the cell through
a suites.workloads.context.LevelContext, never this class.
"""

from __future__ import annotations

from servers import alloccount
from servers.allocstats import AllocStats
from servers.thpshim import keep_thp_library
from suites.families.base import Family, ServerLaunch
from suites.families.registry import family_for
from suites.runner.cell import CellRunner
from suites.workloads import registry as workloads
from suites.workloads.context import LevelContext
from suites.workloads.level_result import ClientTarget


class WorkloadCell(CellRunner):
    """A cell whose server is its family's and whose levels, clock and warmup are its workload's."""

    @property
    def family(self) -> Family:
        return family_for(self.ctx.server_section)

    @property
    def workload(self) -> workloads.Workload:
        return workloads.of(self.ctx.suite)

    # -- the family's part ------------------------------------------------------------------
    def prepare_datadir(self) -> dict:
        if not self.family.restores_dataset:
            return {"method": "empty", "seconds": 0.0}
        ds = self.ctx.dataset
        return ds.cache.restore(ds.key, self.family.datadir(self.work))

    def make_server(self, thp_disable: bool):
        suite, family = self.ctx.suite, self.family
        extra, late, env = (), (), {}
        if family.preloads and suite.thp.keep_server_thp:
            extra = (str(keep_thp_library()),)
            self.record["experiment"] = (
                "keep_server_thp: a preload shim ignored the server's prctl(PR_SET_THP_DISABLE), "
                "so the system THP mode reached its heap; MariaDB's own behaviour was changed"
            )
        first: tuple[str, ...] = ()
        if family.preloads and suite.memory.alloc_stats:
            self.alloc_stats = AllocStats(self.work)
            lib, env = self.alloc_stats.prepare()
            late = (lib,)
            if suite.memory.count_calls:
                # the exposure counter: read through alloc_stats' FIFO, so only beside it
                counter, counter_env = alloccount.prepare(self.work)
                first, env = (counter,), env | counter_env
        clients = suite.clients
        # A large-pages cell: the family's own setting puts its data cache on huge pages.
        section = self.ctx.server_section
        server = family.with_large_pages(section) if self.large_pages else section
        return family.make_server(
            ServerLaunch(
                binary=self.ctx.server_binary,
                workdir=self.work,
                server=server,
                allocator=self.ctx.allocator,
                engine=self.plan.engine,
                max_threads=suite.max_threads,
                prepared_statements=self.workload.prepared_statements(suite),
                thp_disable=thp_disable,
                bind_address=clients.server_address if clients.hosts else "127.0.0.1",
                first_preload=first,
                extra_preload=extra,
                late_preload=late,
                extra_env=env,
                memory_parts=suite.memory.parts,
                memory_account=self.workload.server_account,
            )
        )

    def pool_kb(self) -> int | None:
        return self.family.cache_kb(self.ctx.suite.server)

    def target(self) -> ClientTarget:
        return self.family.target(self.server, self.workload.database)

    def remote_target(self) -> ClientTarget:
        return self.family.remote_target(self.server, self.workload.database)

    def status_source(self):
        return self.family.status(self.server)

    def live_status_source(self):
        return self.family.live_status(self.server)

    def counters(self) -> dict[str, str]:
        return self.family.counters(self.plan.engine, self.ctx.server_binary)

    # -- the workload's part ----------------------------------------------------------------
    def workload_phases(self):
        return self.workload.phases(LevelContext(self))

    def block_levels(self, block_s: int):
        """The workload's levels as blocks (the alternate design, suites/runner/alternate.py)."""
        return self.workload.block_levels(LevelContext(self), block_s)

    def compose_blocks(self, results):
        return self.workload.compose_blocks(results)

    def level_clock(self) -> tuple[float | None, float | None, bool]:
        return self.workload.clock(self.ctx.suite)

    def warmup(self) -> dict | None:
        return self.workload.warmup(LevelContext(self))

    def warmup_throughput(self, t: float, tps: float, qps: float) -> None:
        """Warmup intervals go to the timeline only (no measured window: nothing is per-op)."""
        if self.collectors is not None:
            self.collectors.set_throughput(tps, qps)
