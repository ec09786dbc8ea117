-- CQ4: per plug, the average load of the last 5 minutes minus that of the last minute
-- (two selections, two aggregations, a join and a projection).
INSERT INTO CQ4
WITH five AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avg1
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id
),
one AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avg2
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id
)
SELECT a.house_id, a.household_id, a.plug_id, avg1 - avg2 AS spread
FROM five AS a JOIN one AS b USING (house_id, household_id, plug_id)
