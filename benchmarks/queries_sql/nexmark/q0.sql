-- Nexmark q0, pass-through: every bid once, as it arrives. A stream without a window
-- table function is read through CQL's NOW window (each row at the instant of its second).
INSERT INTO q0
SELECT auction, bidder, price, dateTime, extra
FROM bid
