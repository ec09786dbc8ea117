-- CQ2: per plug, how many of the last 5 minutes' load readings were above the plug's
-- average over those 5 minutes ("above" by more than 1e-9 W: engines sum in different
-- orders, and a reading equal to the average must not flip with the last bit).
INSERT INTO CQ2
WITH load AS (
  SELECT *
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1
),
mean AS (
  SELECT house_id, household_id, plug_id, AVG(value) AS avgv
  FROM load
  GROUP BY window_start, window_end, house_id, household_id, plug_id
)
SELECT l.house_id, l.household_id, l.plug_id, COUNT(*) AS n_above
FROM load AS l
JOIN mean AS m USING (house_id, household_id, plug_id)
WHERE l.value > m.avgv + 1e-9 /* selectivity 0.4 */
GROUP BY l.house_id, l.household_id, l.plug_id
