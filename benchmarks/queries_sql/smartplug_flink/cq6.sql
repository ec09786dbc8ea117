-- CQ6 in Flink SQL: three window TVF aggregates (1, 3, 5 minutes) joined per instant by
-- interval joins of zero width on their window_time
SELECT a1.window_end AS tau, a1.house_id, a1.household_id, a1.plug_id, avg1, avg3, avg5
FROM (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, AVG(`value`) AS avg1
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS a1
JOIN (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, AVG(`value`) AS avg3
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS a3
  ON a1.house_id = a3.house_id AND a1.household_id = a3.household_id
 AND a1.plug_id = a3.plug_id AND a3.rt BETWEEN a1.rt AND a1.rt
JOIN (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, AVG(`value`) AS avg5
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS a5
  ON a1.house_id = a5.house_id AND a1.household_id = a5.household_id
 AND a1.plug_id = a5.plug_id AND a5.rt BETWEEN a1.rt AND a1.rt
