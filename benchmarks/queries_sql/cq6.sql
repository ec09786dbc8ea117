-- CQ6: per plug, the average load of the last 1, 3 and 5 minutes side by side (3-way join).
INSERT INTO CQ6
WITH a1 AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avg1
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1 GROUP BY house_id, household_id, plug_id
), a3 AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avg3
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' MINUTE)
  WHERE property = 1 GROUP BY house_id, household_id, plug_id
), a5 AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avg5
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1 GROUP BY house_id, household_id, plug_id
)
SELECT *
FROM a1 JOIN a3 USING (house_id, household_id, plug_id)
        JOIN a5 USING (house_id, household_id, plug_id)
