#!/usr/bin/env tarantool
-- The Vinyl microbenchmark (Shpilevoy, Osipov, Volkanov, "Deferred secondary index update with
-- LSM-trees", section 5.1) on Tarantool's vinyl engine: the peer of `sift bench vinyl`.
--
--   tarantool bench/peers/tarantool-vinyl.lua --dir DIR --mode deferred|non-deferred
--       [--keys N] [--preload N] [--clients 4] [--batch-max 500] [--seconds S]
--       [--interval-seconds 1] [--seed 7] [--vinyl-memory BYTES] [--vinyl-cache BYTES]
--       [--evict-page-cache-ms MS] [--warm-cache 1]
--
-- One vinyl space with an unsigned primary key and four non-unique unsigned secondary indexes
-- (fields 2..5). Documents 1..preload are written first (not timed) and dumped to disk with
-- box.snapshot(). Then `--clients` fibers of this process (the counterpart of Sift's embedded
-- client threads: no network, no serialisation) each run transactions of 1..batch-max
-- statements, half replaces of {key, 4 random unsigned} (~50 bytes with the tuple header) and
-- half deletes, keys uniform in 1..keys, until --seconds have passed.
--
-- --mode deferred: Tarantool 2.6's default for vinyl spaces with secondary indexes (deferred
-- DELETEs; blind replace and delete). --mode non-deferred: the space gets an on_replace
-- trigger, which turns deferred DELETEs off (every replace and delete reads the old tuple);
-- deletes `get` the key first and skip missing ones, because in 2.6 deleting a missing key on
-- that path can crash the server under concurrent multi-statement transactions.
--
-- --evict-page-cache-ms: vinyl has no direct-I/O reads, so for the disk-bound setting a fiber
-- drops the vinyl files' pages from the OS page cache (posix_fadvise DONTNEED on every .run
-- and .index file) every MS milliseconds during the measurement: a page read from disk stays
-- cached at most that long, as a read through a tiny cache.
--
-- --warm-cache 1: after the preload, get every key once (not timed) so the tuple cache
-- (vinyl_cache) holds the data and the non-deferred path's reads do not go to a read thread.
--
-- Prints one JSON object per line: per interval {"engine": "tarantool", "mode", "t_seconds",
-- "statements_per_second"}, then a summary {"engine", "mode", "average", "median", "max",
-- "statements", "transactions", "aborted_transactions", "aborted_statements", "deletes_skipped",
-- "preload_seconds", ...}. Aborted transactions (MVCC conflicts) count no statement.

local fiber = require('fiber')
local json = require('json')
local clock = require('clock')
local fio = require('fio')

local options = {
    dir = nil,
    mode = 'deferred',
    keys = 1000000,
    preload = nil,
    clients = 4,
    ['batch-max'] = 500,
    seconds = 20,
    ['interval-seconds'] = 1,
    seed = 7,
    ['vinyl-memory'] = nil,
    ['vinyl-cache'] = nil,
    ['evict-page-cache-ms'] = nil,
    ['warm-cache'] = '0',
}

local function fail(message)
    io.stderr:write('tarantool-vinyl: ' .. message .. '\n')
    os.exit(2)
end

local i = 1
while i <= #arg do
    local name = arg[i]:match('^%-%-(.+)$')
    if name == nil or arg[i + 1] == nil then
        fail('bad argument ' .. tostring(arg[i]) .. ' (options take one value each)')
    end
    if options[name] == nil and name ~= 'dir' and name ~= 'preload' and name ~= 'vinyl-memory'
        and name ~= 'vinyl-cache' and name ~= 'evict-page-cache-ms' then
        fail('unknown option --' .. name)
    end
    options[name] = arg[i + 1]
    i = i + 2
end
if options.dir == nil then fail('--dir is required') end
if options.mode ~= 'deferred' and options.mode ~= 'non-deferred' then
    fail('--mode is deferred or non-deferred')
end
for _, name in ipairs({'keys', 'clients', 'batch-max', 'seconds', 'interval-seconds', 'seed'}) do
    options[name] = tonumber(options[name]) or fail('--' .. name .. ' takes a number')
end
local keys = math.floor(options.keys)
local preload = math.min(tonumber(options.preload) or keys, keys)
local batch_max = math.max(1, math.floor(options['batch-max']))
local interval = math.max(0.1, options['interval-seconds'])

fio.mktree(options.dir)
local config = {
    work_dir = options.dir,
    log = 'tarantool.log',
    log_level = 4,
    checkpoint_count = 1,
    checkpoint_interval = 0,
    wal_mode = 'write', -- written, not fsynced: as Sift's default (sync_writes off)
}
if options['vinyl-memory'] then config.vinyl_memory = tonumber(options['vinyl-memory']) end
if options['vinyl-cache'] then config.vinyl_cache = tonumber(options['vinyl-cache']) end
box.cfg(config)

local space = box.schema.space.create('test', {engine = 'vinyl', if_not_exists = false})
space:create_index('pk', {parts = {1, 'unsigned'}})
for field = 2, 5 do
    space:create_index('f' .. field, {parts = {field, 'unsigned'}, unique = false})
end
if options.mode == 'non-deferred' then
    -- Any on_replace trigger makes vinyl read the old tuple at every replace and delete.
    space:on_replace(function() end)
end

local function document(key)
    return {key, math.random(0, 999999), math.random(0, 999999), math.random(0, 999999),
            math.random(0, 999999)}
end

math.randomseed(options.seed)
local preload_start = clock.monotonic()
local key = 1
while key <= preload do
    box.begin()
    local last = math.min(key + 999, preload)
    for k = key, last do
        space:replace(document(k))
    end
    box.commit()
    key = last + 1
end
box.snapshot() -- dumps every vinyl index to disk, as Sift's flush before the measurement
local preload_seconds = clock.monotonic() - preload_start
local warm_seconds = nil
if options['warm-cache'] == '1' then
    local warm_start = clock.monotonic()
    for k = 1, keys do
        space:get(k)
    end
    warm_seconds = clock.monotonic() - warm_start
end

local stop = false
local evictions = 0
local evict_ms = tonumber(options['evict-page-cache-ms'])
if evict_ms then
    local ffi = require('ffi')
    ffi.cdef('int posix_fadvise(int fd, long offset, long len, int advice);')
    local POSIX_FADV_DONTNEED = 4
    fiber.create(function()
        local handles = {} -- path -> open handle, refreshed every 50 passes
        local pass = 0
        while not stop do
            if pass % 50 == 0 then
                local present = {}
                for _, pattern in ipairs({'/*/*/*.run', '/*/*/*.index'}) do
                    for _, path in ipairs(fio.glob(options.dir .. pattern)) do
                        present[path] = true
                        if handles[path] == nil then
                            handles[path] = fio.open(path, {'O_RDONLY'})
                        end
                    end
                end
                for path, handle in pairs(handles) do
                    if not present[path] then
                        handle:close()
                        handles[path] = nil
                    end
                end
            end
            for _, handle in pairs(handles) do
                ffi.C.posix_fadvise(handle.fh, 0, 0, POSIX_FADV_DONTNEED)
            end
            evictions = evictions + 1
            pass = pass + 1
            fiber.sleep(evict_ms / 1000)
        end
        for _, handle in pairs(handles) do handle:close() end
    end)
end

local statements = 0
local transactions = 0
local aborted_transactions = 0
local aborted_statements = 0
local deletes_skipped = 0
local failure = nil
local finished = fiber.channel(options.clients)
local non_deferred = options.mode == 'non-deferred'

local function client(number)
    math.randomseed(options.seed * 1000 + number)
    while not stop do
        local count = math.random(1, batch_max)
        local skipped = 0
        local ok, message = pcall(function()
            box.begin()
            for _ = 1, count do
                local k = math.random(1, keys)
                if math.random() < 0.5 then
                    space:replace(document(k))
                elseif non_deferred then
                    if space:get(k) ~= nil then
                        space:delete(k)
                    else
                        skipped = skipped + 1
                    end
                else
                    space:delete(k)
                end
            end
            box.commit()
        end)
        if ok then
            statements = statements + count
            transactions = transactions + 1
            deletes_skipped = deletes_skipped + skipped
        else
            pcall(box.rollback)
            local text = tostring(message)
            if text:find('onflict') or text:find('aborted') then
                aborted_transactions = aborted_transactions + 1
                aborted_statements = aborted_statements + count
            else
                failure = text
                stop = true
            end
        end
    end
    finished:put(number)
end

for number = 1, options.clients do
    fiber.create(client, number)
end

local rates = {}
local start = clock.monotonic()
local next_tick = start + interval
local last = 0
while clock.monotonic() - start < options.seconds and not stop do
    fiber.sleep(math.max(0, next_tick - clock.monotonic()))
    local now = statements
    local rate = (now - last) / interval
    last = now
    table.insert(rates, rate)
    print(json.encode({engine = 'tarantool', mode = options.mode,
                       t_seconds = clock.monotonic() - start, statements_per_second = rate}))
    next_tick = next_tick + interval
end
stop = true
for _ = 1, options.clients do
    finished:get()
end
if failure then
    fail('a transaction failed: ' .. failure)
end

local sorted = {}
local sum = 0
for _, rate in ipairs(rates) do
    table.insert(sorted, rate)
    sum = sum + rate
end
table.sort(sorted)
local stat = box.stat.vinyl()
print(json.encode({
    engine = 'tarantool',
    mode = options.mode,
    average = #rates > 0 and sum / #rates or 0,
    median = sorted[math.floor(#sorted / 2) + 1] or 0,
    max = sorted[#sorted] or 0,
    statements = statements,
    transactions = transactions,
    aborted_transactions = aborted_transactions,
    aborted_statements = aborted_statements,
    deletes_skipped = deletes_skipped,
    preload_seconds = preload_seconds,
    warm_seconds = warm_seconds,
    page_cache_evictions = evictions,
    vinyl_memory = box.cfg.vinyl_memory,
    vinyl_cache = box.cfg.vinyl_cache,
    disk_data_bytes = stat.disk and stat.disk.data or nil,
    dumps = stat.scheduler and stat.scheduler.dump_count or nil,
}))
os.exit(0)
