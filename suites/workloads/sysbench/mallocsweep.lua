-- mallocsweep's sysbench 1.0.20 wrapper: run a workload's script unchanged (a stock one of
-- sysbench's, or the user's own), record what it measured.
--
-- Why a wrapper and not sysbench's own output:
--   * the built-in JSON reporter writes invalid JSON, and the human report has one percentile;
--   * --histogram prints the distribution as a text table, and deadlocks when a run completes
--     zero events (sb_histogram_print returns with its lock held).
-- So this script loads the workload's script (its event(), thread_init(), commands and options
-- stay exactly as written): a stock one by its module name ($MALLOCSWEEP_WORKLOAD, `require`d
-- from sysbench's data dir), or the user's own by its path ($MALLOCSWEEP_SCRIPT, run with its own
-- directory first on package.path, so that its own modules are found). Then it adds report hooks that append one JSON object per line to $MALLOCSWEEP_OUT:
--   {"type":"interval", ...}   every --report-interval, from sysbench.hooks.report_intermediate
--   {"type":"histogram", ...}  the full latency histogram (1024 log buckets), once, at the end
--   {"type":"cumulative", ...} the whole run, from sysbench.hooks.report_cumulative
--   {"type":"report_thread", "tid":N}  once, from sysbench's report thread as it starts (below)
-- Interval records carry "tid", the kernel thread id of the thread that ran the hook.
-- Both hooks also print sysbench's own human-readable report (via its C reporters), so the raw
-- log reads exactly as a plain sysbench run does.
--
-- Where the histogram comes from: sysbench keeps its latency histogram in the exported C global
-- sb_latency_histogram. Its cumulative report *resets* that histogram before calling the
-- cumulative hook, so the hook cannot read it. Instead every worker, in thread_done() (after its
-- last event was recorded), counts itself finished; the worker that sees all --threads finished
-- merges the per-slot counts (sb_histogram_get_pct_cumulative, which takes the histogram's lock
-- and does not reset) and dumps the cumulative array. Nothing reads it while sysbench writes it.

local ffi = require("ffi")

local workload = os.getenv("MALLOCSWEEP_WORKLOAD")
local script = os.getenv("MALLOCSWEEP_SCRIPT")
local check_path = os.getenv("MALLOCSWEEP_CHECK")
local out_path = os.getenv("MALLOCSWEEP_OUT")
local done_path = os.getenv("MALLOCSWEEP_DONE")
if not (workload or script) or not (check_path or (out_path and done_path)) then
   error("mallocsweep.lua needs MALLOCSWEEP_WORKLOAD or MALLOCSWEEP_SCRIPT, and MALLOCSWEEP_OUT " ..
         "and MALLOCSWEEP_DONE (or MALLOCSWEEP_CHECK)")
end

if script then
   local dir = script:match("^(.*)/[^/]*$") or "."
   package.path = dir .. "/?.lua;" .. package.path
   dofile(script)
else
   require(workload)
end

-- MALLOCSWEEP_CHECK (`sysbench mallocsweep.lua help`, when a suite is read): say what the script
-- defines, as one JSON object in that file, and add nothing else.
if check_path then
   local commands = type(sysbench.cmdline.commands) == "table" and sysbench.cmdline.commands or {}
   local function has(name)
      return type(commands[name]) == "table" or type(_G[name]) == "function"
   end
   local names = {}
   for name, _ in pairs(type(sysbench.cmdline.options) == "table" and sysbench.cmdline.options or {}) do
      names[#names + 1] = string.format("%q", tostring(name))
   end
   table.sort(names)
   local f = assert(io.open(check_path, "w"))
   f:write(string.format('{"event":%s,"prepare":%s,"cleanup":%s,"options":[%s]}\n',
                         tostring(type(event) == "function"), tostring(has("prepare")),
                         tostring(has("cleanup")), table.concat(names, ",")))
   f:close()
   return
end

-- Layouts of sysbench 1.0.20 (src/sb_histogram.h, src/sysbench.h) under names of our own, so
-- they cannot clash with sysbench's opaque declarations. The histogram's array size and range
-- are checked against the fixed values sysbench initialises it with before anything is dumped.
ffi.cdef [[
typedef struct {
  uint64_t *cumulative_array;
  uint64_t cumulative_nevents;
  uint64_t *temp_array;
  uint64_t **interm_slots;
  size_t array_size;
  double range_min;
  double range_max;
  double range_deduct;
  double range_mult;
} mallocsweep_hist_t;

typedef struct {
  uint32_t threads_running;
  double time_interval;
  double time_total;
  double latency_pct;
  double latency_min;
  double latency_max;
  double latency_avg;
  double latency_sum;
  uint64_t events;
  uint64_t reads;
  uint64_t writes;
  uint64_t other;
  uint64_t errors;
  uint64_t reconnects;
  uint64_t queue_length;
  uint64_t concurrency;
} mallocsweep_stat_t;

extern mallocsweep_hist_t sb_latency_histogram;
double sb_histogram_get_pct_cumulative(mallocsweep_hist_t *h, double percentile);
void db_report_intermediate(mallocsweep_stat_t *stat);
void db_report_cumulative(mallocsweep_stat_t *stat);
long syscall(long number, ...);
]]

local HIST_SIZE, HIST_MIN, HIST_MAX = 1024, 0.001, 100000

-- gettid(2) by its syscall number (glibc's gettid() wrapper is 2.30+ only).
local SYS_GETTID = ({ x64 = 186, arm64 = 178, ppc64le = 207, ppc64 = 207 })[ffi.arch]

local function kernel_tid()
   if not SYS_GETTID then
      return nil
   end
   return tonumber(ffi.C.syscall(SYS_GETTID))
end

local function num(v)
   -- JSON numbers: integers exactly, others with full double precision; never nan/inf.
   v = tonumber(v) or 0
   if v ~= v or v == math.huge or v == -math.huge then
      return "null"
   end
   if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      return string.format("%d", v)
   end
   return string.format("%.17g", v)
end

local function append(line)
   -- One write(2) per record on an O_APPEND file: records from the report thread, the workers
   -- and the main thread never interleave.
   local f = assert(io.open(out_path, "a"))
   f:setvbuf("full", 4 * 1024 * 1024)
   f:write(line, "\n")
   f:close()
end

local STAT_FIELDS = {
   "threads_running", "time_interval", "time_total", "latency_pct", "latency_min",
   "latency_max", "latency_avg", "latency_sum", "events", "reads", "writes", "other",
   "errors", "reconnects", "queue_length", "concurrency",
}

local function stat_json(kind, stat)
   local parts = { string.format('"type":"%s"', kind),
                   '"percentile":' .. num(sysbench.opt.percentile) }
   for _, k in ipairs(STAT_FIELDS) do
      if stat[k] ~= nil then
         parts[#parts + 1] = string.format('"%s":%s', k, num(stat[k]))
      end
   end
   return "{" .. table.concat(parts, ",") .. "}"
end

local function c_stat(stat)
   local s = ffi.new("mallocsweep_stat_t")
   for _, k in ipairs(STAT_FIELDS) do
      if stat[k] ~= nil then
         s[k] = stat[k]
      end
   end
   return s
end

-- Ending a level early, cleanly ($MALLOCSWEEP_STOP: a file the runner creates once the level's
-- ramp has ended and enough steady seconds followed it; suites/workloads/sysbench/settle.py).
-- sysbench 1.0.20's workers ask sb_more_events() before each event, which ends them once the
-- elapsed time reaches sb_globals.max_time_ns (--time). Lowering that limit to the time already
-- elapsed ends the level as --time would have: workers finish their event, thread_done runs (the
-- histogram dump), and sysbench prints its cumulative report. A SIGTERM would lose both.
-- Where max_time_ns is: at byte 0x20 of sb_globals in Debian's sysbench 1.0.20 (its
-- sb_more_events compares sb_globals+0x20 with the exec timer; error at +0, tx_rate at +0x10,
-- max_requests at +0x18: objdump -d /usr/bin/sysbench). It is written only if it holds exactly
-- --time in ns, so a build with another layout is refused (and said), never corrupted.
local stop_path = os.getenv("MALLOCSWEEP_STOP")
local stop_done = false

ffi.cdef [[
typedef struct {
  int error;
  uint8_t unknown_04[12];
  unsigned int tx_rate;
  uint8_t unknown_14[4];
  uint64_t max_requests;
  uint64_t max_time_ns;
} mallocsweep_globals_head_t;
extern mallocsweep_globals_head_t sb_globals;
]]

local function maybe_stop(stat)
   if stop_done or not stop_path then
      return
   end
   local f = io.open(stop_path, "r")
   if not f then
      return
   end
   f:close()
   stop_done = true
   local g = ffi.C.sb_globals
   local want = ffi.new("uint64_t", (tonumber(sysbench.opt.time) or 0) * 1000000000)
   if g.max_time_ns ~= want then
      append(string.format('{"type":"stop_refused","reason":"sb_globals.max_time_ns is %s, ' ..
                           'not --time %s s in ns: unexpected layout"}',
                           tostring(g.max_time_ns), num(sysbench.opt.time)))
      return
   end
   g.max_time_ns = ffi.new("uint64_t", math.floor(stat.time_total * 1e9))
   append(string.format('{"type":"stop","t_s":%s}', num(stat.time_total)))
end

function sysbench.hooks.report_intermediate(stat)
   local line = stat_json("interval", stat)
   local tid = kernel_tid()
   if tid then
      line = line:sub(1, -2) .. ',"tid":' .. num(tid) .. "}"
   end
   append(line)
   ffi.C.db_report_intermediate(c_stat(stat))
   maybe_stop(stat)
end

function sysbench.hooks.report_cumulative(stat)
   append(stat_json("cumulative", stat))
   ffi.C.db_report_cumulative(c_stat(stat))
end

local function count_finished()
   -- Each finished worker appends one byte; the size after our own append says how many have
   -- finished by now (appends are atomic, so the count never goes backwards).
   local f = assert(io.open(done_path, "a"))
   f:write(".")
   f:flush()
   local n = f:seek("end")
   f:close()
   return n
end

local function dump_histogram()
   local h = ffi.C.sb_latency_histogram
   local size = tonumber(h.array_size)
   if size ~= HIST_SIZE or h.range_min ~= HIST_MIN or h.range_max ~= HIST_MAX then
      append(string.format('{"type":"histogram_error","reason":"unexpected histogram layout: ' ..
                           'size %s, range %s..%s"}', num(size), num(h.range_min), num(h.range_max)))
      return
   end
   ffi.C.sb_histogram_get_pct_cumulative(h, 50) -- merges the per-slot counts under the lock
   local buckets, total = {}, 0
   for i = 0, size - 1 do
      local c = tonumber(h.cumulative_array[i])
      if c > 0 then
         buckets[#buckets + 1] = string.format("[%d,%s]", i, num(c))
         total = total + c
      end
   end
   append(string.format('{"type":"histogram","array_size":%d,"range_min":%s,"range_max":%s,' ..
                        '"range_deduct":%s,"range_mult":%s,"nevents":%s,"total":%s,' ..
                        '"unit":"ms","buckets":[%s]}',
                        size, num(h.range_min), num(h.range_max), num(h.range_deduct),
                        num(h.range_mult), num(h.cumulative_nevents), num(total),
                        table.concat(buckets, ",")))
end

local stock_thread_done = thread_done

function thread_done(thread_id)
   if stock_thread_done then
      stock_thread_done(thread_id)
   end
   if count_finished() >= sysbench.opt.threads then
      dump_histogram()
   end
end

-- Which kernel thread is sysbench's report thread, told by that thread itself, so the runner can
-- give exactly it real-time priority (a guess by thread id could pick a worker after a pid
-- wrap-around). sysbench 1.0.20 runs this script once per Lua state: the main thread's
-- (sysbench.tid 0), each worker's (0 .. --threads - 1), and the report thread's, which it creates
-- in report_thread_proc after setting the thread's id to SB_BACKGROUND_THREAD_ID = --threads.
-- The --rate event generator has no Lua state, and we never pass --report-checkpoints (whose
-- thread would share that id). Written last: the state's loading work is done by then.
local level_threads = tonumber(os.getenv("MALLOCSWEEP_THREADS") or "")
if level_threads and sysbench.tid == level_threads then
   local tid = kernel_tid()
   if tid then
      append(string.format('{"type":"report_thread","tid":%s,"sysbench_tid":%s}', num(tid),
                           num(sysbench.tid)))
   end
end
