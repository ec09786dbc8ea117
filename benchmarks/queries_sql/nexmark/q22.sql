-- Nexmark q22, the url's directories: Flink's SPLIT_INDEX(url, '/', 3) counts from 0,
-- SPLIT_PART(url, '/', 4) from 1.
INSERT INTO q22
SELECT auction, bidder, price, channel,
       SPLIT_PART(url, '/', 4) AS dir1,
       SPLIT_PART(url, '/', 5) AS dir2,
       SPLIT_PART(url, '/', 6) AS dir3
FROM bid
