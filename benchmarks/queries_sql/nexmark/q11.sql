-- Nexmark q11, user sessions: how many bids each bidder made in each session of bids at
-- most 10 seconds apart. Flink's text groups by SESSION(dateTime, INTERVAL '10' SECOND),
-- its legacy group window; this is the window table function Flink offers for it, with the
-- same sessions and columns. A session is emitted at the first instant (each second) at or
-- after its end (docs/sql.md, "Session windows").
INSERT INTO q11
SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
GROUP BY window_start, window_end, bidder
