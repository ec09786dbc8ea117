-- CQ3 in Flink SQL: window TVF aggregates (Flink slices HOP windows), joined per instant
-- by an interval join of zero width on their window_time (state kept only until the watermark)
SELECT m5.window_end AS tau, m5.house_id, m5.household_id, m5.plug_id,
       max1 - max5 AS max_diff, avg1 - avg5 AS avg_diff
FROM (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, MAX(`value`) AS max5, AVG(`value`) AS avg5
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS m5
JOIN (
  SELECT house_id, household_id, plug_id, window_end, window_time AS rt, MAX(`value`) AS max1, AVG(`value`) AS avg1
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS m1
  ON m5.house_id = m1.house_id AND m5.household_id = m1.household_id
 AND m5.plug_id = m1.plug_id AND m1.rt BETWEEN m5.rt AND m5.rt
