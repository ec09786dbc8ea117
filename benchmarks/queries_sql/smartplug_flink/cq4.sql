-- CQ4 in Flink SQL: as CQ3 with AVG only
SELECT a.window_end AS tau, a.house_id, a.household_id, a.plug_id, avg1 - avg2 AS spread
FROM (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, AVG(`value`) AS avg1
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS a
JOIN (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, AVG(`value`) AS avg2
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS b
  ON a.house_id = b.house_id AND a.household_id = b.household_id
 AND a.plug_id = b.plug_id AND b.rt BETWEEN a.rt AND a.rt
