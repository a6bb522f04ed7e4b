-- mallocsweep fragmentation scenario "table cache churn" (sysbench 1.0 script, run through
-- mallocsweep.lua): `tc_tables` small tables (tc_1..N) read at random, one point read per event,
-- by clients that keep their connection. With table_open_cache and table_definition_cache well
-- below N (mallocsweep sets them for the scenario), the server opens and closes table handlers
-- and definitions all the time: the allocations a schema of thousands of tables makes.

sysbench.cmdline.options = {
   tc_tables = {"small tables (tc_1..N)", 1000},
   tc_rows = {"rows per table", 10},
   engine = {"storage engine of the tables", "InnoDB"},
}

local function create(con, i)
   con:query(string.format(
      "CREATE TABLE IF NOT EXISTS tc_%d (id INT NOT NULL PRIMARY KEY, v VARCHAR(64) NOT NULL) " ..
      "ENGINE = %s", i, sysbench.opt.engine))
   local rows = {}
   for r = 1, sysbench.opt.tc_rows do
      rows[#rows + 1] = string.format("(%d, '%s')", r, sysbench.rand.string("row-####-####-####"))
   end
   con:query(string.format("INSERT INTO tc_%d (id, v) VALUES %s", i, table.concat(rows, ",")))
end

function cmd_prepare()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   for i = sysbench.tid % sysbench.opt.threads + 1, sysbench.opt.tc_tables, sysbench.opt.threads do
      create(con, i)
   end
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare, sysbench.cmdline.PARALLEL_COMMAND},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
end

function thread_done()
   con:disconnect()
end

function event()
   con:query(string.format("SELECT v FROM tc_%d WHERE id = %d",
      sysbench.rand.uniform(1, sysbench.opt.tc_tables),
      sysbench.rand.uniform(1, sysbench.opt.tc_rows)))
end
