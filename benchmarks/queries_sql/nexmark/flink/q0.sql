-- Nexmark q0 as the Nexmark project runs it on Flink SQL (nexmark-flink, queries/q0.sql)
SELECT auction, bidder, price, `dateTime`, extra FROM bid
