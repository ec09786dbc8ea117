-- CQ2 in Flink SQL: each plug's 5-minute mean load (a HOP window TVF aggregate), the load
-- rows of its window joined to it by an interval join (each row held once, for a window
-- range: [window_end - 5 min, window_end) in milliseconds), then counted per instant
-- (a TUMBLE of 1 s over the peak's window_time, which the interval join keeps)
WITH joined AS (
  SELECT p.rt, l.house_id, l.household_id, l.plug_id
  FROM (SELECT ts, `value`, house_id, household_id, plug_id FROM smartplug
        WHERE property = 1) AS l
  JOIN (
    SELECT house_id, household_id, plug_id, window_time AS rt, AVG(`value`) AS avgv
    FROM TABLE(HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE))
    WHERE property = 1
    GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
  ) AS p
    ON l.house_id = p.house_id AND l.household_id = p.household_id
   AND l.plug_id = p.plug_id
   AND l.ts BETWEEN p.rt - INTERVAL '4:59.999' MINUTE TO SECOND(3) AND p.rt
  WHERE l.`value` > p.avgv + 1e-9

)
SELECT window_end AS tau, house_id, household_id, plug_id, COUNT(*) AS n_above
FROM TABLE(TUMBLE(TABLE joined, DESCRIPTOR(rt), INTERVAL '1' SECOND))
GROUP BY window_start, window_end, house_id, household_id, plug_id
