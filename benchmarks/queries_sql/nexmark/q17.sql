-- Nexmark q17, auction statistics per day: a daily tumbling window (Flink's text groups by
-- DATE_FORMAT(dateTime) without a window, an unbounded aggregate, and counts with FILTER;
-- here the day is a TUMBLE and the counts are sums of CASE).
INSERT INTO q17
SELECT auction,
       COUNT(*) AS total_bids,
       SUM(CASE WHEN price < 10000 THEN 1 ELSE 0 END) AS rank1_bids,
       SUM(CASE WHEN price >= 10000 AND price < 1000000 THEN 1 ELSE 0 END) AS rank2_bids,
       SUM(CASE WHEN price >= 1000000 THEN 1 ELSE 0 END) AS rank3_bids,
       MIN(price) AS min_price,
       MAX(price) AS max_price,
       AVG(price) AS avg_price,
       SUM(price) AS sum_price
FROM TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' DAY)
GROUP BY window_start, window_end, auction
