-- CQ5 in Flink SQL: a window TVF aggregate per plug, then per household over the same windows
-- (Flink's cascading window aggregation)
SELECT window_end AS tau, house_id, household_id, MAX(total) AS max_total
FROM (
  SELECT house_id, household_id, plug_id, window_start, window_end, SUM(`value`) AS total
  FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
)
GROUP BY house_id, household_id, window_start, window_end
