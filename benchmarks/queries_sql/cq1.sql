-- CQ1: per plug, how many of the last 5 minutes' load readings were above 90% of the
-- plug's maximum over those 5 minutes (DEBS 2014 smart plugs; slides every second).
INSERT INTO CQ1
WITH load AS (
  SELECT *
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1
),
peak AS (
  SELECT house_id, household_id, plug_id, MAX(value) AS maxv
  FROM load
  GROUP BY window_start, window_end, house_id, household_id, plug_id
)
SELECT l.house_id, l.household_id, l.plug_id, COUNT(*) AS n_high
FROM load AS l
JOIN peak AS p
  ON l.window_end = p.window_end
 AND l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
WHERE l.value > 0.9 * p.maxv /* selectivity 0.1 */
GROUP BY l.window_start, l.window_end, l.house_id, l.household_id, l.plug_id
