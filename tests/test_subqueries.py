"""`x IN (SELECT ...)` and `x NOT IN (SELECT ...)` in WHERE (issue 44): joins at each
instant with the subquery's distinct values (federation/sqlfront/subqueries.py).

Each query runs in pure DuckDB through the DB-op runtime against the reference evaluator
(no JVM), and, at sampled instants, against DuckDB's own SQL over the window's rows (IN's
and NOT IN's NULL rules are DuckDB's, not the plan's); with the JVM a NOT IN in Spark and
cut across the engines.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import duckdb
import pytest

from federation import sql
from federation.sqlfront import SqlError
from tests.sampling import sampled
from tests.test_sql import H10, STREAMS
from tests.test_stranger_queries import check_db, rows_of

W = "HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
assert W == H10

IN = f"""SELECT plug_id, value FROM {W}
WHERE value > 10 AND plug_id IN (SELECT plug_id FROM {W} WHERE value > 100)"""
#: a NULL in the subquery (a reading in (109.7, 110]) makes NOT IN NULL for every row
NOT_IN_NULLS = f"""SELECT plug_id, value FROM {W}
WHERE plug_id + 1 NOT IN (SELECT CASE WHEN value <= 109.7 THEN plug_id END FROM {W}
                          WHERE value > 108)"""
NOT_IN = f"""SELECT plug_id, house_id, value FROM {W}
WHERE house_id NOT IN (SELECT house_id FROM {W} WHERE value > 105) AND value < 50"""
PAIRS = f"""SELECT house_id, COUNT(*) AS n, SUM(value) AS total FROM {W}
WHERE (house_id, plug_id % 2) IN (SELECT house_id, plug_id % 3 FROM {W} WHERE value > 100)
GROUP BY window_end, house_id"""

#: correlated by two equalities: the tuple IN below
EXISTS = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 10 AND EXISTS (
SELECT * FROM {W} AS b WHERE b.plug_id = a.plug_id AND a.house_id = b.house_id
AND b.value > 100)"""

#: a NULL key (a reading of at most 20 W) is kept by NOT EXISTS, unlike NOT IN
NOT_EXISTS = f"""SELECT a.k, a.value FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k,
value FROM {W}) AS a WHERE a.value < 60 AND NOT EXISTS (SELECT * FROM {W} AS b
WHERE b.plug_id = a.k AND b.value > 100)"""
#: uncorrelated: every row of an instant whose window holds a reading in (109.5, 110], or none
SOME = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND EXISTS (
SELECT * FROM {W} AS b WHERE b.value > 109.5 AND b.value <= 110)"""
NONE = SOME.replace("AND EXISTS", "AND NOT EXISTS")

#: scalar subqueries (federation/sqlfront/scalars.py): CQ1 as SQL writes it, a correlated
#: MAX; an uncorrelated AVG in SELECT and WHERE; a correlated COUNT, 0 where no row of the
#: plug is above 100 (a LEFT join's NULL is not SQL's answer); over a NULL key (a reading of
#: at most 20 W), COALESCE's -1
HIGH = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 0.9 * (
SELECT MAX(b.value) FROM {W} AS b WHERE b.plug_id = a.plug_id)"""
MEAN = f"""SELECT a.plug_id, a.value, (SELECT AVG(value) FROM {W}) AS m FROM {W} AS a
WHERE a.value > 1.5 * (SELECT AVG(value) FROM {W} WHERE value > 0)"""
COUNTED = f"""SELECT a.plug_id, a.value, (SELECT COUNT(*) FROM {W} AS b WHERE b.plug_id = a.plug_id
AND b.value > 100) AS n FROM {W} AS a WHERE a.value > 50"""
NULL_KEYS = f"""SELECT a.k, a.value, (SELECT COALESCE(MAX(b.value), -1) FROM {W} AS b
WHERE b.plug_id = a.k AND b.value > 90) AS top FROM (SELECT CASE WHEN value > 20 THEN plug_id
END AS k, value FROM {W}) AS a WHERE a.value < 40"""

#: DuckDB's (and, with LEFT, Spark's) semi and anti joins: EXISTS and NOT EXISTS (a NULL key
#: kept by ANTI)
SEMI = f"""SELECT a.plug_id, a.value FROM {W} AS a SEMI JOIN {W} AS b
ON a.plug_id = b.plug_id AND b.value > 100 WHERE a.value > 10"""
ANTI = f"""SELECT a.k, a.value FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k, value
FROM {W}) AS a ANTI JOIN {W} AS b ON b.plug_id = a.k AND b.value > 100 WHERE a.value < 60"""
#: a condition of the left side in a SEMI or ANTI join's ON (a key of its own): SEMI keeps a
#: row only where it holds, ANTI every row where it does not (also where it is NULL)
SEMI_LEFT = f"""SELECT a.plug_id, a.value FROM {W} AS a SEMI JOIN {W} AS b
ON a.plug_id = b.plug_id AND b.value > 90 AND a.value > 40"""
ANTI_LEFT = f"""SELECT a.k, a.value FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k, value,
CASE WHEN value < 80 THEN value END AS v FROM {W}) AS a ANTI JOIN {W} AS b
ON b.plug_id = a.k AND b.value > 90 AND a.v > 40"""
#: conditions over both sides (federation/sqlfront/semi_join.py: tested per pair), with a key
#: equality and one side's conditions, and without a key (every pair of the instant)
SEMI_BOTH = f"""SELECT a.plug_id, a.value FROM {W} AS a SEMI JOIN {W} AS b
ON a.plug_id = b.plug_id AND b.value > a.value + 30 AND a.value > 50"""
ANTI_BOTH = f"""SELECT a.k, a.value FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k, value
FROM {W}) AS a ANTI JOIN {W} AS b ON b.value > 2 * a.value AND b.plug_id < 3
WHERE a.value > 45"""

#: aggregates over a partition (federation/sqlfront/over.py): by a key with NULLs (a reading
#: of at most 20 W), two items sharing one aggregation, a FILTER; over the whole instant
OVER = f"""SELECT k, value, value - MIN(value) OVER (PARTITION BY k) AS d,
COUNT(*) OVER (PARTITION BY window_end, k) AS n,
MAX(value) FILTER (WHERE value < 100) OVER (PARTITION BY k, house_id) AS m
FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k, house_id, value FROM {W})
WHERE value < 60"""
#: DISTINCT ON (federation/sqlfront/ranking.py): each plug's highest reading (ties are equal
#: rows); each house's lowest, by a name the SELECT gives, then the first three houses
DISTINCT_ON = f"""SELECT DISTINCT ON (plug_id) plug_id, house_id, value FROM {W}
ORDER BY plug_id, value DESC"""
DISTINCT_ON_LIMIT = f"""SELECT DISTINCT ON (h) house_id AS h, plug_id, value FROM {W}
WHERE value > 5 ORDER BY h, value, plug_id LIMIT 3"""
#: DISTINCT ON expressions of the result's columns (hidden columns, dropped after)
DISTINCT_ON_EXPR = f"""SELECT DISTINCT ON (plug_id % 3, value > 50) plug_id, house_id, value
FROM {W} ORDER BY plug_id, value DESC"""
#: navigation functions (federation/sqlfront/navigation.py): LAG with a default, LEAD by 2,
#: FIRST_VALUE, by a key with NULLs (a reading of at most 20 W) and over the whole instant;
#: orders unique (ids), as DuckDB's pick among ties is its own
LAG_LEAD = f"""SELECT k, id, value, LAG(value, 1, -1) OVER (PARTITION BY k ORDER BY id) AS prev,
LEAD(value, 2) OVER (PARTITION BY k ORDER BY id DESC) AS later,
FIRST_VALUE(id) OVER (PARTITION BY house_id ORDER BY value DESC, id) AS top,
value - LAG(value) OVER (ORDER BY id) AS step
FROM (SELECT CASE WHEN value > 20 THEN plug_id END AS k, id, house_id, value FROM {W})
WHERE value < 70"""
#: outer joins' ON conditions of one side (federation/sqlfront/outer_on.py): a row failing
#: its own side's condition (or NULL under it) is kept unmatched, not dropped
_COUNTS = f"(SELECT plug_id, COUNT(*) AS n FROM {W} GROUP BY window_end, plug_id)"
_TOPS = f"(SELECT plug_id, MAX(value) AS m FROM {W} GROUP BY window_end, plug_id)"
LEFT_ON = f"""SELECT a.plug_id, a.n, b.m FROM {_COUNTS} AS a LEFT JOIN {_TOPS} AS b
ON a.plug_id = b.plug_id AND (CASE WHEN b.m > 100 THEN NULL ELSE b.m END) > 60 AND a.n > 2"""
FULL_ON = f"""SELECT a.plug_id, b.plug_id AS p, a.n, b.m FROM {_COUNTS} AS a FULL JOIN {_TOPS}
AS b ON a.plug_id = b.plug_id AND (b.m > 60 OR b.m IS NULL) AND n <> 3"""
#: subqueries in HAVING (federation/sqlfront/having.py): a value of the instant, one correlated
#: by a grouped key, IN beside a plain condition, NOT EXISTS correlated by a key
HAVING_VALUE = f"""SELECT plug_id, COUNT(*) AS n FROM {W} GROUP BY window_end, plug_id
HAVING COUNT(*) > (SELECT COUNT(*) / 5 FROM {W})"""
HAVING_CORRELATED = f"""SELECT a.house_id, MAX(a.value) AS m FROM {W} AS a
GROUP BY window_end, a.house_id HAVING MAX(a.value) > 0.98 * (SELECT MAX(b.value) FROM {W} AS b
WHERE b.house_id = a.house_id AND b.property = 1)"""
HAVING_IN = f"""SELECT plug_id, COUNT(*) AS n FROM {W} GROUP BY window_end, plug_id
HAVING plug_id IN (SELECT plug_id FROM {W} WHERE value > 108) AND COUNT(*) > 2"""
HAVING_NOT_EXISTS = f"""SELECT a.plug_id, SUM(a.value) AS s FROM {W} AS a
GROUP BY window_end, a.plug_id HAVING NOT EXISTS (SELECT * FROM {W} AS b
WHERE b.plug_id = a.plug_id AND b.value > 108)"""
#: outer joins' ON conditions over both sides (outer_on.cross_matched; about 120 readings per
#: plug_id and window, maxima near 108): a left row whose key matches but whose condition
#: fails is kept unmatched; FULL keeps both sides' unmatched rows; RIGHT without a key
#: equality (every pair of the instant tried); LEFT on conditions of one side alone
LEFT_CROSS = f"""SELECT a.plug_id, a.n, b.m FROM {_COUNTS} AS a LEFT JOIN {_TOPS} AS b
ON a.plug_id = b.plug_id AND b.m > a.n - 12"""
FULL_CROSS = f"""SELECT a.plug_id, b.plug_id AS p, a.n, b.m FROM {_COUNTS} AS a FULL JOIN {_TOPS}
AS b ON a.plug_id = b.plug_id AND b.m > a.n - 12 AND a.n <> 120"""
LEFT_ONE_SIDE = f"""SELECT a.plug_id, a.n, b.plug_id AS p FROM {_COUNTS} AS a LEFT JOIN {_TOPS}
AS b ON a.n > 120 AND b.m > 107"""
RIGHT_CROSS = f"""SELECT a.plug_id, b.plug_id AS p, a.n, b.m FROM {_COUNTS} AS a RIGHT JOIN
{_TOPS} AS b ON b.m < a.n - 10 AND a.plug_id < b.plug_id"""
OVER_ALL = f"""SELECT plug_id, value FROM (SELECT plug_id, value,
MAX(value) OVER () AS top FROM {W}) WHERE value > 0.95 * top"""
#: an inner join's ON with subqueries (WHERE's machinery, at the join): IN, a correlated
#: scalar over the right side, NOT EXISTS over the left; then a LEFT join, which must see
#: the inner join's rows already tested (the test is not moved past it)
#: subqueries in an outer join's ON, each of one side: IN of the right side, a correlated
#: value of the left side, NOT EXISTS of the right side (a FULL join): a row failing one
#: matches nothing and is kept with NULLs
LEFT_ON_SUB = f"""SELECT a.plug_id, a.n, b.m FROM {_COUNTS} AS a LEFT JOIN {_TOPS} AS b
ON a.plug_id = b.plug_id AND b.plug_id IN (SELECT plug_id FROM {W} WHERE value > 60)
AND a.n > (SELECT AVG(t.value) / 20 FROM {W} AS t WHERE t.plug_id = a.plug_id)"""
FULL_ON_SUB = f"""SELECT a.plug_id, b.plug_id AS p, a.n, b.m FROM {_COUNTS} AS a FULL JOIN
{_TOPS} AS b ON a.plug_id = b.plug_id AND NOT EXISTS (SELECT 1 FROM {W} AS d
WHERE d.plug_id = b.plug_id AND d.value > 99)"""
ON_SUB = f"""SELECT a.plug_id, a.n, b.m, c.plug_id AS p FROM {_COUNTS} AS a JOIN {_TOPS} AS b
ON a.plug_id = b.plug_id AND a.plug_id IN (SELECT plug_id FROM {W} WHERE value > 60)
AND b.m > (SELECT AVG(t.value) FROM {W} AS t WHERE t.plug_id = b.plug_id)
AND NOT EXISTS (SELECT 1 FROM {W} AS d WHERE d.plug_id = a.plug_id AND d.value > 99)
LEFT JOIN {_TOPS} AS c ON c.plug_id = a.plug_id + 1"""

#: tests that are not conjuncts (federation/sqlfront/marks.py): IN under OR; IN as a SELECT
#: value, NULL where the subquery holds a NULL and nothing equals (a reading in (109.7, 110]);
#: IN under NOT over OR, where a NULL must stay NULL; NOT EXISTS under OR; in HAVING; EXISTS
#: as a value
_NULLED = f"(SELECT CASE WHEN value <= 109.7 THEN plug_id END FROM {W} WHERE value > 108)"
OR_IN = f"""SELECT plug_id, value FROM {W}
WHERE value > 105 OR plug_id IN (SELECT plug_id FROM {W} WHERE value > 109)"""
SELECT_IN = f"""SELECT plug_id, value, plug_id + 1 IN {_NULLED} AS hit FROM {W}
WHERE value > 100"""
NOT_OR_IN = f"""SELECT plug_id, value FROM {W}
WHERE value > 95 AND NOT (value > 108 OR plug_id + 1 IN {_NULLED})"""
OR_NOT_EXISTS = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 107 OR NOT EXISTS (
SELECT * FROM {W} AS b WHERE b.plug_id = a.plug_id AND b.value < 60) OR a.value < 1"""
HAVING_OR = f"""SELECT plug_id, COUNT(*) AS n FROM {W} GROUP BY window_end, plug_id
HAVING COUNT(*) > 130 OR plug_id IN (SELECT plug_id FROM {W} WHERE value > 109)"""
SELECT_EXISTS = f"""SELECT a.plug_id, a.value, EXISTS (SELECT * FROM {W} AS b
WHERE b.plug_id = a.plug_id AND b.value > a.value + 4) AS beaten FROM {W} AS a
WHERE a.value > 103"""
#: correlated by more than equalities, or over a join (federation/sqlfront/correlated.py):
#: EXISTS and NOT EXISTS by a comparison; IN and NOT IN correlated (NOT IN's NULL rule per
#: outer row); a COUNT of the readings above the row's (0 where none); EXISTS and a value
#: over a join
EXISTS_ABOVE = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND EXISTS (
SELECT * FROM {W} AS b WHERE b.plug_id = a.plug_id AND b.value > a.value + 5)"""
NOT_EXISTS_ABOVE = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND NOT
EXISTS (SELECT * FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > a.value + 2)"""
CORRELATED_IN = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id
IN (SELECT b.plug_id + 1 FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > 105)"""
CORRELATED_NOT_IN = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND
a.plug_id NOT IN (SELECT CASE WHEN b.value < 109.5 THEN b.plug_id END FROM {W} AS b
WHERE b.house_id = a.house_id AND b.value > 107)"""
ABOVE = f"""SELECT a.plug_id, a.value, (SELECT COUNT(*) FROM {W} AS b
WHERE b.plug_id = a.plug_id AND b.value > a.value) AS above FROM {W} AS a WHERE a.value > 104"""
EXISTS_JOIN = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 104 AND EXISTS (
SELECT * FROM {W} AS b JOIN {_TOPS} AS c ON b.plug_id = c.plug_id WHERE b.house_id = a.house_id
AND b.value > 108 AND c.m > a.value + 3)"""
VALUE_JOIN = f"""SELECT a.plug_id, a.value, (SELECT MAX(c.m) FROM {_TOPS} AS c JOIN {_COUNTS}
AS d ON c.plug_id = d.plug_id WHERE c.plug_id = a.plug_id AND d.n > 100) AS top FROM {W} AS a
WHERE a.value > 106"""
#: ANY and ALL (correlated.compare): a correlated ALL over a NULL (a reading in (109.8,
#: 110]); NOT ANY; ALL and SOME as SELECT values
GE_ALL = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.value + 1 >= ALL (
SELECT CASE WHEN b.value < 109.8 THEN b.value END FROM {W} AS b WHERE b.house_id = a.house_id)"""
NOT_ANY = f"""SELECT plug_id, value FROM {W} WHERE value > 107 AND NOT (value < ANY (
SELECT value - 1 FROM {W} WHERE plug_id = 3))"""
SELECT_ALL = f"""SELECT plug_id, value, value >= ALL (SELECT CASE WHEN value < 109.8 THEN value
END FROM {W} WHERE value > 105) AS top, value = SOME (SELECT value FROM {W} WHERE plug_id < 3)
AS seen FROM {W} WHERE value > 106"""
#: subqueries in an aggregated SELECT (having.selected_subqueries): a share of the instant's
#: rows and a difference from a global mean; a correlated COUNT, an IN and an EXISTS as
#: values of each group, beside HAVING
AGG_SHARE = f"""SELECT plug_id, COUNT(*) * 1.0 / (SELECT COUNT(*) FROM {W}) AS share,
MAX(value) - (SELECT AVG(value) FROM {W} WHERE value > 100) AS d FROM {W}
GROUP BY window_end, plug_id"""
AGG_CORRELATED = f"""SELECT a.house_id, MAX(a.value) AS m, (SELECT COUNT(*) FROM {W} AS b
WHERE b.house_id = a.house_id AND b.value > 108) AS hot, a.house_id IN (SELECT house_id
FROM {W} WHERE value > 109.5) AS top, EXISTS (SELECT * FROM {W} AS c
WHERE c.house_id = a.house_id AND c.value < 1) AS low FROM {W} AS a
GROUP BY window_end, a.house_id HAVING COUNT(*) > 10"""
#: sets with aggregates (correlated.py): NOT IN a one-row COUNT under OR and IN one as a
#: value (each the comparison with the value: COUNT's 0 over no row); EXISTS, NOT IN and ALL
#: over GROUP BY correlated per outer row (HAVING reading the outer row)
NOT_IN_COUNT = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND (a.value > 109
OR a.plug_id NOT IN (SELECT COUNT(*) FROM {W} AS b WHERE b.house_id = a.house_id
AND b.value > 108))"""
IN_COUNT = f"""SELECT a.plug_id, a.value, a.plug_id IN (SELECT COUNT(*) FROM {W} AS b
WHERE b.house_id = a.house_id AND b.value > 109) AS c FROM {W} AS a WHERE a.value > 105"""
EXISTS_GROUP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 105 AND EXISTS (
SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id GROUP BY b.plug_id
HAVING MAX(b.value) > a.value + 2)"""
NOT_IN_GROUP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 104 AND a.plug_id
NOT IN (SELECT MIN(b.plug_id) FROM {W} AS b WHERE b.value > a.value GROUP BY b.house_id)"""
ALL_GROUP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.value >= ALL (
SELECT MAX(b.value) - 1 FROM {W} AS b WHERE b.house_id = a.house_id GROUP BY b.plug_id)"""
#: EXISTS over LIMIT n >= 1 (SQL's idiom `EXISTS (SELECT 1 ... LIMIT 1)`): EXISTS without it
EXISTS_LIMIT = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND (EXISTS (
SELECT 1 FROM {W} AS b WHERE b.plug_id = a.plug_id AND b.value > 108 LIMIT 1) OR NOT EXISTS (
SELECT 1 FROM {W} AS c WHERE c.house_id = a.house_id AND c.value > a.value + 8
ORDER BY c.value LIMIT 2))"""
#: the first row of an order as a value (scalars._first_row): correlated, each plug's
#: previous reading (by id) and the house's first reading 3 W above the row's (NULL where
#: none, also under COALESCE: an empty subquery is NULL); uncorrelated, in SELECT and WHERE
FIRST_CORRELATED = f"""SELECT a.plug_id, a.value, (SELECT b.value FROM {W} AS b
WHERE b.plug_id = a.plug_id AND b.id < a.id ORDER BY b.id DESC LIMIT 1) AS prev,
(SELECT COALESCE(c.value, 0) FROM {W} AS c WHERE c.house_id = a.house_id
AND c.value > a.value + 3 ORDER BY c.id LIMIT 1) AS nxt FROM {W} AS a WHERE a.value > 104"""
FIRST_UNCORRELATED = f"""SELECT a.plug_id, a.value, (SELECT id FROM {W} WHERE value > 109.5
ORDER BY value DESC, id LIMIT 1) AS top_id FROM {W} AS a WHERE a.value > (SELECT value
FROM {W} WHERE plug_id = 3 ORDER BY id DESC LIMIT 1) + 50"""
#: subqueries of the rows an aggregation groups (scalars.before_grouping): an IN in FILTER
#: beside the plain COUNT; a correlated value in SUM's FILTER; NOT EXISTS in a FILTER of
#: HAVING; an IN as a GROUP BY key, written again in SELECT; a value by position
FILTER_IN = f"""SELECT plug_id, COUNT(*) FILTER (WHERE plug_id IN (SELECT plug_id FROM {W}
WHERE value > 100)) AS n, COUNT(*) AS m FROM {W} GROUP BY window_end, plug_id"""
FILTER_VALUE = f"""SELECT a.house_id, SUM(a.value) FILTER (WHERE a.value > (SELECT AVG(b.value)
FROM {W} AS b WHERE b.plug_id = a.plug_id)) AS s FROM {W} AS a GROUP BY window_end, a.house_id"""
FILTER_HAVING = f"""SELECT a.house_id, COUNT(*) AS n FROM {W} AS a
GROUP BY window_end, a.house_id HAVING COUNT(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM {W} AS b
WHERE b.plug_id = a.plug_id AND b.value > a.value + 5)) > 3"""
GROUP_IN = f"""SELECT plug_id IN (SELECT plug_id FROM {W} WHERE value > 105) AS hot,
COUNT(*) AS n, MAX(value) AS top FROM {W}
GROUP BY window_end, plug_id IN (SELECT plug_id FROM {W} WHERE value > 105)"""
GROUP_VALUE = f"""SELECT house_id, value > (SELECT AVG(value) FROM {W}) AS high, COUNT(*) AS n
FROM {W} GROUP BY window_end, 1, 2"""
#: ORDER BY items that are no columns of the result (ranking.order_items): an expression, a
#: column not selected, positions, an aggregate, a correlated value; expressions in OVER
ORDER_EXPR = f"SELECT plug_id, value FROM {W} ORDER BY value * -1 + plug_id, id LIMIT 3"
ORDER_HIDDEN = f"SELECT plug_id FROM {W} ORDER BY value DESC, id LIMIT 4"
ORDER_POSITION = f"SELECT plug_id, value FROM {W} ORDER BY 2 DESC, 1 LIMIT 3"
ORDER_AGGREGATE = f"""SELECT plug_id, MAX(value) AS top FROM {W} GROUP BY window_end, plug_id
ORDER BY COUNT(*) DESC, plug_id LIMIT 3"""
ORDER_VALUE = f"""SELECT a.plug_id, a.value FROM {W} AS a ORDER BY ABS(a.value - (
SELECT AVG(b.value) FROM {W} AS b WHERE b.house_id = a.house_id)), a.id LIMIT 3"""
OVER_EXPRESSIONS = f"""SELECT plug_id, value, ROW_NUMBER() OVER (
PARTITION BY window_end, plug_id % 3 ORDER BY ABS(value - 50), id) AS r FROM {W}"""
#: correlated tests over a UNION (correlated._per_branch): IN, NOT IN (a NULL in a branch),
#: EXISTS, ALL, and an IN as a SELECT value
_B = f"SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > a.value + 5"
IN_UNION = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id IN (
{_B} UNION SELECT c.plug_id + 1 FROM {W} AS c WHERE c.value > 109)"""
NOT_IN_UNION = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id
NOT IN ({_B} UNION ALL SELECT CASE WHEN c.value < 109.6 THEN c.plug_id END FROM {W} AS c
WHERE c.value > 109 AND c.house_id = a.house_id)"""
EXISTS_UNION = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 104 AND EXISTS (
SELECT 1 FROM {W} AS b WHERE b.plug_id = a.plug_id AND b.value > a.value + 3 UNION
SELECT 1 FROM {W} AS c WHERE c.house_id = a.house_id AND c.value < 1)"""
ALL_UNION = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.value >= ALL (
SELECT b.value - 2 FROM {W} AS b WHERE b.plug_id = a.plug_id UNION ALL
SELECT c.value FROM {W} AS c WHERE c.house_id = a.house_id AND c.value < 90)"""
SELECT_IN_UNION = f"""SELECT a.plug_id, a.value, a.plug_id IN (SELECT b.plug_id FROM {W} AS b
WHERE b.value > a.value + 5 UNION SELECT c.house_id FROM {W} AS c WHERE c.value > a.value + 7)
AS m FROM {W} AS a WHERE a.value > 103"""
#: correlated tests over ORDER BY ... LIMIT: each outer row's Top-N (OuterRows.reading_top):
#: IN, NOT IN over rows 2-3 of an order, ANY, and an IN as a SELECT value ordered by a
#: distance to the outer row
IN_TOP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id IN (
SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id ORDER BY b.value DESC, b.id
LIMIT 3)"""
NOT_IN_TOP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id
NOT IN (SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > a.value
ORDER BY b.value, b.id LIMIT 2 OFFSET 1)"""
ANY_TOP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.value < ANY (
SELECT b.value + 1 FROM {W} AS b WHERE b.plug_id = a.plug_id ORDER BY b.id DESC LIMIT 2)"""
SELECT_IN_TOP = f"""SELECT a.plug_id, a.value, a.id IN (SELECT b.id FROM {W} AS b
WHERE b.house_id = a.house_id ORDER BY ABS(b.value - a.value), b.id LIMIT 2) AS near
FROM {W} AS a WHERE a.value > 105"""
#: correlated tests over INTERSECT and EXCEPT [ALL]: the set operation per outer row
#: (OuterRows.reading_set); NULLs of a set operation are equal, IN's are not
IN_INTERSECT = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id IN (
SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > 100 INTERSECT
SELECT c.plug_id FROM {W} AS c WHERE c.value > a.value + 2)"""
NOT_IN_EXCEPT = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id
NOT IN (SELECT CASE WHEN b.value < 108 THEN b.plug_id END FROM {W} AS b WHERE
b.house_id = a.house_id AND b.value > 105 EXCEPT SELECT c.plug_id FROM {W} AS c
WHERE c.value > 109)"""
ALL_EXCEPT_ALL = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.value >= ALL (
SELECT b.value FROM {W} AS b WHERE b.plug_id = a.plug_id EXCEPT ALL SELECT c.value FROM {W} AS c
WHERE c.house_id = a.house_id AND c.value > 100)"""
SELECT_IN_EXCEPT = f"""SELECT a.plug_id, a.value, a.house_id IN (SELECT b.house_id FROM {W} AS b
WHERE b.value > a.value + 3 EXCEPT SELECT c.house_id FROM {W} AS c WHERE c.plug_id = a.plug_id)
AS m FROM {W} AS a WHERE a.value > 103"""
#: a UNION of an EXCEPT: the tests over its branches, one of them over the EXCEPT
IN_UNION_EXCEPT = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id IN (
(SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id EXCEPT SELECT c.plug_id FROM {W}
AS c WHERE c.value > a.value) UNION SELECT d.plug_id + 1 FROM {W} AS d WHERE d.value > 109.5)"""
ANY_INTERSECT_GROUP = f"""SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND a.plug_id
= ANY (SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id GROUP BY b.plug_id
HAVING MAX(b.value) > a.value INTERSECT SELECT c.plug_id FROM {W} AS c WHERE c.value > 50)"""
#: a UNION's ORDER BY an expression over its result (ranking.order_limit)
ORDER_UNION = f"""SELECT plug_id, value FROM {W} WHERE value > 100 UNION ALL SELECT house_id,
value FROM {W} WHERE value < 1 ORDER BY value * plug_id DESC, plug_id, value LIMIT 4"""
#: subqueries in an outer join's ON over both sides: tested on the pairs
LEFT_BOTH_SUB = f"""SELECT a.plug_id, a.n, b.m FROM {_COUNTS} AS a LEFT JOIN {_TOPS} AS b
ON a.plug_id = b.plug_id AND b.m > (SELECT MAX(t.value) FROM {W} AS t
WHERE t.plug_id = a.plug_id + 1)"""
FULL_BOTH_IN = f"""SELECT a.plug_id, b.plug_id AS p, a.n, b.m FROM {_COUNTS} AS a FULL JOIN
{_TOPS} AS b ON a.plug_id = b.plug_id AND (a.n > 125 OR b.plug_id + a.n IN (
SELECT plug_id + 120 FROM {W} WHERE value > 107))"""


def oracle(text: str, rows, tau: dt.datetime, tables: dict | None = None) -> Counter:
    """DuckDB's own answer of `text` over the window [tau - 10 s, tau) of `rows`."""
    con = duckdb.connect()
    w = rows.filter([tau - dt.timedelta(seconds=10) <= t < tau
                     for t in rows.column("ts").to_pylist()])
    con.register("w", w)
    for name, t in (tables or {}).items():
        con.register(name, t)
    q = text.replace(W, "w").replace("GROUP BY window_end, ", "GROUP BY ").replace(
        "PARTITION BY window_end, ", "PARTITION BY ")
    out = con.sql(q).fetchall()
    con.close()
    return Counter(tuple(round(x, 6) if isinstance(x, float) else x for x in r) for r in out)


def at(got, tau: dt.datetime, cols: list[str]) -> Counter:
    rows = zip(*(got.column(c).to_pylist() for c in ["tau", *cols]))
    return Counter(tuple(round(x, 6) if isinstance(x, float) else x for x in r[1:])
                   for r in rows if r[0] == tau)


@pytest.mark.parametrize("text", [IN, NOT_IN, NOT_IN_NULLS, PAIRS, EXISTS, NOT_EXISTS, SOME,
                                  NONE, HIGH, MEAN, COUNTED, NULL_KEYS, SEMI, ANTI, OVER,
                                  OVER_ALL, DISTINCT_ON, DISTINCT_ON_LIMIT, DISTINCT_ON_EXPR,
                                  LAG_LEAD, LEFT_ON,
                                  FULL_ON, HAVING_VALUE, HAVING_CORRELATED, HAVING_IN,
                                  HAVING_NOT_EXISTS, LEFT_CROSS, FULL_CROSS, RIGHT_CROSS,
                                  LEFT_ONE_SIDE, ON_SUB, SEMI_LEFT, ANTI_LEFT, LEFT_ON_SUB,
                                  FULL_ON_SUB, SEMI_BOTH, ANTI_BOTH],
                         ids=["in", "not_in", "not_in_nulls", "pairs", "exists", "not_exists",
                              "some", "none", "high", "mean", "counted", "null_keys", "semi",
                              "anti", "over", "over_all", "distinct_on",
                              "distinct_on_limit", "distinct_on_expr", "lag_lead",
                              "left_on", "full_on",
                              "having_value", "having_correlated", "having_in",
                              "having_not_exists", "left_cross", "full_cross",
                              "right_cross", "left_one_side", "on_sub", "semi_left",
                              "anti_left", "left_on_sub", "full_on_sub", "semi_both",
                              "anti_both"])
def test_in_subqueries_equal_the_reference_and_duckdb_s_own_sql(text):
    q = sql(text, STREAMS)
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(q, rows, per_batch_s=3)
    taus = sorted(set(got.column("tau").to_pylist()))
    first = min(rows.column("ts").to_pylist())
    every = [first.replace(microsecond=0) + dt.timedelta(seconds=s) for s in range(1, 31)]
    for tau in every[::3]:
        assert at(got, tau, list(q.schema)) == oracle(text, rows, tau), tau
    assert len(taus) > 5


#: the tests and correlations of marks.py and correlated.py; `make test` runs those kept
_MORE = {"or_in": OR_IN, "select_in": SELECT_IN, "not_or_in": NOT_OR_IN,
         "or_not_exists": OR_NOT_EXISTS, "having_or": HAVING_OR,
         "select_exists": SELECT_EXISTS, "exists_above": EXISTS_ABOVE,
         "not_exists_above": NOT_EXISTS_ABOVE, "correlated_in": CORRELATED_IN,
         "correlated_not_in": CORRELATED_NOT_IN, "above": ABOVE, "exists_join": EXISTS_JOIN,
         "value_join": VALUE_JOIN, "left_both_sub": LEFT_BOTH_SUB,
         "full_both_in": FULL_BOTH_IN, "ge_all": GE_ALL, "not_any": NOT_ANY,
         "select_all": SELECT_ALL, "agg_share": AGG_SHARE, "agg_correlated": AGG_CORRELATED,
         "not_in_count": NOT_IN_COUNT, "in_count": IN_COUNT, "exists_group": EXISTS_GROUP,
         "not_in_group": NOT_IN_GROUP, "all_group": ALL_GROUP, "exists_limit": EXISTS_LIMIT,
         "first_correlated": FIRST_CORRELATED, "first_uncorrelated": FIRST_UNCORRELATED,
         "filter_in": FILTER_IN, "filter_value": FILTER_VALUE, "filter_having": FILTER_HAVING,
         "group_in": GROUP_IN, "group_value": GROUP_VALUE, "order_expr": ORDER_EXPR,
         "order_hidden": ORDER_HIDDEN, "order_position": ORDER_POSITION,
         "order_aggregate": ORDER_AGGREGATE, "order_value": ORDER_VALUE,
         "over_expressions": OVER_EXPRESSIONS, "order_union": ORDER_UNION,
         "in_union": IN_UNION, "not_in_union": NOT_IN_UNION, "exists_union": EXISTS_UNION,
         "all_union": ALL_UNION, "select_in_union": SELECT_IN_UNION, "in_top": IN_TOP,
         "not_in_top": NOT_IN_TOP, "any_top": ANY_TOP, "select_in_top": SELECT_IN_TOP,
         "in_intersect": IN_INTERSECT, "not_in_except": NOT_IN_EXCEPT,
         "all_except_all": ALL_EXCEPT_ALL, "select_in_except": SELECT_IN_EXCEPT,
         "in_union_except": IN_UNION_EXCEPT, "any_intersect_group": ANY_INTERSECT_GROUP}


@pytest.mark.parametrize("which", sampled(list(_MORE), keep=[  # a sample of each module
    "select_in", "not_or_in", "correlated_not_in", "above", "exists_join", "full_both_in",
    "select_all", "agg_correlated", "exists_group", "first_correlated", "filter_value",
    "group_in", "order_aggregate", "order_value", "not_in_union", "not_in_top",
    "not_in_except", "any_intersect_group"]))
def test_marked_tests_and_wider_correlations_equal_duckdb_s_own_sql(which):
    test_in_subqueries_equal_the_reference_and_duckdb_s_own_sql(_MORE[which])


#: each kind of test (marks.py, correlated.py) in each context: a conjunct, under OR, under
#: NOT over OR (NULL kept), under IS NOT TRUE (NULL read), in CASE, as a SELECT value
_TESTS = [
    "a.plug_id IN (SELECT b.plug_id FROM {W} AS b WHERE b.value > 108)",
    ("a.plug_id NOT IN (SELECT CASE WHEN b.value < 109.6 THEN b.plug_id END FROM {W} AS b "
    "WHERE b.value > 108)"),
    "EXISTS (SELECT 1 FROM {W} AS b WHERE b.plug_id = a.plug_id AND b.value > a.value + 4)",
    "NOT EXISTS (SELECT 1 FROM {W} AS b WHERE b.house_id = a.house_id AND b.value > a.value + 6)",
    "a.value > ALL (SELECT b.value - 3 FROM {W} AS b WHERE b.plug_id = a.plug_id)",
    ("a.value < ANY (SELECT b.value - 1 FROM {W} AS b WHERE b.house_id = a.house_id "
    "AND b.plug_id <> a.plug_id)"),
    ("a.plug_id IN (SELECT COUNT(*) FROM {W} AS b WHERE b.house_id = a.house_id "
    "AND b.value > 108.5)"),
    ("a.value > (SELECT AVG(b.value) FROM {W} AS b WHERE b.house_id = a.house_id "
    "AND b.id < a.id) + 20"),
    ("a.value >= (SELECT b.value FROM {W} AS b WHERE b.plug_id = a.plug_id ORDER BY b.id DESC "
    "LIMIT 1)"),
    ("a.plug_id IN (SELECT b.plug_id FROM {W} AS b WHERE b.house_id = a.house_id "
    "GROUP BY b.plug_id HAVING MAX(b.value) > a.value + 1)"),
]
_CONTEXTS = ["{t}", "(a.value > 106 OR {t})", "NOT (a.house_id = 1 OR {t})",
             "({t}) IS NOT TRUE", "CASE WHEN a.value < 104 THEN {t} ELSE NOT ({t}) END",
             "select"]


@pytest.mark.parametrize("t,c", sampled(
    [(t, c) for t in range(len(_TESTS)) for c in range(len(_CONTEXTS))],
    keep=[(0, 0), (2, 2), (4, 4), (6, 3), (8, 1), (9, 5)]))
def test_each_test_in_each_context_equals_duckdb_s_own_sql(t, c):
    test = _TESTS[t].format(W=W)
    if _CONTEXTS[c] == "select":
        text = f"SELECT a.plug_id, a.value, {test} AS m FROM {W} AS a WHERE a.value > 103"
    else:
        text = (f"SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 100 AND "
                f"{_CONTEXTS[c].format(t=test)}")
    q = sql(text, STREAMS)
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(q, rows, per_batch_s=3)
    first = min(rows.column("ts").to_pylist()).replace(microsecond=0)
    for tau in (first + dt.timedelta(seconds=s) for s in range(1, 31, 3)):
        assert at(got, tau, list(q.schema)) == oracle(text, rows, tau), tau
    assert got.num_rows > 0

def test_an_in_as_a_value_is_null_where_sql_says_and_not_or_keeps_it_so():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    hit = check_db(sql(SELECT_IN, STREAMS), rows, per_batch_s=3).column("hit").to_pylist()
    assert {True, False, None} <= set(hit)
    # NOT (a OR x IN s) with x IN s NULL is NULL, not TRUE: it keeps fewer rows than
    # NOT a AND x NOT IN s read as two-valued would
    kept = check_db(sql(NOT_OR_IN, STREAMS), rows, per_batch_s=3).num_rows
    loose = check_db(sql(NOT_OR_IN.replace(f"plug_id + 1 IN {_NULLED}", f"plug_id + 1 IN "
                                            f"{_NULLED} IS TRUE"), STREAMS), rows,
                     per_batch_s=3).num_rows
    assert 0 < kept < loose, (kept, loose)


def test_an_outer_condition_over_both_sides_keeps_failing_rows_unmatched():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(sql(LEFT_CROSS, STREAMS), rows, per_batch_s=3)
    m = got.column("m").to_pylist()
    assert None in m and any(x is not None for x in m)  # some keys matched, some failed
    n_left = check_db(sql(_COUNTS.strip("()"), STREAMS), rows, per_batch_s=3).num_rows
    assert got.num_rows == n_left  # each left row once: its key meets one right row


def test_not_in_keeps_no_row_where_the_subquery_holds_a_null():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(sql(NOT_IN_NULLS, STREAMS), rows, per_batch_s=3)
    kept = set(got.column("tau").to_pylist())
    for tau in kept:  # no reading in (109.7, 110] in the window: no NULL in the subquery
        window = [v for t, v in zip(rows.column("ts").to_pylist(),
                                    rows.column("value").to_pylist())
                  if tau - dt.timedelta(seconds=10) <= t < tau]
        assert window and not any(109.7 < v <= 110 for v in window), tau
    assert 0 < len(kept) < 25


def test_not_exists_keeps_null_keys_and_uncorrelated_exists_splits_the_instants():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(sql(NOT_EXISTS, STREAMS), rows, per_batch_s=3)
    assert None in got.column("k").to_pylist()  # NOT IN would drop them
    some, none = (set(check_db(sql(t, STREAMS), rows, per_batch_s=3).column("tau").to_pylist())
                  for t in (SOME, NONE))
    assert some and none and not some & none, (len(some), len(none))


def test_scalar_subqueries_give_sql_s_value_over_no_row():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    n = check_db(sql(COUNTED, STREAMS), rows, per_batch_s=3).column("n").to_pylist()
    assert 0 in n and max(n) > 0
    got = check_db(sql(NULL_KEYS, STREAMS), rows, per_batch_s=3)
    pairs = set(zip(got.column("k").to_pylist(), got.column("top").to_pylist()))
    assert (None, -1) in pairs and any(k is not None and t > 90 for k, t in pairs)


def test_cq1_as_a_scalar_subquery_has_the_rows_of_its_join():
    from pathlib import Path

    from db.reference import reference_result
    from federation.results import diff_results

    cq1 = (Path(__file__).resolve().parents[1] / "benchmarks" / "queries_sql" / "cq1.sql")
    hop = "HOP(TABLE smartplug, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND)"
    joined = cq1.read_text().replace("INTERVAL '5' MINUTE", "INTERVAL '10' SECOND")
    scalar = f"""INSERT INTO CQ1
    SELECT l.house_id, l.household_id, l.plug_id, COUNT(*) AS n_high FROM {hop} AS l
    WHERE l.property = 1 AND l.value > 0.9 * (SELECT MAX(p.value) FROM {hop} AS p
      WHERE p.property = 1 AND p.house_id = l.house_id AND p.household_id = l.household_id
      AND p.plug_id = l.plug_id)
    GROUP BY window_end, l.house_id, l.household_id, l.plug_id"""
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(sql(scalar, STREAMS), rows, per_batch_s=3)
    assert diff_results(got, reference_result(sql(joined, STREAMS), rows)) is None


def test_semi_anti_and_natural_joins_are_their_plans():
    assert sql(SEMI.replace("SEMI JOIN", "LEFT SEMI JOIN"), STREAMS) == sql(SEMI, STREAMS)
    assert sql(ANTI.replace("ANTI JOIN", "LEFT ANTI JOIN"), STREAMS) == sql(ANTI, STREAMS)
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    assert None in check_db(sql(ANTI, STREAMS), rows, per_batch_s=3).column("k").to_pylist()
    sub = "(SELECT plug_id, house_id, MAX(value) AS top FROM {w} GROUP BY plug_id, house_id)"
    natural = f"SELECT * FROM {sub.format(w=W)} AS a NATURAL JOIN {sub.format(w=H10)} AS b"
    assert sql(natural, STREAMS) == sql(natural.replace("NATURAL JOIN", "JOIN").replace(
        "AS b", "AS b USING (plug_id, house_id, top)"), STREAMS)
    with pytest.raises(SqlError, match="needs ON or USING"):
        sql(SEMI.replace("\nON a.plug_id = b.plug_id AND b.value > 100", ""), STREAMS)


def test_over_a_partition_is_the_dsl_s_over():
    from federation.expressions import avg
    from federation.logical import window
    from tests.test_sql import S

    assert sql(f"SELECT plug_id, value, AVG(value) OVER (PARTITION BY plug_id) AS m FROM {W}",
               STREAMS) == (window(S, range=10, slide=1).over("plug_id", _over=avg("value"))
                            .project("plug_id", "value", m="_over").rstream())


def test_over_partitions_null_keys_and_refusals():
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(sql(OVER, STREAMS), rows, per_batch_s=3)
    assert any(k is None and n > 1 for k, n in zip(got.column("k").to_pylist(),
                                                  got.column("n").to_pylist()))
    for text, why in [
            ((f"SELECT SUM(value) OVER (PARTITION BY plug_id ORDER BY ts RANGE BETWEEN "
             f"INTERVAL '1' MONTH PRECEDING AND CURRENT ROW) AS s FROM {W}"),
             "frame bound"),
            ((f"SELECT SUM(value) OVER (PARTITION BY plug_id ORDER BY ts RANGE BETWEEN "
             f"2 PRECEDING AND CURRENT ROW) AS s FROM {W}"),
             "orders by a number .offsets numbers. or a timestamp"),
            (f"SELECT KURTOSIS(value) OVER (PARTITION BY plug_id ORDER BY ts) AS s FROM {W}",
             "window functions .OVER .... are not supported"),
            (f"SELECT plug_id, SUM(COUNT(*)) OVER () AS s FROM {W} GROUP BY plug_id",
             "beside GROUP BY or aggregates"),
            (f"SELECT MAX(value) OVER (PARTITION BY plug_id % 2) AS s FROM {W}",
             "partition and order by columns")]:
        with pytest.raises(SqlError, match=why):
            sql(text, STREAMS)


def test_in_over_a_table_with_repeated_values_keeps_each_row_once(tmp_path):
    import pyarrow as pa

    db = tmp_path / "ref.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE watched AS SELECT * FROM (VALUES (1, 'a'), (1, 'b'), (3, 'c'), "
                "(NULL, 'd')) t(house_id, tag)")
    con.close()
    text = f"""SELECT plug_id, house_id, value FROM {W}
    WHERE house_id IN (SELECT house_id FROM watched WHERE tag <> 'c') AND value > 0"""
    q = sql(text, STREAMS, tables=db)
    rows = rows_of(seconds=20, rate=60, plugs=28, houses=4)
    got = check_db(q, rows, per_batch_s=3)
    assert set(got.column("house_id").to_pylist()) == {1}
    watched = pa.table({"house_id": [1, 1, 3, None], "tag": ["a", "b", "c", "d"]})
    first = min(rows.column("ts").to_pylist()).replace(microsecond=0)
    for s in (4, 11, 17):
        tau = first + dt.timedelta(seconds=s)
        assert at(got, tau, list(q.schema)) == oracle(text, rows, tau, {"watched": watched})
    with pytest.raises(SqlError, match="NOT IN over a database table alone"):
        sql(text.replace(" IN (", " NOT IN ("), STREAMS, tables=db)
    # a test per row of a table alone (correlated, or under OR): refused, naming the join
    for per_row in ((f"SELECT w.tag FROM watched AS w WHERE EXISTS (SELECT * FROM {W} AS b "
                    "WHERE b.house_id = w.house_id AND b.value > 100 + w.house_id)"),
                    (f"SELECT tag FROM watched WHERE tag = 'a' OR house_id IN (SELECT "
                    f"house_id FROM {W})")):
        with pytest.raises(SqlError, match="database tables alone: such rows are not "
                                           "numbered .* join the table with the stream"):
            sql(per_row, STREAMS, tables=db)


@pytest.mark.parametrize("text,why", [
    (f"SELECT plug_id FROM {W} WHERE value > 1 OR plug_id = ANY (SELECT plug_id, value "  # noqa: ISC004
     f"FROM {W})", "ANY and ALL compare with a subquery of one column"),
    (f"SELECT plug_id, COUNT(*) FILTER (WHERE plug_id IN (SELECT ts FROM {W})) AS n "  # noqa: ISC004
     f"FROM {W} GROUP BY plug_id", "IN compares INT with the subquery's 'ts'"),
    (f"SELECT plug_id FROM {W} WHERE plug_id IN (SELECT plug_id, house_id FROM {W})",
     "IN compares 1 value.s. with a subquery of 2 column.s."),
    (f"SELECT plug_id FROM {W} WHERE plug_id IN (SELECT ts FROM {W})",
     "IN compares INT with the subquery's 'ts' .TIMESTAMP.: cast one side"),
    (f"SELECT plug_id FROM {W} AS a WHERE plug_id IN (SELECT plug_id FROM {W} AS b "  # noqa: ISC004
     "WHERE b.value > a.value LIMIT 3)", "a correlated IN, ANY or ALL over LIMIT takes"),
    (f"SELECT a.plug_id FROM {W} AS a WHERE a.plug_id IN (SELECT plug_id FROM {W} AS b "  # noqa: ISC004
     f"WHERE b.value > a.value INTERSECT SELECT plug_id FROM {W} ORDER BY 1 LIMIT 2)",
     "a correlated test over a set operation reads SELECTs of named columns without ORDER"),
    (f"SELECT plug_id FROM {W} AS a WHERE plug_id IN (SELECT plug_id FROM {W} AS b "  # noqa: ISC004
     "WHERE b.value > c.value)", "unknown table or alias 'c'"),
    (f"SELECT plug_id FROM {W} WHERE value > (SELECT value FROM {W})",
     "a subquery as a value is one aggregate without GROUP BY"),
    (f"SELECT plug_id FROM {W} WHERE value > (SELECT MAX(value) FROM {W} GROUP BY plug_id)",
     "a subquery as a value is one aggregate without GROUP BY"),
    (f"SELECT a.plug_id, (SELECT b.value FROM {W} AS b WHERE b.plug_id = a.plug_id "  # noqa: ISC004
     f"LIMIT 1) AS v FROM {W} AS a", "LIMIT 1 without ORDER BY: which row"),
    (f"SELECT plug_id, (SELECT value FROM {W} ORDER BY value LIMIT 2) AS v FROM {W}",
     "or the first row of an order: .SELECT x FROM ... ORDER BY y DESC LIMIT 1."),
    (f"SELECT a.plug_id, EXISTS (SELECT * FROM {W} AS b WHERE b.value < a.value) AS e, "  # noqa: ISC004
     f"COUNT(*) AS n FROM {W} AS a GROUP BY a.plug_id",
     "unknown column a.value .available: plug_id."),
])
def test_subqueries_that_are_not_conjunct_in_tests_are_refused(text, why):
    with pytest.raises(SqlError, match=why):
        sql(text, STREAMS)


@pytest.mark.parametrize("clause", ["WHERE", "HAVING"])
def test_an_exists_refused_names_the_clause_it_stands_in(clause):
    exists = (f"EXISTS (SELECT MAX(b.value) FROM {W} AS b WHERE b.plug_id = a.plug_id "
              "HAVING MAX(b.value) > 100)")
    text = (f"SELECT a.plug_id, COUNT(*) AS n FROM {W} AS a WHERE {exists} GROUP BY a.plug_id"
            if clause == "WHERE" else
            f"SELECT a.plug_id, COUNT(*) AS n FROM {W} AS a GROUP BY a.plug_id HAVING {exists}")
    with pytest.raises(SqlError, match="EXISTS over a UNION, or a SELECT with ORDER BY, LIMIT or "
                       "aggregates without GROUP BY") as e:
        sql(text, STREAMS)
    assert e.value.clause == clause and e.value.line is not None, str(e.value)


#: NOT IN cut at every boundary: each window's selection, projection, group by ... apart
NOT_IN_CUT = "op1=db,op2=spe,op3=db,op4=spe,op5=db,op6=spe,op7=db,op8=spe,op9=db,op10=spe"


#: COUNTED cut at every boundary: the selections, the COUNT, the key's projections, the
#: LEFT join and the COUNT's 0 apart
COUNTED_CUT = "op1=db,op2=spe,op3=db,op4=spe,op5=db,op6=spe,op7=db,op8=spe"
#: MEAN's two global averages, their joins on the instant and the selection apart
MEAN_CUT = "op1=spe,op2=db,op3=spe,op4=db,op5=spe,op6=db,op7=spe,op8=db,op9=spe,op10=db"


@pytest.mark.spark
@pytest.mark.parametrize("which,placement", sampled(
    [("not_in", "spe"), ("not_in", NOT_IN_CUT), ("counted", COUNTED_CUT), ("mean", MEAN_CUT),
     ("not_exists", "spe"), ("high", "spe"), ("over", "spe"), ("over_all", "db"),
     ("lag_lead", "spe"), ("distinct_on", "spe"), ("full_on", "spe"),
     ("correlated_in", "spe"), ("correlated_in", "cut"), ("exists_join", "cut"),
     ("select_in", "spe"), ("first_correlated", "cut"), ("filter_having", "cut"),
     ("group_in", "spe"), ("order_value", "cut"), ("over_expressions", "spe"),
     ("exists_union", "cut"), ("in_top", "cut"), ("in_intersect", "cut"),
     ("not_in_except", "spe")],
    keep=[("not_in", NOT_IN_CUT), ("counted", COUNTED_CUT), ("filter_having", "cut")]))
def test_subqueries_in_spark_and_across_the_engines(spark, tmp_path, which, placement):
    from federation.smartplug import smartplug_stream
    from federation.smartplug.datagen import generate
    from tests.test_stranger_queries import run_checked

    d = tmp_path / "data"
    generate(d, rate=60, seconds=16, plugs=28, houses=4, seed=1)
    s = smartplug_stream(rate=60, plugs=28, houses=4)
    text = {"not_in": NOT_IN, "counted": COUNTED, "mean": MEAN, "not_exists": NOT_EXISTS,
            "high": HIGH, "over": OVER, "over_all": OVER_ALL, "lag_lead": LAG_LEAD,
            "distinct_on": DISTINCT_ON_LIMIT, "full_on": FULL_ON, **_MORE}[which]
    q = sql(text, {"smartplug": s})
    if placement == "cut":  # the engines alternating by depth: every boundary cut
        from benchmarks.fuzz_queries import alternating_placements

        placement = alternating_placements(q)[0]
    run_checked(spark, q, placement, d, tmp_path / "run", 5)


def test_exists_correlated_by_equalities_is_the_in_subquery():
    assert sql(EXISTS, STREAMS) == sql(
        f"SELECT a.plug_id, a.value FROM {W} AS a WHERE a.value > 10 AND (a.plug_id, "
        f"a.house_id) IN (SELECT b.plug_id, b.house_id FROM {W} AS b WHERE b.value > 100)",
        STREAMS)
    for text, words in [
            ((f"SELECT a.value FROM {W} AS a WHERE EXISTS (SELECT b.plug_id FROM {W} AS b "
              "WHERE b.plug_id = a.plug_id ORDER BY b.value LIMIT 2 OFFSET 1)"),
             "ORDER BY, LIMIT")]:
        with pytest.raises(SqlError, match=words) as e:
            sql(text, STREAMS)
        assert e.value.clause == "WHERE", e.value
