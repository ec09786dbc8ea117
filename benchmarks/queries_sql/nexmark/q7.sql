-- Nexmark q7, highest bid: the bids with the highest price of each 10-second tumbling
-- window, written as a join of the window's bids with their maximum (Flink's text joins
-- the stream with the maximum and keeps the bids inside the window by a BETWEEN).
INSERT INTO q7
SELECT b.auction, b.price, b.bidder, b.dateTime, b.extra
FROM TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND) AS b
JOIN (
  SELECT MAX(price) AS maxprice
  FROM TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
  GROUP BY window_start, window_end
) AS m
  ON b.window_end = m.window_end AND b.price = m.maxprice
