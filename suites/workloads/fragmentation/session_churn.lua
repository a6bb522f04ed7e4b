-- mallocsweep fragmentation scenario "session churn" (sysbench 1.0 script, run through
-- mallocsweep.lua): every event is one whole client session, as an application pool without
-- persistent connections makes them. It connects, sets its own sort, join and temporary-table
-- buffer sizes (varied, so the server allocates and frees blocks of many sizes), prepares
-- `statements` server-side statements and runs them, runs a filesort, a GROUP BY into an implicit
-- temporary table and a join through the join buffer over a range of up to `rows` rows of the
-- sbtest tables, then closes its statements and disconnects. With a small thread_cache_size the
-- server thread that served the session exits too.

sysbench.cmdline.options = {
   tables = {"sbtest tables to read (sbtest1..N)", 2},
   table_size = {"rows per sbtest table", 10000},
   statements = {"server-side prepared statements per session", 8},
   rows = {"the largest range a sort, GROUP BY or join reads (each query picks a size up to it)", 2000},
}

-- Buffer sizes a session may ask for: 256 KiB to 8 MiB.
local SIZES = {262144, 524288, 1048576, 2097152, 4194304, 8388608}

local function pick(list)
   return list[sysbench.rand.uniform(1, #list)]
end

function thread_init()
   drv = sysbench.sql.driver()
end

function event()
   local con = drv:connect()
   local tmp = pick(SIZES) * 2
   con:query(string.format(
      "SET SESSION sort_buffer_size = %d, join_buffer_size = %d, " ..
      "tmp_table_size = %d, max_heap_table_size = %d",
      pick(SIZES), pick(SIZES), tmp, tmp))
   local tables, size = sysbench.opt.tables, sysbench.opt.table_size
   local stmts = {}
   for i = 1, sysbench.opt.statements do
      local t = sysbench.rand.uniform(1, tables)
      local s = con:prepare(string.format("SELECT c FROM sbtest%d WHERE id = ?", t))
      local p = s:bind_create(sysbench.sql.type.INT)
      s:bind_param(p)
      p:set(sysbench.rand.uniform(1, size))
      s:execute()
      stmts[#stmts + 1] = s
   end
   local most = math.min(sysbench.opt.rows, size - 1)
   local n = sysbench.rand.uniform(math.max(1, math.floor(most / 8)), most)
   local a = sysbench.rand.uniform(1, size - n)
   local t1 = sysbench.rand.uniform(1, tables)
   local t2 = sysbench.rand.uniform(1, tables)
   -- a filesort: ORDER BY columns without an index
   con:query(string.format(
      "SELECT id, c FROM sbtest%d WHERE id BETWEEN %d AND %d ORDER BY c, pad", t1, a, a + n))
   -- GROUP BY an expression: an implicit temporary table with many groups
   con:query(string.format(
      "SELECT SUBSTRING(c, 1, 5) AS g, COUNT(*), MAX(pad) FROM sbtest%d " ..
      "WHERE id BETWEEN %d AND %d GROUP BY g ORDER BY NULL", t1, a, a + n))
   -- a join on columns without an index: through the join buffer
   local m = math.max(1, math.floor(n / 4))
   local b = sysbench.rand.uniform(1, size - m)
   con:query(string.format(
      "SELECT COUNT(*), MAX(x.c) FROM sbtest%d x JOIN sbtest%d y ON y.pad = x.pad " ..
      "WHERE x.id BETWEEN %d AND %d AND y.id BETWEEN %d AND %d",
      t1, t2, a, a + n, b, b + m))
   for _, s in ipairs(stmts) do
      s:close()
   end
   con:disconnect()
end
