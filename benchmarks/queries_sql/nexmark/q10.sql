-- Nexmark q10, log to a file system: every bid with its day and its minute, the columns
-- Flink's sink table partitions by (dt, hm). Flink's text but for the two names, which
-- Flink takes by position from its sink's CREATE TABLE (fedq names every computed column),
-- and `dateTime` unquoted. Where the rows go is the run's `--output` (Flink's sink is a
-- file system partitioned by dt and hm; fedq's outputs are not partitioned).
INSERT INTO q10
SELECT auction, bidder, price, dateTime, extra, DATE_FORMAT(dateTime, 'yyyy-MM-dd') AS dt,
       DATE_FORMAT(dateTime, 'HH:mm') AS hm
FROM bid
