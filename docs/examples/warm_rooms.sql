-- per room: the average temperature of the last 20 s and the largest humidity of the last
-- 10 s on the first sensor of each room, where the average is above 22 degrees
WITH t AS (
  SELECT room, AVG(temp) AS t20
  FROM HOP(TABLE sensors, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '20' SECOND)
  GROUP BY room
), h AS (
  SELECT room, MAX(humidity) AS h10, COUNT(*) AS n
  FROM HOP(TABLE sensors, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)
  WHERE sensor % 3 = 0
  GROUP BY room
)
SELECT t.room, t20, h10, n FROM t JOIN h ON t.room = h.room WHERE t20 > 22
