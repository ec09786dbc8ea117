-- Nexmark q2 as the Nexmark project runs it on Flink SQL (nexmark-flink, queries/q2.sql)
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
