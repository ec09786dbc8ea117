-- Nexmark q5, hot items: the auctions with the most bids in the last 10 seconds, every
-- 2 seconds. Flink's text joins on num >= maxn; the count never exceeds its window's
-- maximum, so num = maxn is the same join as an equi-join.
INSERT INTO q5
WITH auction_bids AS (
  SELECT auction, COUNT(*) AS num
  FROM HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND)
  GROUP BY window_start, window_end, auction
)
SELECT b.auction, b.num
FROM auction_bids AS b
JOIN (SELECT MAX(num) AS maxn FROM auction_bids GROUP BY window_start, window_end) AS m
  ON b.window_end = m.window_end AND b.num = m.maxn
