-- Nexmark q15, bidding statistics per day: how many bids, distinct bidders and distinct
-- auctions at three price levels. A daily TUMBLE (Flink's text groups by
-- DATE_FORMAT(dateTime, 'yyyy-MM-dd') without a window, an unbounded aggregate); the day
-- is the result's tau (the window's end) instead of a `day` string.
INSERT INTO q15
SELECT COUNT(*) AS total_bids,
       COUNT(*) FILTER (WHERE price < 10000) AS rank1_bids,
       COUNT(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       COUNT(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       COUNT(DISTINCT bidder) AS total_bidders,
       COUNT(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
       COUNT(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
       COUNT(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
       COUNT(DISTINCT auction) AS total_auctions,
       COUNT(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
       COUNT(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
       COUNT(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '1' DAY)
GROUP BY window_start, window_end
