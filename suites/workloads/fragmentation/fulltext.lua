-- mallocsweep fragmentation scenario "fulltext" (sysbench 1.0 script, run through
-- mallocsweep.lua), after MySQL bug 95065 / Percona PS-5312: an InnoDB FULLTEXT index, and a mix
-- of natural-language, boolean (with prefix wildcards) and phrase queries over it. A phrase
-- query on common words builds InnoDB's fts_query heap of many small blocks (up to ~80 MB per
-- query in the report), freed when the query ends: the allocator is left to reuse or return it.
--
-- Documents are `ft_words` words drawn from a vocabulary of `ft_vocabulary` made-up words
-- ("zq" + letters: never a stopword, never shorter than innodb_ft_min_token_size), log-uniformly,
-- so a few words are in most documents and most words in few.

sysbench.cmdline.options = {
   ft_docs = {"documents in ft_docs", 20000},
   ft_words = {"words per document", 40},
   ft_vocabulary = {"distinct words", 5000},
   engine = {"storage engine of the table (InnoDB: FULLTEXT)", "InnoDB"},
}

local function word(i)
   local s, n = "zq", i
   repeat
      s = s .. string.char(97 + n % 26)
      n = math.floor(n / 26)
   until n == 0
   return s
end

local function any_word()
   -- log-uniform over 1..V: word 1 is in most documents, word V in few
   local v = sysbench.opt.ft_vocabulary
   return word(math.floor(math.exp(sysbench.rand.uniform_double() * math.log(v))))
end

local function common_word()
   return word(sysbench.rand.uniform(1, 20))
end

function cmd_prepare()
   local drv = sysbench.sql.driver()
   local con = drv:connect()
   con:query(string.format(
      "CREATE TABLE ft_docs (id INT NOT NULL PRIMARY KEY, title VARCHAR(200) NOT NULL, " ..
      "body TEXT NOT NULL) ENGINE = %s", sysbench.opt.engine))
   local batch = {}
   for id = 1, sysbench.opt.ft_docs do
      local words = {}
      for w = 1, sysbench.opt.ft_words do
         words[w] = any_word()
      end
      batch[#batch + 1] = string.format("(%d, '%s %s %s', '%s')", id, any_word(), any_word(),
                                        any_word(), table.concat(words, " "))
      if #batch == 200 or id == sysbench.opt.ft_docs then
         con:query("INSERT INTO ft_docs (id, title, body) VALUES " .. table.concat(batch, ","))
         batch = {}
      end
   end
   con:query("ALTER TABLE ft_docs ADD FULLTEXT INDEX ft_text (title, body)")
   con:disconnect()
end

sysbench.cmdline.commands = {
   prepare = {cmd_prepare, sysbench.cmdline.SINGLE_COMMAND},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
end

function thread_done()
   con:disconnect()
end

function event()
   local kind = sysbench.rand.uniform(1, 3)
   local q
   if kind == 1 then
      local terms = any_word() .. " " .. common_word() .. " " .. any_word()
      q = string.format(
         "SELECT id, MATCH (title, body) AGAINST ('%s') AS score FROM ft_docs " ..
         "WHERE MATCH (title, body) AGAINST ('%s') ORDER BY score DESC LIMIT 10", terms, terms)
   elseif kind == 2 then
      q = string.format(
         "SELECT COUNT(*) FROM ft_docs WHERE MATCH (title, body) " ..
         "AGAINST ('+%s %s* -%s' IN BOOLEAN MODE)",
         common_word(), string.sub(any_word(), 1, 3), any_word())
   else
      q = string.format(
         "SELECT COUNT(*) FROM ft_docs WHERE MATCH (title, body) " ..
         "AGAINST ('\"%s %s\"' IN BOOLEAN MODE)", common_word(), common_word())
   end
   con:query(q)
end
