-- Nexmark q13, a bounded side input: each bid with the value of a side table, looked up by
-- auction modulo 10,000. The side table is a DuckDB table (fedq generate --nexmark writes
-- OUT/side_input.duckdb): fedq run --sql q13.sql --data bid=OUT/bid
-- --tables OUT/side_input.duckdb. Each bid is read once (no window) and joined with the
-- table as the run copied it at its start.
INSERT INTO q13
SELECT b.auction, b.bidder, b.price, b.dateTime, s.value
FROM (SELECT auction, bidder, price, dateTime, auction % 10000 AS key FROM bid) AS b
JOIN side_input AS s ON b.key = s.key
