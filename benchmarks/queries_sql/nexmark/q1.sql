-- Nexmark q1, currency conversion: each bid's price in euros. 0.908 * price is a DOUBLE
-- in every placement (Flink SQL gives DECIMAL(23, 3)).
INSERT INTO q1
SELECT auction, bidder, 0.908 * price AS price, dateTime, extra
FROM bid
