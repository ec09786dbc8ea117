-- Nexmark q1 as the Nexmark project runs it on Flink SQL (nexmark-flink, queries/q1.sql)
SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid
