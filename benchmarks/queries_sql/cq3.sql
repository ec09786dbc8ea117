-- CQ3: per plug, the maximum and average load of the last minute against those of the
-- last 5 minutes.
INSERT INTO CQ3
SELECT m5.house_id, m5.household_id, m5.plug_id,
       max1 - max5 AS max_diff, avg1 - avg5 AS avg_diff
FROM (
  SELECT house_id, household_id, plug_id, MAX(value) AS max5, AVG(value) AS avg5
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id
) AS m5
JOIN (
  SELECT house_id, household_id, plug_id, MAX(value) AS max1, AVG(value) AS avg1
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id
) AS m1
  ON m5.house_id = m1.house_id AND m5.household_id = m1.household_id
 AND m5.plug_id = m1.plug_id
