-- Nexmark q14, calculation with a user function: each bid's price in euros, the part of
-- the day of its time, and how often 'c' occurs in its extra field (count_char, a Python
-- function here where Flink's names a Java class; federation/nexmark/udfs.py). Flink's text
-- verbatim but for the function's declaration and `dateTime` unquoted.
CREATE FUNCTION count_char AS 'federation.nexmark.udfs.count_char' LANGUAGE PYTHON;

INSERT INTO q14
SELECT
    auction,
    bidder,
    0.908 * price as price,
    CASE
        WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime'
        WHEN HOUR(dateTime) <= 6 OR HOUR(dateTime) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bidTimeType,
    dateTime,
    extra,
    count_char(extra, 'c') AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
