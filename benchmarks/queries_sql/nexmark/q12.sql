-- Nexmark q12, bids per bidder in 10-second tumbling windows. Flink's text counts in
-- processing-time windows (PROCTIME()); fedq has event time only, so this is the count in
-- event-time windows, what the Nexmark project's q12 asks "instead of processing time".
INSERT INTO q12
SELECT bidder, COUNT(*) AS bid_count
FROM TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
GROUP BY window_start, window_end, bidder
