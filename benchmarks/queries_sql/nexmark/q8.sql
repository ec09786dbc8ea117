-- Nexmark q8, monitor new users: the persons who registered and opened an auction in the
-- same 10-second tumbling window (two streams: person and auction).
INSERT INTO q8
SELECT p.id, p.name
FROM (
  SELECT id, name
  FROM TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
  GROUP BY window_start, window_end, id, name
) AS p
JOIN (
  SELECT seller
  FROM TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
  GROUP BY window_start, window_end, seller
) AS a
  ON p.window_end = a.window_end AND p.id = a.seller
