-- CQ5: per household, the largest 5-minute total load among its plugs.
INSERT INTO CQ5
SELECT house_id, household_id, MAX(total) AS max_total
FROM (
  SELECT house_id, household_id, plug_id, SUM(value) AS total
  FROM HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id
)
GROUP BY house_id, household_id
